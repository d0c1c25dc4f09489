//! InitProducerId with a transactional id (Kafka's `handleInitProducerId`): a new producer
//! instance gets the id's producer id at a bumped epoch, which fences every older instance; a
//! producer recovering (KIP-360) names its current id and epoch; an exhausted epoch moves to a
//! new producer id; a transaction still open is aborted first (the epoch fenced, the abort
//! completed) and the client, answered CONCURRENT_TRANSACTIONS, retries.

use std::sync::{Arc, Mutex};

use kafka_protocol::ResponseError;

use super::state::{is_epoch_exhausted, TxnMetadata, TxnRecord, TxnState, NO_PRODUCER_EPOCH};
use super::{lock, Entry, TransactionCoordinator, SERVER_TRANSACTION_VERSION};

/// What InitProducerId does once the checks pass.
enum Init {
    /// Write this record and answer its producer id and epoch.
    Write(TxnRecord),
    /// Abort the open transaction at this fenced epoch, then answer CONCURRENT_TRANSACTIONS.
    Fence(TxnRecord),
}

impl TransactionCoordinator {
    /// Returns the producer id and epoch the producer is to use. `expected` is the producer id
    /// and epoch the request carries (KIP-360, v3+), None when it carries -1/-1.
    pub fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ResponseError> {
        self.check_active()?;
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let entry = self.get_or_create(transactional_id, timeout_ms)?;
        let init = {
            let mut metadata = lock(&entry);
            self.prepare_init(&mut metadata, timeout_ms, expected)?
        };
        match init {
            Init::Write(record) => {
                let record = self.persist(&entry, record)?;
                tracing::info!(
                    transactional_id,
                    producer_id = record.producer_id,
                    epoch = record.producer_epoch,
                    "initialized transactional producer"
                );
                Ok((record.producer_id, record.producer_epoch))
            }
            Init::Fence(fenced) => {
                self.end_transaction(
                    transactional_id,
                    fenced.producer_id,
                    fenced.producer_epoch,
                    false,
                    false,
                    SERVER_TRANSACTION_VERSION,
                )?;
                Err(ResponseError::ConcurrentTransactions)
            }
        }
    }

    /// The id's metadata, created (a fresh producer id, no epoch, Empty) when it is unknown;
    /// it is persisted by the transition that follows.
    fn get_or_create(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
    ) -> Result<Entry, ResponseError> {
        if let Some(entry) = self.get(transactional_id) {
            return Ok(entry);
        }
        let producer_id = self.log.next_producer_id().map_err(|e| {
            tracing::error!("cannot allocate a producer id: {e}");
            ResponseError::UnknownServerError
        })?;
        let now_ms = self.clock.now_ms();
        let mut map = self.lock_map();
        let entry = map.entry(transactional_id.to_string()).or_insert_with(|| {
            Arc::new(Mutex::new(TxnMetadata::new(
                transactional_id,
                producer_id,
                timeout_ms,
                now_ms,
            )))
        });
        Ok(entry.clone())
    }

    fn prepare_init(
        &self,
        metadata: &mut TxnMetadata,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<Init, ResponseError> {
        if metadata.pending.is_some() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let record = &metadata.record;
        // KIP-360: a producer naming its id is accepted only for the id just created, its
        // current one, or the previous one after an exhausted epoch (a retry across rotation).
        let valid_producer_id = |(producer_id, epoch): (i64, i16)| {
            record.producer_epoch == NO_PRODUCER_EPOCH
                || producer_id == record.producer_id
                || (producer_id == record.prev_producer_id && is_epoch_exhausted(epoch))
        };
        if expected.is_some_and(|e| !valid_producer_id(e)) {
            return Err(ResponseError::ProducerFenced);
        }
        let now_ms = self.clock.now_ms();
        match record.state {
            TxnState::PrepareAbort | TxnState::PrepareCommit => {
                Err(ResponseError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let exhausted = is_epoch_exhausted(record.producer_epoch)
                    && expected.is_none_or(|(_, epoch)| epoch == record.producer_epoch);
                if exhausted {
                    let new_producer_id = self.log.next_producer_id().map_err(|e| {
                        tracing::error!("cannot allocate a producer id: {e}");
                        ResponseError::UnknownServerError
                    })?;
                    metadata
                        .prepare_producer_id_rotation(
                            new_producer_id,
                            timeout_ms,
                            now_ms,
                            expected.is_some(),
                        )
                        .map(Init::Write)
                } else {
                    metadata
                        .prepare_increment_producer_epoch(
                            timeout_ms,
                            expected.map(|(_, epoch)| epoch),
                            now_ms,
                        )
                        .map(Init::Write)
                }
            }
            // The fenced epoch is never answered: the abort completes, the client retries and
            // its second call bumps the epoch again (to a new producer id if that exhausts it).
            TxnState::Ongoing => metadata.prepare_fence_producer_epoch().map(Init::Fence),
            TxnState::Dead | TxnState::PrepareEpochFence => {
                tracing::error!(transactional_id = %metadata.transactional_id, state = ?record.state, "transactional id in a state it cannot be in");
                Err(ResponseError::UnknownServerError)
            }
        }
    }
}
