//! A partition's side of transactions: the markers that end them (written by the transaction
//! coordinator, or by `kafka-transactions abort` through WriteTxnMarkers), each aborted one
//! indexed in the active segment's `.txnindex` before the last stable offset moves past it, and
//! KIP-890's verification guard, which keeps a transactional batch from opening a transaction
//! the coordinator never added this partition to.

use super::{Partition, PartitionState};
use crate::log::AbortedTxn;
use crate::producer::SequenceError;
use crate::record_batch::control::{marker_batch, TxnMarker};
use crate::record_batch::header::BatchHeader;

use super::super::errors::PartitionError;

/// How a produced transactional batch shows that it belongs to a transaction the coordinator
/// knows (KIP-890's verification).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnVerification {
    /// Not checked: the batch is not transactional, or verification is off
    /// (`transaction.partition.verification.enable=false` with transaction version 1).
    Off,
    /// The guard `Partition::start_txn_verification` returned before the coordinator was
    /// asked (None when none was started): the batch is appended only if it opens no
    /// transaction, or if the guard is still the producer's, not cleared by a marker since.
    Guard(Option<u64>),
}

/// Whether `header` may be appended as far as verification goes (Kafka's
/// `batchMissingRequiredVerification`).
pub(super) fn is_verified(
    state: &PartitionState,
    header: &BatchHeader,
    verification: TxnVerification,
) -> bool {
    let TxnVerification::Guard(guard) = verification else {
        return true;
    };
    if !header.is_transactional()
        || state
            .producers
            .has_ongoing_txn(header.producer_id, header.producer_epoch)
    {
        return true;
    }
    guard.is_some() && state.producers.verification_guard(header.producer_id) == guard
}

/// A transactional batch the broker writes for a producer (a transactional offset commit) is
/// checked by epoch only, as Kafka checks an append of coordinator origin.
pub(super) fn check_internal_epoch(
    state: &PartitionState,
    header: &BatchHeader,
) -> Result<(), PartitionError> {
    let fenced = state
        .producers
        .entries()
        .any(|e| e.producer_id == header.producer_id && e.epoch > header.producer_epoch);
    if fenced {
        return Err(SequenceError::InvalidProducerEpoch.into());
    }
    Ok(())
}

impl Partition {
    /// Starts verifying a transactional batch with the coordinator, unless the producer already
    /// has a transaction open here in `epoch`: returns the guard the append must bring, or None
    /// when no verification is needed.
    pub fn start_txn_verification(
        &self,
        producer_id: i64,
        base_sequence: i32,
        epoch: i16,
        now_ms: i64,
    ) -> Result<Option<u64>, PartitionError> {
        self.with_state(|state| {
            if state.producers.has_ongoing_txn(producer_id, epoch) {
                return Ok(None);
            }
            Ok(Some(state.producers.start_verification(
                producer_id,
                base_sequence,
                epoch,
                now_ms,
            )))
        })
    }

    /// Appends a COMMIT or ABORT marker for the producer (Kafka's `appendEndTxnMarker`): refused
    /// for a zombie epoch (INVALID_PRODUCER_EPOCH; under `transaction_version` 2 also the open
    /// transaction's own epoch, `ProducerStateManager::check_marker`) or a fenced coordinator
    /// epoch. It ends the producer's transaction here, if one is open; an aborted one is indexed
    /// in the active segment's `.txnindex` before the last stable offset moves past it. A marker
    /// for a producer with nothing open here is appended all the same and completes nothing.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: TxnMarker,
        transaction_version: i8,
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let batch = marker_batch(producer_id, producer_epoch, marker, now_ms)
            .map_err(PartitionError::Corrupt)?;
        let append = || {
            self.with_state(|state| {
                state.producers.check_marker(
                    producer_id,
                    producer_epoch,
                    marker.coordinator_epoch,
                    transaction_version,
                )?;
                let (offset, _) = self.append_locked(state, &batch, now_ms, false)?;
                let completed = state.producers.apply_marker(
                    producer_id,
                    producer_epoch,
                    marker.commit,
                    marker.coordinator_epoch,
                    offset,
                    now_ms,
                );
                if let Some(completed) = completed.filter(|c| c.aborted) {
                    let txn = AbortedTxn {
                        producer_id,
                        first_offset: completed.first_offset,
                        last_offset: completed.last_offset,
                        last_stable_offset: state.producers.last_stable_offset_after(&completed),
                    };
                    if let Err(error) = state.log.append_aborted_txn(&txn) {
                        // The marker is in the log and cannot be taken back: without its index
                        // entry read_committed readers would see the aborted records, so the
                        // log directory goes offline and a restart rebuilds the index.
                        let error = std::io::Error::other(error.to_string());
                        state.log.disk().mark_offline(&self.dir, &error);
                        return Err(PartitionError::Storage(error));
                    }
                }
                Ok(offset)
            })
        };
        let offset = self.off_the_runtime(append)?;
        self.appended.notify_waiters();
        Ok(offset)
    }
}
