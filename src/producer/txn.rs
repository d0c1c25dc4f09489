//! The transactional part of a partition's producer state (Kafka's `ProducerStateManager` and
//! `ProducerAppendInfo` for markers, and KIP-890's verification state): which producers have a
//! transaction open here and from which offset, the markers that end them, and the guards that
//! keep a transactional batch verified with the coordinator from starting a transaction after
//! that transaction's marker has landed.

use super::{ProducerEntry, ProducerStateManager, SequenceError};
use crate::record_batch::header::BatchHeader;

/// A transaction that a marker ended on this partition: its producer, the offset of its first
/// batch, the marker's offset, and whether it was aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub aborted: bool,
}

/// A producer's transactional batch being verified with the coordinator (KIP-890): the append
/// after the verification must bring the same guard, which a marker for the producer clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verification {
    pub guard: u64,
    /// The lowest first sequence of the batches verified so far: a later batch may not start
    /// above it (it would leave a gap before the transaction's first batch).
    pub lowest_sequence: i32,
    pub epoch: i16,
    pub started_ms: i64,
}

impl ProducerStateManager {
    /// The first offset of the oldest transaction still open here (Kafka's first unstable
    /// offset), None when none is.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Whether `producer_id` has a transaction open here in `epoch`.
    pub fn has_ongoing_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.epoch == epoch && e.current_txn_first_offset.is_some())
    }

    /// Starts (or joins) the verification of a transactional batch of a producer with no
    /// transaction open here, and returns its guard (Kafka's
    /// `maybeCreateVerificationStateEntry`): an entry of an older epoch is replaced.
    pub fn start_verification(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        now_ms: i64,
    ) -> u64 {
        let next_guard = &mut self.next_guard;
        let fresh = |next_guard: &mut u64| {
            *next_guard += 1;
            Verification {
                guard: *next_guard,
                lowest_sequence: sequence,
                epoch,
                started_ms: now_ms,
            }
        };
        let entry = self
            .verifications
            .entry(producer_id)
            .or_insert_with(|| fresh(next_guard));
        if entry.epoch < epoch {
            *entry = fresh(&mut self.next_guard);
        } else if entry.epoch == epoch {
            entry.lowest_sequence = entry.lowest_sequence.min(sequence);
        }
        entry.guard
    }

    /// The guard of the producer's verification under way, if any.
    pub fn verification_guard(&self, producer_id: i64) -> Option<u64> {
        self.verifications.get(&producer_id).map(|v| v.guard)
    }

    /// A verified batch may not start above the lowest sequence seen while verifying.
    pub(super) fn check_verified_sequence(
        &self,
        header: &BatchHeader,
    ) -> Result<(), SequenceError> {
        match self.verifications.get(&header.producer_id) {
            Some(v) if header.base_sequence > v.lowest_sequence => {
                Err(SequenceError::OutOfOrderSequence)
            }
            _ => Ok(()),
        }
    }

    /// Kafka's checks on a marker before it is appended: an epoch older than the producer's
    /// is a zombie's (INVALID_PRODUCER_EPOCH), a coordinator epoch older than the last marker's
    /// a fenced coordinator's. A producer unknown here takes any marker.
    ///
    /// Under transaction version 2 (`transaction_version` ≥ 2, KIP-1228) every marker carries
    /// the epoch its EndTxn bumped to, above the epoch of the transaction's data, so a marker at
    /// the producer's current epoch is a late one from the previous transaction and must not end
    /// the open one: refused too. With nothing open it is a retry of the marker already written
    /// (the coordinator re-sending after a restart or a lost answer) and is taken, as Kafka 4.4
    /// takes it (KAFKA-19999). Versions 0 and 1 take any epoch from the producer's on.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        transaction_version: i8,
    ) -> Result<(), SequenceError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        let stale = epoch < entry.epoch
            || (transaction_version >= 2
                && epoch == entry.epoch
                && entry.current_txn_first_offset.is_some());
        if stale {
            return Err(SequenceError::InvalidProducerEpoch);
        }
        if entry.coordinator_epoch > coordinator_epoch {
            return Err(SequenceError::CoordinatorFenced);
        }
        Ok(())
    }

    /// Records an appended marker at `offset`: it ends the producer's open transaction here,
    /// if it has one (a marker of a transaction with no data here completes nothing), and its
    /// verification. Returns the transaction it completed.
    pub fn apply_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        offset: i64,
        timestamp_ms: i64,
    ) -> Option<CompletedTxn> {
        self.verifications.remove(&producer_id);
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(producer_id, epoch));
        let completed = entry.current_txn_first_offset.take().map(|first_offset| {
            self.ongoing.remove(&first_offset);
            CompletedTxn {
                producer_id,
                first_offset,
                last_offset: offset,
                aborted: !commit,
            }
        });
        entry.set_epoch(epoch);
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp_ms = timestamp_ms;
        completed
    }

    /// The last stable offset to record with an aborted transaction in the transaction index
    /// (Kafka's `lastStableOffset(completedTxn)`): the first offset of the oldest transaction of
    /// another producer still open, else the offset after the marker. Call it after
    /// `apply_marker`.
    pub fn last_stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, producer_id)| **producer_id != completed.producer_id)
            .map_or(completed.last_offset + 1, |(first_offset, _)| *first_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn_header(pid: i64, epoch: i16, base_sequence: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: -1,
            magic: 2,
            crc: 0,
            attributes: 0x10,
            last_offset_delta: records - 1,
            base_timestamp: 1000,
            max_timestamp: 1000,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence,
            records_count: records,
        }
    }

    #[test]
    fn transactions_open_with_their_first_batch_and_end_with_a_marker() {
        let mut state = ProducerStateManager::default();
        state.update(&txn_header(1, 0, 0, 2), 10);
        state.update(&txn_header(2, 0, 0, 1), 12);
        state.update(&txn_header(1, 0, 2, 1), 13);
        assert_eq!(state.first_unstable_offset(), Some(10));
        assert!(state.has_ongoing_txn(1, 0));
        assert!(!state.has_ongoing_txn(1, 1));
        let completed = state.apply_marker(1, 0, false, 0, 14, 2000).unwrap();
        assert_eq!(
            completed,
            CompletedTxn {
                producer_id: 1,
                first_offset: 10,
                last_offset: 14,
                aborted: true
            }
        );
        // Producer 2's transaction is still open from 12.
        assert_eq!(state.last_stable_offset_after(&completed), 12);
        assert_eq!(state.first_unstable_offset(), Some(12));
        let completed = state.apply_marker(2, 0, true, 0, 15, 2000).unwrap();
        assert_eq!(state.last_stable_offset_after(&completed), 16);
        assert_eq!(state.first_unstable_offset(), None);
        // A marker with nothing open here completes nothing.
        assert_eq!(state.apply_marker(2, 1, false, 0, 16, 2000), None);
    }

    #[test]
    fn plain_batches_and_zombie_markers_are_refused_during_a_transaction() {
        let mut state = ProducerStateManager::default();
        state.update(&txn_header(1, 3, 0, 1), 0);
        let mut plain = txn_header(1, 3, 1, 1);
        plain.attributes = 0;
        assert_eq!(state.check(&plain), Err(SequenceError::InvalidTxnState));
        assert_eq!(
            state.check_marker(1, 2, 0, 1),
            Err(SequenceError::InvalidProducerEpoch)
        );
        // Under transaction version 2 the open transaction's own epoch is a late marker of the
        // previous one; under version 1 it is this transaction's.
        assert_eq!(
            state.check_marker(1, 3, 0, 2),
            Err(SequenceError::InvalidProducerEpoch)
        );
        assert_eq!(state.check_marker(1, 3, 0, 1), Ok(()));
        assert_eq!(state.check_marker(1, 4, 0, 2), Ok(()));
        state.apply_marker(1, 4, true, 5, 1, 0);
        assert_eq!(
            state.check_marker(1, 4, 4, 2),
            Err(SequenceError::CoordinatorFenced)
        );
        // With nothing open, a version 2 marker at the current epoch is a retry: taken.
        assert_eq!(state.check_marker(1, 4, 5, 2), Ok(()));
        assert_eq!(state.check_marker(1, 4, 5, 0), Ok(()));
        // After a TV2 marker's bumped epoch, the next transaction starts at sequence 0.
        assert_eq!(
            state.check(&txn_header(1, 4, 2, 1)),
            Err(SequenceError::OutOfOrderSequence)
        );
        assert_eq!(
            state.check(&txn_header(1, 4, 0, 1)),
            Ok(super::super::SequenceCheck::Append)
        );
    }

    #[test]
    fn a_marker_clears_the_verification_guard() {
        let mut state = ProducerStateManager::default();
        let guard = state.start_verification(9, 0, 1, 0);
        assert_eq!(state.start_verification(9, 0, 1, 0), guard);
        assert_eq!(state.verification_guard(9), Some(guard));
        state.apply_marker(9, 1, false, 0, 0, 0);
        assert_eq!(state.verification_guard(9), None);
        let newer = state.start_verification(9, 0, 2, 0);
        assert_ne!(newer, guard);
        // A transactional append ends the verification too.
        state.update(&txn_header(9, 2, 0, 1), 1);
        assert_eq!(state.verification_guard(9), None);
    }

    #[test]
    fn open_transactions_survive_expiry() {
        let mut state = ProducerStateManager::default();
        state.update(&txn_header(1, 0, 0, 1), 0);
        state.expire(1_000_000, 1000);
        assert_eq!(state.len(), 1);
        state.apply_marker(1, 0, true, 0, 1, 1000);
        state.expire(1_000_000, 1000);
        assert!(state.is_empty());
    }
}
