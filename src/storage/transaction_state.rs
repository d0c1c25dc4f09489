//! `__transaction_state`: where the transaction coordinator makes each transactional id's state
//! durable, in Kafka's record formats (`txn::log_record`), as an internal topic of
//! `transaction.state.log.num.partitions` (50) partitions. An id's records all go to partition
//! `abs(javaHashCode(id)) % partitions`, as in Kafka, so its history stays in order.
//!
//! The topic is created on the first transactional lookup (FindCoordinator with key type 1, or
//! InitProducerId with a transactional id), compacted and uncompressed with
//! `transaction.state.log.segment.bytes` segments, as Kafka creates it. At start-up it is replayed
//! from its log start offset, `transaction.state.log.load.buffer.size` bytes at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::Compression;

use super::replay::{replay_partition, Replayed};
use super::{LogManager, Topic, TopicConfigs, TopicError};
use crate::record_batch::encode::{self, PlainRecord};
use crate::time::Clock;
use crate::txn::TxnLogStore;

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

pub struct TransactionStateStore {
    logs: Arc<LogManager>,
    clock: Arc<dyn Clock>,
}

impl TransactionStateStore {
    pub fn new(logs: Arc<LogManager>, clock: Arc<dyn Clock>) -> TransactionStateStore {
        TransactionStateStore { logs, clock }
    }
}

/// The transaction-state topic, created (compacted, uncompressed) if it does not exist yet.
pub fn ensure_topic(logs: &LogManager, now_ms: i64) -> Result<Arc<Topic>, String> {
    if let Some(topic) = logs.topic(TRANSACTION_STATE_TOPIC) {
        return Ok(topic);
    }
    let config = logs.broker_config();
    let configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("compression.type".to_string(), "uncompressed".to_string()),
        (
            "segment.bytes".to_string(),
            config.transaction_state_log_segment_bytes.to_string(),
        ),
    ]);
    let partitions = config.transaction_state_log_num_partitions;
    let configs = TopicConfigs::from_map(configs);
    match logs.create_topic(TRANSACTION_STATE_TOPIC, partitions, configs, now_ms) {
        Ok(topic) => Ok(topic),
        Err(TopicError::AlreadyExists) => logs
            .topic(TRANSACTION_STATE_TOPIC)
            .ok_or_else(|| "transaction state topic vanished".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

impl TxnLogStore for TransactionStateStore {
    fn partition_count(&self) -> i32 {
        match self.logs.topic(TRANSACTION_STATE_TOPIC) {
            Some(topic) => topic.partitions.len() as i32,
            None => {
                self.logs
                    .broker_config()
                    .transaction_state_log_num_partitions
            }
        }
    }

    fn append(&self, partition: i32, key: Bytes, value: Option<Bytes>) -> Result<(), String> {
        let now_ms = self.clock.now_ms();
        let topic = ensure_topic(&self.logs, now_ms)?;
        let partition = topic
            .partition(partition)
            .ok_or_else(|| format!("{TRANSACTION_STATE_TOPIC} has no partition {partition}"))?
            .clone();
        let record = PlainRecord::new(Some(key), value, now_ms);
        let batch = encode::batch([record], Compression::None)?;
        partition
            .append_internal(&batch, now_ms)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn load(&self) -> Result<Vec<(Bytes, Option<Bytes>)>, String> {
        let Some(topic) = self.logs.topic(TRANSACTION_STATE_TOPIC) else {
            return Ok(Vec::new());
        };
        let read_bytes = self
            .logs
            .broker_config()
            .transaction_state_log_load_buffer_bytes;
        let mut all = Vec::new();
        for partition in &topic.partitions {
            replay_partition(partition, read_bytes, |batch| {
                if let Replayed::Records { records, .. } = batch {
                    all.extend(
                        records
                            .into_iter()
                            .filter_map(|r| r.key.map(|key| (key, r.value))),
                    );
                }
            })?;
        }
        Ok(all)
    }

    fn next_producer_id(&self) -> Result<i64, String> {
        self.logs
            .producer_ids()
            .next_id()
            .map_err(|e| e.to_string())
    }

    fn coordinator_epoch(&self, partition: i32) -> i32 {
        self.logs
            .topic(TRANSACTION_STATE_TOPIC)
            .and_then(|t| t.partition(partition).map(|p| p.leader_epoch()))
            .unwrap_or(0)
    }
}
