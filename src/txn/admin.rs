//! What `kafka-transactions` reads from the coordinator: ListTransactions (with its state,
//! producer-id, duration and transactional-id pattern filters) and DescribeTransactions.

use kafka_protocol::ResponseError;

use super::state::TxnState;
use super::{lock, TransactionCoordinator};

/// One transactional id as ListTransactions reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTransaction {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// One transactional id as DescribeTransactions reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionDescription {
    pub state: TxnState,
    pub timeout_ms: i32,
    /// -1 when no transaction is open.
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The transaction's partitions, by topic, in order.
    pub partitions: Vec<(String, Vec<i32>)>,
}

impl TransactionCoordinator {
    /// Kafka's `listTransactionStates`: the ids in one of `states` (all when empty), of one of
    /// `producer_ids` (all when empty), whose transaction has run longer than `min_duration_ms`
    /// (-1: any) and whose id matches `pattern` (a regular expression, None: any). Dead ids are
    /// never listed.
    pub fn list_transactions(
        &self,
        states: &[TxnState],
        producer_ids: &[i64],
        min_duration_ms: i64,
        pattern: Option<&regex::Regex>,
    ) -> Result<Vec<ListedTransaction>, ResponseError> {
        self.check_active()
            .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
        let now_ms = self.clock.now_ms();
        let entries: Vec<_> = self.lock_map().values().cloned().collect();
        let mut listed: Vec<ListedTransaction> = entries
            .iter()
            .filter_map(|entry| {
                let metadata = lock(entry);
                let record = &metadata.record;
                let keep = record.state != TxnState::Dead
                    && (states.is_empty() || states.contains(&record.state))
                    && (producer_ids.is_empty() || producer_ids.contains(&record.producer_id))
                    && (min_duration_ms < 0
                        || (record.start_ms >= 0
                            && now_ms.saturating_sub(record.start_ms) > min_duration_ms))
                    && pattern.is_none_or(|p| p.is_match(&metadata.transactional_id));
                keep.then(|| ListedTransaction {
                    transactional_id: metadata.transactional_id.clone(),
                    producer_id: record.producer_id,
                    state: record.state,
                })
            })
            .collect();
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(listed)
    }

    /// Kafka's `handleDescribeTransactions` for one id: TRANSACTIONAL_ID_NOT_FOUND for an id it
    /// does not know (or one being expired).
    pub fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ResponseError> {
        self.check_active()
            .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let entry = self
            .get(transactional_id)
            .ok_or(ResponseError::TransactionalIdNotFound)?;
        let metadata = lock(&entry);
        let record = &metadata.record;
        if record.state == TxnState::Dead || metadata.pending == Some(TxnState::Dead) {
            return Err(ResponseError::TransactionalIdNotFound);
        }
        let mut partitions: Vec<(String, Vec<i32>)> = Vec::new();
        for (topic, partition) in &record.partitions {
            match partitions.last_mut() {
                Some((last, list)) if last == topic => list.push(*partition),
                _ => partitions.push((topic.clone(), vec![*partition])),
            }
        }
        Ok(TransactionDescription {
            state: record.state,
            timeout_ms: record.timeout_ms,
            start_ms: record.start_ms,
            producer_id: record.producer_id,
            producer_epoch: record.producer_epoch,
            partitions,
        })
    }
}
