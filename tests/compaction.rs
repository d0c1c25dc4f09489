//! Compaction over real sockets: a compacted topic keeps the last value of each key at its
//! offset, `__consumer_offsets` stops growing with every commit and still answers OffsetFetch
//! after a restart, and a topic with `cleanup.policy=delete` is never cleaned.

mod common;

use bytes::Bytes;
use common::data::{self, create_topic_with_configs, fetch, fetch_request, topic_name};
use common::{Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use sluice::record_batch::encode::{self, PlainRecord};

/// Small segments so that a few kilobytes make several; a cleaner task that never runs on its
/// own, so each test runs its passes itself.
const OVERRIDES: &[(&str, &str)] = &[
    ("log.segment.bytes", "2048"),
    ("log.cleaner.backoff.ms", "3600000"),
    ("group.initial.rebalance.delay.ms", "0"),
    ("log.index.size.max.bytes", "4096"),
];

/// One batch: `round`'s value for each of `keys`.
fn round_batch(keys: &[&str], round: usize) -> Bytes {
    let records = keys.iter().map(|key| {
        let value = format!("{key}@{round}:{}", "x".repeat(100));
        PlainRecord::new(
            Some(Bytes::from(key.to_string())),
            Some(Bytes::from(value)),
            common::now_ms(),
        )
    });
    let compression = if round.is_multiple_of(2) {
        Compression::None
    } else {
        Compression::Snappy
    };
    encode::batch(records, compression).unwrap()
}

/// Every record of the partition as (offset, key, value), fetched the way a consumer does.
async fn consume_all(client: &mut Client, topic: &str) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let partition = fetch(client, &fetch_request(topic, 0, offset, 0, 1 << 20)).await;
        assert_eq!(partition.error_code, 0);
        let mut records = partition.records.unwrap_or_default();
        if records.is_empty() {
            assert_eq!(
                offset, partition.high_watermark,
                "nothing returned below the end"
            );
            return out;
        }
        while !records.is_empty() {
            let set = RecordBatchDecoder::decode(&mut records).unwrap();
            for record in set.records.into_iter().filter(|r| r.offset >= offset) {
                let text =
                    |b: Option<Bytes>| String::from_utf8(b.unwrap_or_default().to_vec()).unwrap();
                out.push((record.offset, text(record.key), text(record.value)));
            }
        }
        // Offsets the cleaner removed are skipped: the next fetch starts after the last record
        // or, past an emptied batch, at the high watermark.
        offset = out.last().map_or(offset, |(o, _, _)| o + 1).max(offset + 1);
        if offset >= partition.high_watermark {
            return out;
        }
    }
}

async fn produce_rounds(client: &mut Client, topic: &str, keys: &[&str], rounds: usize) {
    for round in 0..rounds {
        let response = data::produce(client, 9, topic, 0, round_batch(keys, round)).await;
        assert_eq!(response.error_code, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_last_value_of_each_key() {
    let mut broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let topic = "compacted";
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(
        create_topic_with_configs(&mut client, topic, 1, &configs).await,
        0
    );
    let keys = ["apple", "pear", "plum", "fig"];
    produce_rounds(&mut client, topic, &keys, 40).await;
    let before = consume_all(&mut client, topic).await;
    assert_eq!(before.len(), 160);

    assert_eq!(broker.run_cleaner_pass().await, 1, "one partition cleaned");
    let after = consume_all(&mut client, topic).await;
    let active_base = broker
        .partition(topic, 0)
        .log_stats()
        .unwrap()
        .active_segment_base_offset;
    // Below the active segment, one record per key, the last one before it, at its offset.
    let cleaned: Vec<_> = after.iter().filter(|(o, _, _)| *o < active_base).collect();
    assert_eq!(cleaned.len(), keys.len(), "{cleaned:?}");
    for (offset, key, value) in &cleaned {
        let last = before
            .iter()
            .rfind(|(o, k, _)| k == key && *o < active_base)
            .unwrap();
        assert_eq!((offset, key, value), (&last.0, &last.1, &last.2));
    }
    // The active segment is untouched; the log's offsets and the next append are too.
    let untouched: Vec<_> = before
        .iter()
        .filter(|(o, _, _)| *o >= active_base)
        .collect();
    assert_eq!(after[keys.len()..].iter().collect::<Vec<_>>(), untouched);
    assert_eq!(data::earliest_offset(&mut client, topic, 0).await, 0);
    let next = data::produce(&mut client, 9, topic, 0, round_batch(&keys, 99)).await;
    assert_eq!(next.base_offset, 160);
    // Nothing dirty is left below the active segment: the next pass has nothing to do.
    assert_eq!(broker.run_cleaner_pass().await, 0);

    // The cleaned log and the cleaner's checkpoint survive a crash and a clean restart.
    let checkpoint = broker.config().log_dir.join("cleaner-offset-checkpoint");
    let text = std::fs::read_to_string(&checkpoint).expect("cleaner-offset-checkpoint");
    assert!(text.contains(&format!("{topic} 0 {active_base}")), "{text}");
    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    let mut expected = after.clone();
    expected.extend(
        consume_all(&mut client, topic)
            .await
            .into_iter()
            .skip(after.len()),
    );
    assert_eq!(consume_all(&mut client, topic).await, expected);
    assert_eq!(
        broker.run_cleaner_pass().await,
        0,
        "the checkpoint was read back"
    );
    broker.restart().await;
    let mut client = broker.client().await;
    assert_eq!(consume_all(&mut client, topic).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_policy_topic_is_never_cleaned() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let configs = [("min.cleanable.dirty.ratio", "0.01")];
    assert_eq!(
        create_topic_with_configs(&mut client, "plain", 1, &configs).await,
        0
    );
    produce_rounds(&mut client, "plain", &["a", "b"], 40).await;
    let before = consume_all(&mut client, "plain").await;
    assert_eq!(broker.run_cleaner_pass().await, 0);
    assert_eq!(consume_all(&mut client, "plain").await, before);
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

async fn commit(client: &mut Client, group: &str, topic: &str, offset: i64) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_metadata(Some(s(&"m".repeat(200)))),
                ]),
        ]);
    let response: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &request).await;
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
}

async fn committed(client: &mut Client, group: &str, topic: &str) -> i64 {
    let request = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(vec![0]),
            ])),
    ]);
    let response: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 8, &request).await;
    response.groups[0].topics[0].partitions[0].committed_offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_offsets_stop_growing_with_every_commit() {
    let mut overrides = OVERRIDES.to_vec();
    overrides.push(("offsets.topic.segment.bytes", "4096"));
    let mut broker = TestBroker::start(&overrides).await;
    let mut client = broker.client().await;
    let group = "committer";
    data::create_topic(&mut client, "t", 1).await;
    for offset in 0..300 {
        commit(&mut client, group, "t", offset).await;
    }
    // Kafka's default ratio (0.5): a log that was never cleaned is all dirty.
    assert_eq!(
        broker.run_cleaner_pass().await,
        1,
        "the group's partition was cleaned"
    );
    let partition = (0..50)
        .find(|p| {
            broker
                .partition("__consumer_offsets", *p)
                .log_stats()
                .unwrap()
                .log_end_offset
                > 0
        })
        .expect("the commits are somewhere");
    let size_bytes = broker
        .partition("__consumer_offsets", partition)
        .log_stats()
        .map(|stats| (stats.size_bytes, stats.active_segment_base_offset))
        .unwrap();
    // 300 commits of ~300 bytes are ~90 KB; the cleaned log holds one commit below the active
    // segment plus the active segment itself.
    assert!(size_bytes.0 < 3 * 4096, "{size_bytes:?}");
    assert_eq!(committed(&mut client, group, "t").await, 299);
    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    assert_eq!(committed(&mut client, group, "t").await, 299);
    commit(&mut client, group, "t", 300).await;
    broker.restart().await;
    let mut client = broker.client().await;
    assert_eq!(committed(&mut client, group, "t").await, 300);
}
