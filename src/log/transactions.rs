//! The log's side of transactions: the aborted-transaction indexes of its segments. The caller
//! (the partition, which owns producer state and decides the last stable offset) appends an
//! entry when an ABORT marker completes a transaction, and asks for the aborted transactions a
//! read_committed fetch covers (Kafka's `collectAbortedTransactions`). After a recovery emptied
//! the indexes of the recovered segments, the caller's replay of the log indexes every aborted
//! transaction again from `txn_index_rebuild_from` on.

use super::segment::SegmentSlice;
use super::txn_index::AbortedTxn;
use super::{LogError, PartitionLog};

/// A fetch's read: the byte range, and the offset the range reaches (the first offset it does
/// not hold, at most the next segment's base offset), which bounds the aborted transactions the
/// fetch must list.
pub struct FetchRead {
    pub slice: Option<SegmentSlice>,
    pub upper_bound_offset: i64,
}

impl PartitionLog {
    /// Indexes a transaction aborted by a marker just appended (which lies in the active
    /// segment).
    pub fn append_aborted_txn(&mut self, txn: &AbortedTxn) -> Result<(), LogError> {
        self.active.append_aborted_txn(txn)
    }

    /// The first segment whose transaction index loading emptied, if any: the caller's replay
    /// must index the aborted transactions from there on (`index_replayed_aborted_txn`).
    pub fn txn_index_rebuild_from(&self) -> Option<i64> {
        self.txn_index_rebuild_from
    }

    /// Replay's counterpart of `append_aborted_txn`: indexes `txn` in the segment holding its
    /// marker, unless that segment was not emptied by recovery or already holds it.
    pub fn index_replayed_aborted_txn(&mut self, txn: &AbortedTxn) -> Result<(), LogError> {
        let Some(from) = self.txn_index_rebuild_from else {
            return Ok(());
        };
        let active_base = self.active.base_offset();
        let segment = if txn.last_offset >= active_base {
            &mut self.active
        } else {
            match self.inactive.range_mut(..=txn.last_offset).next_back() {
                Some((_, segment)) => segment,
                None => return Ok(()),
            }
        };
        if segment.base_offset() < from
            || segment
                .last_aborted_txn_offset()
                .is_some_and(|last| last >= txn.last_offset)
        {
            return Ok(());
        }
        segment.append_aborted_txn(txn)
    }

    /// The replay has indexed everything: later loads trust the indexes again.
    pub fn txn_index_rebuilt(&mut self) {
        self.txn_index_rebuild_from = None;
    }

    /// The aborted transactions that overlap [`fetch_offset`, `upper_bound_offset`): from the
    /// segment holding `fetch_offset` on, until an entry's last stable offset reaches the bound.
    /// A transaction that began before `fetch_offset` and was aborted after it is included.
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<Vec<AbortedTxn>, LogError> {
        let mut found = Vec::new();
        for segment in self.segments_from(fetch_offset) {
            let (txns, complete) =
                segment.collect_aborted_txns(fetch_offset, upper_bound_offset)?;
            found.extend(txns);
            if complete {
                break;
            }
        }
        Ok(found)
    }

    /// Every aborted transaction indexed in the segments that hold offsets in
    /// [`from_offset`, `to_offset`): the log cleaner's view of what it may remove.
    pub fn aborted_txns_between(
        &self,
        from_offset: i64,
        to_offset: i64,
    ) -> Result<Vec<AbortedTxn>, LogError> {
        let mut found = Vec::new();
        for segment in self.segments_from(from_offset) {
            if segment.base_offset() >= to_offset {
                break;
            }
            found.extend(segment.aborted_txns()?);
        }
        Ok(found)
    }

    /// `read_slice`, with the offset the read reaches.
    pub fn read_for_fetch(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        max_offset: i64,
    ) -> Result<FetchRead, LogError> {
        let slice = self.read_slice(fetch_offset, max_bytes, min_one_batch, max_offset)?;
        let Some(read) = &slice else {
            return Ok(FetchRead {
                slice,
                upper_bound_offset: fetch_offset,
            });
        };
        let end_position = read.position() + read.len() as u64;
        let segment = self
            .segments_from(fetch_offset)
            .find(|segment| segment.log_file_is(read))
            .ok_or_else(|| LogError::Corrupt("fetched segment not found".to_string()))?;
        let upper_bound_offset = match segment.offset_at_position(end_position)? {
            Some(offset) => offset,
            None => self.segment_end_offset(segment),
        };
        Ok(FetchRead {
            slice,
            upper_bound_offset,
        })
    }
}
