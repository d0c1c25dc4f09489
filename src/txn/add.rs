//! Partitions joining a transaction: AddPartitionsToTxn (clients, v0-3, and the batched and
//! verify-only v4-5), AddOffsetsToTxn (the group's `__consumer_offsets` partition), and KIP-890's
//! checks for a produced transactional batch or a TxnOffsetCommit: with transaction version 1
//! the partition must already be in the transaction (verify only), with version 2 it is added.

use kafka_protocol::ResponseError;

use super::state::TxnState;
use super::{lock, TransactionCoordinator};

/// The answer of a verify-only check for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionCheck {
    /// The partition is in the ongoing transaction.
    InTransaction,
    /// It is not (TRANSACTION_ABORTABLE: the client must abort).
    NotAdded,
}

impl TransactionCoordinator {
    /// Adds partitions to the producer's transaction (Kafka's `handleAddPartitionsToTransaction`),
    /// which becomes Ongoing. `client_tv` is the transaction version the request speaks.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        client_tv: i16,
    ) -> Result<(), ResponseError> {
        self.check_active()?;
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let entry = self
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let record = {
            let mut metadata = lock(&entry);
            let record = &metadata.record;
            // A pending transition first (KAFKA-18660): after an exhausted epoch the producer
            // may already use the producer id the completion under way moves to.
            if metadata.pending.is_some() {
                return Err(ResponseError::ConcurrentTransactions);
            }
            if record.producer_id != producer_id {
                return Err(ResponseError::InvalidProducerIdMapping);
            }
            if record.producer_epoch != producer_epoch {
                return Err(ResponseError::ProducerFenced);
            }
            if matches!(
                record.state,
                TxnState::PrepareCommit | TxnState::PrepareAbort
            ) {
                return Err(ResponseError::ConcurrentTransactions);
            }
            if record.state == TxnState::Ongoing
                && partitions.iter().all(|p| record.partitions.contains(p))
            {
                // Nothing to write: every partition is in the transaction already.
                return Ok(());
            }
            metadata.prepare_add_partitions(partitions, self.clock.now_ms(), client_tv)?
        };
        self.persist(&entry, record).map(drop)
    }

    /// Kafka's `handleVerifyPartitionsInTransaction` (AddPartitionsToTxn with `verify_only`):
    /// answered from memory, nothing written. The pending state is not checked: the append the
    /// verification guards is checked again under the partition's lock.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<PartitionCheck>, ResponseError> {
        self.check_active()?;
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let entry = self
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let metadata = lock(&entry);
        let record = &metadata.record;
        if record.producer_id != producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if record.producer_epoch != producer_epoch {
            return Err(ResponseError::ProducerFenced);
        }
        if matches!(
            record.state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        ) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|p| {
                if record.partitions.contains(p) {
                    PartitionCheck::InTransaction
                } else {
                    PartitionCheck::NotAdded
                }
            })
            .collect())
    }
}
