//! `__consumer_offsets`: where the group coordinator's committed offsets (and group records)
//! are made durable, in Kafka's record formats, as an internal topic of 50 partitions
//! (Kafka's `offsets.topic.num.partitions`). A group's records all go to partition
//! `(javaHashCode(group) & 0x7fffffff) % 50`, as in Kafka, so one group's history stays in order.
//!
//! The topic is created on first use, with `cleanup.policy=compact`: the log cleaner keeps each
//! key's last record (`log::cleaner`), so it grows with the groups and partitions, not with
//! every commit. At start-up it is replayed from its log start offset.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::Compression;

use super::replay::{replay_partition, Replayed};
use super::{LogManager, PartitionError, SequenceError, TopicConfigs};
use crate::group::{StoreError, StoredRecord};
use crate::record_batch::control::TxnMarker;
use crate::record_batch::encode::{self, PlainRecord, TransactionalProducer};
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

/// Kafka's placement: `Utils.abs(hashCode) % partitions`, where `Utils.abs` maps `i32::MIN` to 0.
pub fn partition_for(group_id: &str) -> i32 {
    crate::group::records::offsets_partition_for(group_id, PARTITIONS)
}

/// The group id a record key names (both key layouts start with a version, then the group).
fn group_of_key(key: &[u8]) -> Option<&str> {
    let length = usize::try_from(i16::from_be_bytes([*key.get(2)?, *key.get(3)?])).ok()?;
    std::str::from_utf8(key.get(4..4 + length)?).ok()
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
        (
            "segment.bytes".to_string(),
            logs.broker_config().offsets_topic_segment_bytes.to_string(),
        ),
    ]);
    // Not checked against a topic's 1 MiB segment.bytes floor: `offsets.topic.segment.bytes` has
    // its own (1), as in Kafka, where the internal topic bypasses the topic-level check.
    let configs = TopicConfigs::from_map(configs);
    match logs.create_topic(CONSUMER_OFFSETS_TOPIC, PARTITIONS, configs, now_ms) {
        Ok(topic) => Ok(topic),
        Err(super::TopicError::AlreadyExists) => logs
            .topic(CONSUMER_OFFSETS_TOPIC)
            .ok_or_else(|| "offsets topic vanished".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

impl ConsumerOffsetsStore {
    /// Appends one batch of `records` to the group's partition, as `producer`'s transactional
    /// batch when given.
    fn append_batch(
        &self,
        group_id: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
        producer: Option<TransactionalProducer>,
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
        let records = records
            .into_iter()
            .map(|(key, value)| PlainRecord::new(Some(key), value, now_ms));
        let batch = match producer {
            Some(producer) => encode::transactional_batch(records, producer),
            None => encode::batch(records, Compression::None),
        }
        .map_err(StoreError::Io)?;
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
            .append_internal(&batch, now_ms)
            .map_err(store_error)?;
        Ok(())
    }
}

/// A partition's refusal as the group coordinator sees it.
fn store_error(error: PartitionError) -> StoreError {
    match error {
        PartitionError::Sequence(SequenceError::InvalidProducerEpoch) => StoreError::ProducerFenced,
        PartitionError::Sequence(SequenceError::CoordinatorFenced) => StoreError::CoordinatorFenced,
        other => StoreError::Io(other.to_string()),
    }
}

impl crate::group::OffsetStore for ConsumerOffsetsStore {
    fn append(
        &self,
        group_id: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError> {
        self.append_batch(group_id, records, None)
    }

    fn append_transactional(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError> {
        let producer = TransactionalProducer {
            producer_id,
            producer_epoch,
        };
        self.append_batch(group_id, records, Some(producer))
    }

    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        transaction_version: i8,
    ) -> Result<(), StoreError> {
        let topic = self.topic().map_err(StoreError::Io)?;
        let partition = topic
            .partition(partition)
            .ok_or_else(|| StoreError::Io("offsets partition missing".to_string()))?
            .clone();
        let marker = TxnMarker {
            commit,
            coordinator_epoch,
        };
        partition
            .append_marker(
                producer_id,
                producer_epoch,
                marker,
                transaction_version,
                self.clock.now_ms(),
            )
            .map(drop)
            .map_err(store_error)
    }

    fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id)
    }

    fn load(&self) -> Result<Vec<StoredRecord>, String> {
        let Some(topic) = self.logs.topic(CONSUMER_OFFSETS_TOPIC) else {
            return Ok(Vec::new());
        };
        let mut all = Vec::new();
        for (index, partition) in topic.partitions.iter().enumerate() {
            replay_partition(partition, REPLAY_READ_BYTES, |batch| match batch {
                Replayed::Records {
                    producer_id,
                    records,
                } => {
                    for record in records {
                        if let Some(key) = record.key {
                            let stored = StoredRecord::Record {
                                key,
                                value: record.value,
                                producer_id,
                            };
                            all.push((index, stored));
                        }
                    }
                }
                Replayed::Marker {
                    producer_id,
                    marker,
                } => all.push((
                    index,
                    StoredRecord::Marker {
                        partition: index as i32,
                        producer_id,
                        commit: marker.commit,
                    },
                )),
            })?;
        }
        Ok(replay_order(all))
    }
}

/// The order in which the entries read from each partition (partition index, entry) are
/// replayed. Records of a group found outside its partition were written by sluice before it
/// placed groups as Kafka does (a negative hash was masked, not negated): they are older than any
/// record in the group's own partition, so they come first; otherwise the log order stands.
/// Markers always belong to their partition.
fn replay_order(records: Vec<(usize, StoredRecord)>) -> Vec<StoredRecord> {
    let (placed, misplaced): (Vec<_>, Vec<_>) =
        records
            .into_iter()
            .partition(|(index, stored)| match stored {
                StoredRecord::Record { key, .. } => {
                    group_of_key(key).is_none_or(|group| partition_for(group) as usize == *index)
                }
                StoredRecord::Marker { .. } => true,
            });
    misplaced
        .into_iter()
        .chain(placed)
        .map(|(_, stored)| stored)
        .collect()
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
        // A negative hash is negated, as Kafka's Utils.abs does, not masked.
        let hash = java_string_hash("g-coop");
        assert!(hash < 0);
        assert_eq!(partition_for("g-coop"), -hash % PARTITIONS);
        assert_eq!(group_of_key(b"\x00\x02\x00\x03abc"), Some("abc"));
        assert_eq!(group_of_key(b"\x00\x01\x00\x09abc"), None);
    }

    #[test]
    fn records_from_the_old_placement_replay_before_the_group_partition() {
        let key =
            |group: &str| Bytes::from(format!("\x00\x01\x00{}{group}", group.len() as u8 as char));
        let old = (java_string_hash("g-coop") & 0x7fff_ffff) % PARTITIONS;
        let new = partition_for("g-coop");
        assert!(
            old > new,
            "the case this guards: the stale partition is read last"
        );
        let value = |v: &'static str| Some(Bytes::from_static(v.as_bytes()));
        let record = |index: i32, key: Bytes, value: Option<Bytes>| {
            (
                index as usize,
                StoredRecord::Record {
                    key,
                    value,
                    producer_id: None,
                },
            )
        };
        let records = vec![
            record(new, key("g-coop"), value("newer")),
            record(partition_for("other"), key("other"), value("o")),
            record(old, key("g-coop"), value("older")),
        ];
        let order: Vec<_> = replay_order(records)
            .into_iter()
            .map(|stored| match stored {
                StoredRecord::Record { value, .. } => value.unwrap(),
                StoredRecord::Marker { .. } => unreachable!(),
            })
            .collect();
        assert_eq!(order, vec!["older", "newer", "o"]);
    }
}
