//! A segment's part in transactions: its `.txnindex` of the transactions aborted by markers in
//! it (`log::txn_index`), and the offset a fetch of part of the segment reaches, which bounds
//! the aborted transactions the fetch must list.

use super::{LogSegment, SegmentSlice};
use crate::log::scan::{ScanStep, LOOKUP_CHUNK_BYTES};
use crate::log::txn_index::AbortedTxn;
use crate::log::LogError;

impl LogSegment {
    /// Whether `slice` was cut from this segment's `.log`.
    pub(in crate::log) fn log_file_is(&self, slice: &SegmentSlice) -> bool {
        std::sync::Arc::ptr_eq(&self.log, slice.file())
    }

    /// Appends an aborted transaction whose marker lies in this segment.
    pub(in crate::log) fn append_aborted_txn(&mut self, txn: &AbortedTxn) -> Result<(), LogError> {
        Ok(self.txn_index.append(txn)?)
    }

    /// The last offset of the last aborted transaction indexed here.
    pub(in crate::log) fn last_aborted_txn_offset(&self) -> Option<i64> {
        self.txn_index.last_offset()
    }

    /// The aborted transactions indexed here that overlap [`fetch_offset`, `upper_bound`), and
    /// whether no later segment can hold more.
    pub(in crate::log) fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound: i64,
    ) -> Result<(Vec<AbortedTxn>, bool), LogError> {
        Ok(self.txn_index.collect(fetch_offset, upper_bound)?)
    }

    /// Every aborted transaction indexed here.
    pub(in crate::log) fn aborted_txns(&self) -> Result<Vec<AbortedTxn>, LogError> {
        Ok(self.txn_index.entries()?)
    }

    /// Drops the index entries at or past `offset`; with `offset` at the base offset, all.
    pub(in crate::log) fn truncate_txn_index(&mut self, offset: i64) -> Result<(), LogError> {
        Ok(self.txn_index.truncate_to(offset)?)
    }

    /// The base offset of the first batch that starts at or after `position`, None when no
    /// batch does (the position is the end of the segment): where a fetch that read the
    /// segment up to `position` stops.
    pub(in crate::log) fn offset_at_position(
        &self,
        position: u64,
    ) -> Result<Option<i64>, LogError> {
        let start = self.offset_index.position_at_or_below(position);
        let mut scanner = self.scanner(start, LOOKUP_CHUNK_BYTES);
        loop {
            match scanner.next_header()? {
                ScanStep::Batch {
                    position: at,
                    header,
                } if at >= position => return Ok(Some(header.base_offset)),
                ScanStep::Batch { .. } => {}
                ScanStep::End | ScanStep::Torn { .. } | ScanStep::Corrupt { .. } => {
                    return Ok(None)
                }
            }
        }
    }
}
