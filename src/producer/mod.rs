//! Producer state of one partition (Kafka's `ProducerStateManager`): for each producer id, its
//! epoch and the metadata of its last five batches, which is what lets a retried batch be
//! recognised and answered with its original offsets instead of being appended twice; and for
//! transactional producers, the first offset of the transaction each has open on this
//! partition, the epoch of the coordinator that wrote its last marker, and the open
//! transactions in offset order, from which the partition's last stable offset follows
//! (`txn.rs`). The checks run under the partition's lock, before the append.
//!
//! This module keeps no files of its own except the `%020d.snapshot` files written by
//! `snapshot`; the producer-id allocator lives in `id_allocator`.

pub mod id_allocator;
pub mod snapshot;
mod txn;

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::record_batch::header::BatchHeader;

pub use txn::{CompletedTxn, Verification};

/// Kafka's `NUM_BATCHES_TO_RETAIN`: clients keep at most 5 requests in flight per partition.
pub const BATCHES_RETAINED: usize = 5;

/// One appended batch of a producer, as remembered for duplicate detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp_ms: i64,
}

impl BatchMetadata {
    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Oldest first; at most `BATCHES_RETAINED`.
    pub batches: VecDeque<BatchMetadata>,
    /// The epoch of the transaction coordinator that wrote the producer's last marker here; -1
    /// before any.
    pub coordinator_epoch: i32,
    /// The first offset of the transaction the producer has open on this partition.
    pub current_txn_first_offset: Option<i64>,
    /// The max timestamp of its last batch, or the time of its last marker.
    pub last_timestamp_ms: i64,
}

impl ProducerEntry {
    fn new(producer_id: i64, epoch: i16) -> ProducerEntry {
        ProducerEntry {
            producer_id,
            epoch,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp_ms: -1,
        }
    }

    pub fn last_sequence(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_sequence)
    }

    /// A new epoch forgets the batches of the old one.
    fn set_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }
}

/// Why a producer's batch or marker is refused; `api` answers each with Kafka's error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceError {
    /// The batch's epoch is older than the producer's: a zombie instance was fenced
    /// (INVALID_PRODUCER_EPOCH).
    InvalidProducerEpoch,
    /// The batch does not follow the producer's last sequence (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrderSequence,
    /// A plain batch while the producer has a transaction open here, or a transactional batch
    /// that is part of no transaction the coordinator knows (INVALID_TXN_STATE).
    InvalidTxnState,
    /// A marker from a coordinator older than the one that wrote the producer's last marker
    /// (TRANSACTION_COORDINATOR_FENCED).
    CoordinatorFenced,
}

/// What to do with an incoming batch.
#[derive(Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    Append,
    /// A retry of a batch already stored at this base offset: append nothing, answer success.
    Duplicate {
        base_offset: i64,
    },
}

/// The last sequence of a batch, wrapping past i32::MAX back to 0 as Kafka does.
pub fn last_sequence(base_sequence: i32, last_offset_delta: i32) -> i32 {
    if base_sequence < 0 {
        return -1;
    }
    let sum = i64::from(base_sequence) + i64::from(last_offset_delta);
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

#[derive(Default, Debug)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id (Kafka's `ongoingTxns`).
    ongoing: BTreeMap<i64, i64>,
    /// Producers whose transactional batch is being verified with the coordinator.
    verifications: HashMap<i64, Verification>,
    /// The guard the next verification gets.
    next_guard: u64,
}

impl ProducerStateManager {
    pub fn from_entries(entries: Vec<ProducerEntry>) -> ProducerStateManager {
        let ongoing = entries
            .iter()
            .filter_map(|e| {
                e.current_txn_first_offset
                    .map(|first| (first, e.producer_id))
            })
            .collect();
        ProducerStateManager {
            producers: entries.into_iter().map(|e| (e.producer_id, e)).collect(),
            ongoing,
            verifications: HashMap::new(),
            next_guard: 1,
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &ProducerEntry> {
        self.producers.values()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Kafka's checks for a batch from a client, without changing any state: a producer
    /// unknown here is accepted at any sequence; a retry of one of its last five batches is a
    /// duplicate; an older epoch is fenced; a newer epoch must start at sequence 0; otherwise
    /// the sequence must follow the last one; and a plain batch may not come while the
    /// producer has a transaction open.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck, SequenceError> {
        if header.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        // A producer this partition does not know (new, expired, or removed with its
        // segments) is accepted at any sequence.
        let Some(entry) = self.producers.get(&header.producer_id) else {
            return self
                .check_verified_sequence(header)
                .map(|()| SequenceCheck::Append);
        };
        let last = last_sequence(header.base_sequence, header.last_offset_delta);
        if header.producer_epoch == entry.epoch {
            if let Some(batch) = entry
                .batches
                .iter()
                .find(|b| b.first_sequence == header.base_sequence && b.last_sequence == last)
            {
                return Ok(SequenceCheck::Duplicate {
                    base_offset: batch.first_offset(),
                });
            }
        }
        if header.producer_epoch < entry.epoch {
            return Err(SequenceError::InvalidProducerEpoch);
        }
        self.check_verified_sequence(header)?;
        if header.producer_epoch > entry.epoch {
            // A new epoch starts at sequence 0, unless this partition never knew an epoch.
            if header.base_sequence != 0 && entry.epoch >= 0 {
                return Err(SequenceError::OutOfOrderSequence);
            }
        } else {
            // With no batch of this epoch (only a marker), the next sequence is 0.
            let previous = entry.last_sequence().unwrap_or(-1);
            if entry.epoch >= 0 && header.base_sequence != next_sequence(previous) {
                return Err(SequenceError::OutOfOrderSequence);
            }
        }
        if entry.current_txn_first_offset.is_some() && !header.is_transactional() {
            return Err(SequenceError::InvalidTxnState);
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended data batch (from a client, or replayed from the log during
    /// recovery). A transactional batch of a producer with no open transaction here opens
    /// one at its base offset; any transactional batch ends the producer's verification.
    pub fn update(&mut self, header: &BatchHeader, base_offset: i64) {
        if header.producer_id < 0 {
            return;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry::new(header.producer_id, header.producer_epoch));
        entry.set_epoch(header.producer_epoch);
        if entry.batches.len() == BATCHES_RETAINED {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: last_sequence(header.base_sequence, header.last_offset_delta),
            last_offset: base_offset + i64::from(header.last_offset_delta),
            offset_delta: header.last_offset_delta,
            timestamp_ms: header.max_timestamp,
        });
        entry.last_timestamp_ms = header.max_timestamp;
        if header.is_transactional() {
            if entry.current_txn_first_offset.is_none() {
                entry.current_txn_first_offset = Some(base_offset);
                self.ongoing.insert(base_offset, header.producer_id);
            }
            self.verifications.remove(&header.producer_id);
        }
    }

    /// Drops producers idle for `producer.id.expiration.ms` (measured on batch timestamps, as
    /// Kafka does), except those with a transaction open, and verifications as old.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) {
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp_ms) < expiration_ms
        });
        self.verifications
            .retain(|_, v| now_ms.saturating_sub(v.started_ms) < expiration_ms);
    }
}

/// The sequence after `sequence`: 0 follows i32::MAX, and 0 follows "none yet" (-1).
fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, base_sequence: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: -1,
            magic: 2,
            crc: 0,
            attributes: 0,
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
    fn duplicates_answer_their_original_offsets() {
        let mut state = ProducerStateManager::default();
        state.update(&header(7, 0, 0, 5), 100);
        state.update(&header(7, 0, 5, 5), 105);
        assert_eq!(
            state.check(&header(7, 0, 0, 5)),
            Ok(SequenceCheck::Duplicate { base_offset: 100 })
        );
        assert_eq!(
            state.check(&header(7, 0, 5, 5)),
            Ok(SequenceCheck::Duplicate { base_offset: 105 })
        );
        assert_eq!(state.check(&header(7, 0, 10, 1)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut state = ProducerStateManager::default();
        for i in 0..6 {
            state.update(&header(1, 0, i, 1), i64::from(i));
        }
        assert_eq!(
            state.check(&header(1, 0, 0, 1)),
            Err(SequenceError::OutOfOrderSequence)
        );
        assert_eq!(
            state.check(&header(1, 0, 1, 1)),
            Ok(SequenceCheck::Duplicate { base_offset: 1 })
        );
    }

    #[test]
    fn gaps_and_fenced_epochs_are_refused() {
        let mut state = ProducerStateManager::default();
        assert_eq!(
            state.check(&header(3, 2, 42, 1)),
            Ok(SequenceCheck::Append),
            "unknown producer: any sequence"
        );
        state.update(&header(3, 2, 42, 1), 0);
        assert_eq!(
            state.check(&header(3, 2, 44, 1)),
            Err(SequenceError::OutOfOrderSequence)
        );
        assert_eq!(
            state.check(&header(3, 1, 43, 1)),
            Err(SequenceError::InvalidProducerEpoch)
        );
        assert_eq!(
            state.check(&header(3, 3, 5, 1)),
            Err(SequenceError::OutOfOrderSequence)
        );
        assert_eq!(
            state.check(&header(3, 3, 0, 1)),
            Ok(SequenceCheck::Append),
            "a bumped epoch restarts at 0"
        );
    }

    #[test]
    fn sequences_wrap_past_int_max() {
        assert_eq!(last_sequence(i32::MAX - 1, 3), 1);
        let mut state = ProducerStateManager::default();
        state.update(&header(9, 0, i32::MAX, 1), 0);
        assert_eq!(state.check(&header(9, 0, 0, 1)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn idle_producers_expire() {
        let mut state = ProducerStateManager::default();
        state.update(&header(1, 0, 0, 1), 0);
        state.expire(1000 + 500, 1000);
        assert_eq!(state.len(), 1);
        state.expire(1000 + 1000, 1000);
        assert!(state.is_empty());
    }
}
