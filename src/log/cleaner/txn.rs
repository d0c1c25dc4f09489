//! What compaction does with transactions (Kafka's `CleanedTransactionMetadata`): walking the
//! batches of a round in offset order, with the aborted transactions that overlap it (from the
//! `.txnindex` files), it tells which data batches belong to an aborted transaction (removed
//! whole) and which markers may go: an ABORT marker once no batch of its transaction is left, a
//! COMMIT marker once none of its transaction's batches is left before it; both only after the
//! delete horizon their first cleaning stamps. An ABORT marker kept because its transaction's
//! batches are removed in this pass keeps its entry in the rewritten segment's `.txnindex`.
//!
//! Kafka keeps one such view per group of segments it rewrites, so a COMMIT marker whose batches
//! lie in an earlier group may go while they stay; a replay of the log from before them (after
//! a crash with no producer snapshot to start from) would then find their transaction open.
//! sluice keeps one view for the whole round, which starts at the log start: a marker goes only
//! once no batch of its transaction is left anywhere before it.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::log::txn_index::AbortedTxn;
use crate::record_batch::control::TxnMarker;
use crate::record_batch::header::BatchHeader;

/// One pass's view of the transactions in its range.
pub(super) struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset.
    aborted: VecDeque<AbortedTxn>,
    /// Aborted transactions reached: producer → (the transaction, whether a batch was seen).
    ongoing_aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Producers with a batch of a committed (or open) transaction seen in this pass.
    ongoing_committed: HashSet<i64>,
    /// The index entries the rewritten segments keep, in marker order.
    pub(super) kept_index: Vec<AbortedTxn>,
}

impl TxnTracker {
    /// A pass over [`from`, `to`), given aborted transactions that may overlap it.
    pub(super) fn new(aborted: &[AbortedTxn], from: i64, to: i64) -> TxnTracker {
        let mut overlapping: Vec<AbortedTxn> = aborted
            .iter()
            .filter(|t| t.last_offset >= from && t.first_offset < to)
            .copied()
            .collect();
        overlapping.sort_by_key(|t| t.first_offset);
        TxnTracker {
            aborted: overlapping.into(),
            ongoing_aborted: HashMap::new(),
            ongoing_committed: HashSet::new(),
            kept_index: Vec::new(),
        }
    }

    fn reach(&mut self, offset: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|t| t.first_offset <= offset)
        {
            if let Some(txn) = self.aborted.pop_front() {
                self.ongoing_aborted
                    .entry(txn.producer_id)
                    .or_insert((txn, false));
            }
        }
    }

    /// A data batch: true when it belongs to an aborted transaction (its records all go).
    pub(super) fn on_batch(&mut self, header: &BatchHeader) -> bool {
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&header.producer_id) {
            Some((_, seen)) => {
                *seen = true;
                true
            }
            None => {
                self.ongoing_committed.insert(header.producer_id);
                false
            }
        }
    }

    /// A control batch (`marker` None for an emptied one): true when it may go once its delete
    /// horizon has passed.
    pub(super) fn on_control(&mut self, header: &BatchHeader, marker: Option<TxnMarker>) -> bool {
        self.reach(header.last_offset());
        let Some(marker) = marker else {
            // Emptied by an earlier cleaning: nothing is left to mark.
            return true;
        };
        let producer_id = header.producer_id;
        if marker.commit {
            return !self.ongoing_committed.remove(&producer_id);
        }
        match self.ongoing_aborted.remove(&producer_id) {
            // Its batches are removed in this pass: keep the marker, and its index entry.
            Some((txn, true)) => {
                self.kept_index.push(txn);
                false
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, base: i64, transactional: bool, control: bool) -> BatchHeader {
        BatchHeader {
            base_offset: base,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: if transactional { 0x10 } else { 0 } | if control { 0x20 } else { 0 },
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            records_count: 1,
        }
    }

    const ABORT: Option<TxnMarker> = Some(TxnMarker {
        commit: false,
        coordinator_epoch: 0,
    });
    const COMMIT: Option<TxnMarker> = Some(TxnMarker {
        commit: true,
        coordinator_epoch: 0,
    });

    #[test]
    fn aborted_batches_go_and_their_marker_stays_until_they_have() {
        let aborted = AbortedTxn {
            producer_id: 1,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 4,
        };
        let mut pass = TxnTracker::new(&[aborted], 0, 10);
        assert!(!pass.on_batch(&header(-1, 0, false, false)));
        assert!(
            pass.on_batch(&header(1, 1, true, false)),
            "aborted data goes"
        );
        assert!(
            !pass.on_batch(&header(2, 2, true, false)),
            "committed data stays"
        );
        assert!(
            !pass.on_control(&header(1, 3, true, true), ABORT),
            "kept this pass"
        );
        assert_eq!(pass.kept_index, vec![aborted]);
        assert!(
            !pass.on_control(&header(2, 4, true, true), COMMIT),
            "its data is in range"
        );
        // The next pass: the data is gone, so both markers may go after their horizon.
        let mut next = TxnTracker::new(&[aborted], 0, 10);
        assert!(next.on_control(&header(1, 3, true, true), ABORT));
        assert!(next.on_control(&header(2, 4, true, true), COMMIT));
        assert!(next.kept_index.is_empty());
        assert!(
            next.on_control(&header(2, 5, true, true), None),
            "an emptied marker"
        );
    }
}
