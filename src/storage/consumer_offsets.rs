//! `__consumer_offsets`: where the group coordinator's committed offsets (and group records)
//! are made durable, in Kafka's record formats, as an internal topic of 50 partitions
//! (Kafka's `offsets.topic.num.partitions`). A group's records all go to partition
//! `(javaHashCode(group) & 0x7fffffff) % 50`, as in Kafka, so one group's history stays in order.
//!
//! The topic is created on first use. Nothing compacts it yet, so it grows with every commit;
//! at start-up it is replayed from its log start offset.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::{LogManager, TopicConfigs};
use crate::group::StoreError;
use crate::time::Clock;

pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
const PARTITIONS: i32 = 50;
/// Bytes read per step when replaying the topic at start-up.
const REPLAY_READ_BYTES: usize = 4 << 20;

pub struct ConsumerOffsetsStore {
    logs: Arc<LogManager>,
    clock: Arc<dyn Clock>,
}

/// Java's `String.hashCode`: 31-polynomial over UTF-16 code units, wrapping.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

pub fn partition_for(group_id: &str) -> i32 {
    (java_string_hash(group_id) & 0x7fff_ffff) % PARTITIONS
}

impl ConsumerOffsetsStore {
    pub fn new(logs: Arc<LogManager>, clock: Arc<dyn Clock>) -> ConsumerOffsetsStore {
        ConsumerOffsetsStore { logs, clock }
    }

    fn topic(&self) -> Result<Arc<super::Topic>, String> {
        ensure_topic(&self.logs, self.clock.now_ms())
    }
}

/// The offsets topic, created (50 partitions, compacted) if it does not exist yet. Kafka does
/// this on the first FindCoordinator for a group, so it shows in Metadata from then on.
pub fn ensure_topic(logs: &LogManager, now_ms: i64) -> Result<Arc<super::Topic>, String> {
    if let Some(topic) = logs.topic(CONSUMER_OFFSETS_TOPIC) {
        return Ok(topic);
    }
    let configs = std::collections::BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), "104857600".to_string()),
    ]);
    let configs = TopicConfigs::validated(configs).map_err(|e| e.to_string())?;
    match logs.create_topic(CONSUMER_OFFSETS_TOPIC, PARTITIONS, configs, now_ms) {
        Ok(topic) => Ok(topic),
        Err(super::TopicError::AlreadyExists) => logs
            .topic(CONSUMER_OFFSETS_TOPIC)
            .ok_or_else(|| "offsets topic vanished".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

impl crate::group::OffsetStore for ConsumerOffsetsStore {
    fn append(
        &self,
        group_id: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let topic = self.topic().map_err(StoreError::Io)?;
        let partition = topic
            .partition(partition_for(group_id))
            .ok_or_else(|| StoreError::Io("offsets partition missing".to_string()))?
            .clone();
        let now_ms = self.clock.now_ms();
        let records: Vec<Record> = records
            .into_iter()
            .enumerate()
            .map(|(i, (key, value))| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The encoder starts a new batch where sequences are not consecutive.
                sequence: i as i32 - 1,
                timestamp: now_ms,
                key: Some(key),
                value,
                headers: Default::default(),
            })
            .collect();
        let mut batch = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut batch,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .map_err(|e| StoreError::Io(e.to_string()))?;
        // The same bound a produced batch meets, which Kafka's coordinator also applies to its
        // own writes: a group of many members with large subscriptions can exceed it.
        let max_bytes = usize::try_from(topic.settings().max_message_bytes).unwrap_or(0);
        if batch.len() > max_bytes {
            return Err(StoreError::TooLarge {
                batch_bytes: batch.len(),
                max_bytes,
            });
        }
        partition
            .with_log(|log| log.append(&batch, 0, now_ms, false))
            .map_err(|e| StoreError::Io(e.to_string()))?;
        partition.notify_appended();
        Ok(())
    }

    fn load(&self) -> Result<Vec<(Bytes, Option<Bytes>)>, String> {
        let Some(topic) = self.logs.topic(CONSUMER_OFFSETS_TOPIC) else {
            return Ok(Vec::new());
        };
        let mut all = Vec::new();
        for partition in &topic.partitions {
            let (mut offset, end) = partition
                .with_log(|log| Ok((log.log_start_offset(), log.log_end_offset())))
                .map_err(|e| e.to_string())?;
            while offset < end {
                let mut bytes = partition
                    .with_log(|log| log.read(offset, REPLAY_READ_BYTES, true, end))
                    .map_err(|e| e.to_string())?
                    .records;
                let before = offset;
                while bytes.len() >= crate::log::batch::RECORD_BATCH_OVERHEAD {
                    let Ok(header) = crate::log::batch::BatchHeader::parse(&bytes) else {
                        break;
                    };
                    if header.total_size() > bytes.len() {
                        break;
                    }
                    let mut one = bytes.split_to(header.total_size());
                    let set = RecordBatchDecoder::decode(&mut one)
                        .map_err(|e| format!("{partition}: {e}"))?;
                    for record in set.records.into_iter().filter(|r| r.offset >= offset) {
                        if let Some(key) = record.key {
                            all.push((key, record.value));
                        }
                    }
                    offset = offset.max(header.last_offset() + 1);
                }
                if offset == before {
                    return Err(format!(
                        "{partition}: no progress replaying at offset {offset}"
                    ));
                }
            }
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_match_kafkas_hash() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("group"), 98629247);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants"), 0);
        assert!((0..PARTITIONS).contains(&partition_for("my-consumer-group")));
    }
}
