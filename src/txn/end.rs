//! Ending a transaction (Kafka's `endTransaction`, in both transaction versions): EndTxn from the
//! producer, and the coordinator's own aborts when it fences an epoch (InitProducerId during a
//! transaction, a timeout). The transaction moves to PrepareCommit or PrepareAbort, which is
//! written before anything else; then the markers are written to every partition of the
//! transaction, and once they all are, CompleteCommit or CompleteAbort. A marker that cannot be
//! written now leaves the transaction prepared; the timer task writes it later.
//!
//! With transaction version 2 (EndTxn v5+) every EndTxn bumps the epoch, the response carries
//! the producer id and epoch for the next transaction, an abort is accepted with no transaction
//! open, and a retry is recognised by its epoch being the previous one.

use kafka_protocol::ResponseError;

use super::state::{is_epoch_exhausted, TxnMetadata, TxnRecord, TxnState, NO_PRODUCER_EPOCH};
use super::state::{NO_PRODUCER_ID, TV_2};
use super::{lock, Entry, MarkerOutcome, TransactionCoordinator};
use crate::record_batch::control::TxnMarker;

/// What an EndTxn does once the checks pass.
enum End {
    /// Nothing to write: answer this producer id and epoch (a retry of a completed end).
    Done(i64, i16),
    /// Write this PrepareCommit or PrepareAbort record, then the markers.
    Prepare(TxnRecord),
}

impl TransactionCoordinator {
    /// EndTxn from the producer: commit (`commit`) or abort its transaction. `client_tv` is 2
    /// for EndTxn v5 and later, else 0. Returns the producer id and epoch the response carries
    /// (the ones for the next transaction with TV2; -1, -1 before).
    pub fn end_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_tv: i16,
    ) -> Result<(i64, i16), ResponseError> {
        self.check_active()?;
        self.end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            true,
            client_tv,
        )
    }

    /// Kafka's `endTransaction`. `from_client` is false for the coordinator's own aborts, whose
    /// epoch is the one it just fenced (`pending` PrepareEpochFence).
    pub(super) fn end_transaction(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        from_client: bool,
        client_tv: i16,
    ) -> Result<(i64, i16), ResponseError> {
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let entry = self
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let (end, epoch_fence) = {
            let mut metadata = lock(&entry);
            let epoch_fence = metadata.pending == Some(TxnState::PrepareEpochFence);
            let end = if client_tv >= TV_2 {
                self.prepare_end_tv2(
                    &mut metadata,
                    producer_id,
                    producer_epoch,
                    commit,
                    from_client,
                )
            } else {
                self.prepare_end_tv1(
                    &mut metadata,
                    producer_id,
                    producer_epoch,
                    commit,
                    from_client,
                )
            };
            if end.is_err() && epoch_fence {
                metadata.abandon();
            }
            (end?, epoch_fence)
        };
        let record = match end {
            End::Done(producer_id, producer_epoch) => return Ok((producer_id, producer_epoch)),
            End::Prepare(record) => record,
        };
        let record = match self.persist(&entry, record) {
            Ok(record) => record,
            Err(error) => {
                if epoch_fence {
                    // The bumped epoch stays in memory, never answered; the next fence does
                    // not bump again (KAFKA-9666).
                    lock(&entry).failed_epoch_fence = true;
                }
                return Err(error);
            }
        };
        self.complete_transaction(&entry);
        // With TV2 the client continues with the id and epoch the completion leaves: a new
        // producer id at epoch 0 after an exhausted epoch (KAFKA-18660).
        Ok(if client_tv < TV_2 {
            (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        } else if record.next_producer_id != NO_PRODUCER_ID {
            (record.next_producer_id, 0)
        } else {
            (record.producer_id, record.producer_epoch)
        })
    }

    /// Transaction version 1: the epoch must be the current one (or, for the coordinator's own
    /// abort, not older); a retry is recognised by the state alone.
    fn prepare_end_tv1(
        &self,
        metadata: &mut TxnMetadata,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        from_client: bool,
    ) -> Result<End, ResponseError> {
        let record = &metadata.record;
        if record.producer_id != producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if (from_client && producer_epoch != record.producer_epoch)
            || producer_epoch < record.producer_epoch
        {
            return Err(ResponseError::ProducerFenced);
        }
        if metadata
            .pending
            .is_some_and(|p| p != TxnState::PrepareEpochFence)
        {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let done = End::Done(NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
        match (record.state, commit) {
            (TxnState::Ongoing, _) => {
                let state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                if !commit && metadata.pending == Some(TxnState::PrepareEpochFence) {
                    take_fenced_epoch(metadata, producer_epoch);
                }
                let now_ms = self.clock.now_ms();
                metadata
                    .prepare_abort_or_commit(state, 0, NO_PRODUCER_ID, now_ms, false, true)
                    .map(End::Prepare)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(done),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(ResponseError::ConcurrentTransactions)
            }
            (state, _) => invalid_state(metadata, state, commit),
        }
    }

    /// Transaction version 2 (the table in Kafka's `endTransaction`): every end bumps the epoch,
    /// so a retry carries the epoch before the bump (or, across a producer-id rotation, the
    /// previous id at i16::MAX - 1).
    fn prepare_end_tv2(
        &self,
        metadata: &mut TxnMetadata,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        from_client: bool,
    ) -> Result<End, ResponseError> {
        let record = metadata.record.clone();
        let epoch_fence = metadata.pending == Some(TxnState::PrepareEpochFence);
        let retry_on_overflow = !epoch_fence
            && record.prev_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && record.producer_epoch == 0;
        let retry_on_bump =
            !epoch_fence && i32::from(record.producer_epoch) == i32::from(producer_epoch) + 1;
        let valid_epoch = if epoch_fence {
            (!from_client || producer_epoch == record.producer_epoch)
                && producer_epoch >= record.producer_epoch
        } else {
            match record.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    retry_on_bump || retry_on_overflow || producer_epoch == record.producer_epoch
                }
                _ => producer_epoch == record.producer_epoch,
            }
        };
        let is_retry = retry_on_bump || retry_on_overflow;
        if record.producer_id != producer_id && !retry_on_overflow {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        // A pending transition first (KAFKA-18464): an empty abort racing a completion must
        // wait for it rather than fence itself.
        if metadata.pending.is_some() && !epoch_fence {
            return Err(ResponseError::ConcurrentTransactions);
        }
        if !valid_epoch {
            return Err(ResponseError::ProducerFenced);
        }
        let done = End::Done(record.producer_id, record.producer_epoch);
        match (record.state, commit) {
            (TxnState::Ongoing, _) => {
                let state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                self.prepare_end_v2(metadata, state, producer_epoch, epoch_fence, false)
            }
            (TxnState::CompleteCommit, true) if is_retry => Ok(done),
            (TxnState::CompleteAbort, false) if is_retry => Ok(done),
            (TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty, false)
                if !is_retry =>
            {
                self.prepare_end_v2(
                    metadata,
                    TxnState::PrepareAbort,
                    producer_epoch,
                    false,
                    true,
                )
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(ResponseError::ConcurrentTransactions)
            }
            (state, _) => invalid_state(metadata, state, commit),
        }
    }

    /// PrepareCommit or PrepareAbort with TV2: the epoch bumped once (an epoch fence has bumped
    /// it already, KAFKA-19367), and a new producer id allocated when the epoch is exhausted.
    fn prepare_end_v2(
        &self,
        metadata: &mut TxnMetadata,
        state: TxnState,
        producer_epoch: i16,
        epoch_fence: bool,
        no_partition_added: bool,
    ) -> Result<End, ResponseError> {
        if epoch_fence {
            take_fenced_epoch(metadata, producer_epoch);
        }
        let next_producer_id = if is_epoch_exhausted(metadata.record.producer_epoch) {
            self.log.next_producer_id().map_err(|e| {
                tracing::error!("cannot allocate a producer id: {e}");
                ResponseError::UnknownServerError
            })?
        } else {
            NO_PRODUCER_ID
        };
        let now_ms = self.clock.now_ms();
        metadata
            .prepare_abort_or_commit(
                state,
                TV_2,
                next_producer_id,
                now_ms,
                no_partition_added,
                !epoch_fence,
            )
            .map(End::Prepare)
    }

    /// Writes the markers of a transaction in PrepareCommit or PrepareAbort, then, when every
    /// partition has its marker, CompleteCommit or CompleteAbort. As in Kafka, the completion is
    /// pending while the markers are written, so requests for the id meanwhile are answered
    /// CONCURRENT_TRANSACTIONS. Partitions whose marker could not be written stay in the
    /// transaction, and the completion is dropped until the next attempt.
    pub(super) fn complete_transaction(&self, entry: &Entry) {
        let (id, prepared, complete, coordinator_epoch) = {
            let mut metadata = lock(entry);
            if metadata.pending.is_some()
                || !matches!(
                    metadata.state(),
                    TxnState::PrepareCommit | TxnState::PrepareAbort
                )
            {
                return;
            }
            let prepared = metadata.record.clone();
            let Ok(complete) = metadata.prepare_complete(self.clock.now_ms()) else {
                return;
            };
            let id = metadata.transactional_id.clone();
            let epoch = self.log.coordinator_epoch(self.partition_for(&id));
            (id, prepared, complete, epoch)
        };
        let commit = prepared.state == TxnState::PrepareCommit;
        let mut written = Vec::new();
        for (topic, partition) in &prepared.partitions {
            let marker = TxnMarker {
                commit,
                coordinator_epoch,
            };
            let outcome = self.markers.write_marker(
                topic,
                *partition,
                prepared.producer_id,
                prepared.producer_epoch,
                marker,
                transaction_version(prepared.client_tv),
            );
            match outcome {
                MarkerOutcome::Written | MarkerOutcome::Gone => {
                    written.push((topic.clone(), *partition))
                }
                MarkerOutcome::Refused => {
                    tracing::warn!(transactional_id = %id, %topic, partition, "marker refused; the partition's producer has moved on");
                    written.push((topic.clone(), *partition));
                }
                MarkerOutcome::Retry => {}
            }
        }
        if written.len() < prepared.partitions.len() {
            let mut metadata = lock(entry);
            metadata.abandon();
            for partition in &written {
                metadata.record.partitions.remove(partition);
            }
            tracing::warn!(transactional_id = %id, left = metadata.record.partitions.len(), "transaction markers left to write later");
            return;
        }
        if let Err(error) = self.persist(entry, complete) {
            tracing::warn!(transactional_id = %id, ?error, "cannot complete the transaction now; retried later");
        }
    }

    /// Retries every transaction left in PrepareCommit or PrepareAbort (by a start-up, or by
    /// markers that could not be written).
    pub(super) fn complete_unfinished(&self) {
        let prepared: Vec<Entry> = self
            .lock_map()
            .values()
            .filter(|entry| {
                let metadata = lock(entry);
                matches!(
                    metadata.state(),
                    TxnState::PrepareCommit | TxnState::PrepareAbort
                ) && metadata.pending.is_none()
            })
            .cloned()
            .collect();
        for entry in prepared {
            self.complete_transaction(&entry);
        }
    }
}

/// The coordinator's own abort takes the epoch its fence bumped to, and forgets the last one.
fn take_fenced_epoch(metadata: &mut TxnMetadata, producer_epoch: i16) {
    metadata.pending = None;
    metadata.record.producer_epoch = producer_epoch;
    metadata.record.last_producer_epoch = NO_PRODUCER_EPOCH;
}

fn invalid_state(
    metadata: &TxnMetadata,
    state: TxnState,
    commit: bool,
) -> Result<End, ResponseError> {
    if matches!(state, TxnState::Dead | TxnState::PrepareEpochFence) {
        tracing::error!(transactional_id = %metadata.transactional_id, ?state, "transactional id in a state it cannot be in");
        return Err(ResponseError::UnknownServerError);
    }
    tracing::warn!(transactional_id = %metadata.transactional_id, ?state, commit, "EndTxn in a state that cannot end this way");
    Err(ResponseError::InvalidTxnState)
}

/// A transaction's client version as a marker carries it (an int8 on the wire, KIP-1228); the
/// versions a coordinator records are 0 to 2.
fn transaction_version(client_tv: i16) -> i8 {
    i8::try_from(client_tv).unwrap_or(i8::MAX)
}
