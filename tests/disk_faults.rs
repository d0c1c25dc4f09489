//! Storage failures injected through the broker's `Disk` fault plan, one per failure point,
//! over real sockets: an append (short write, disk full, failed fsync), a roll, an index resize,
//! a checkpoint, the cleaner's swap, and topic creation. Each time the broker answers Kafka's
//! KAFKA_STORAGE_ERROR, acknowledges nothing it did not store, serves only whole valid batches,
//! and serves every acknowledged record once the fault is cleared or after a restart. A failed
//! fsync (or a swap that cannot be finished) takes the log directory offline until a restart.

mod common;

use bytes::Bytes;
use common::data::{self, create_topic_with_configs, fetch, fetch_request, topic_name};
use common::{batch, now_ms, sized_batch, Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use sluice::disk::{Fault, FaultKind, Op};
use sluice::record_batch::encode::{self, PlainRecord};

const STORAGE_ERROR: i16 = 56;

/// Produces one batch with acks=all; returns (error code, base offset).
async fn produce(client: &mut Client, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let response = data::produce(client, 9, topic, partition, records).await;
    (response.error_code, response.base_offset)
}

/// Produces `records` and asserts it was acknowledged; returns its offsets.
async fn produce_ok(client: &mut Client, topic: &str, records: Bytes) -> Vec<i64> {
    let count = record_count(&records);
    let (error, base) = produce(client, topic, 0, records).await;
    assert_eq!(error, 0, "produce to {topic}");
    (base..base + count).collect()
}

fn record_count(records: &Bytes) -> i64 {
    i64::from(i32::from_be_bytes(records[57..61].try_into().unwrap()))
}

/// Walks `records` as stored batches: each must be whole with a valid CRC-32C. Returns the
/// offsets they hold (base offset to base offset + last offset delta).
fn whole_valid_batches(records: &[u8]) -> Vec<i64> {
    let mut offsets = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        assert!(rest.len() >= 61, "a torn batch header was served");
        let base = i64::from_be_bytes(rest[0..8].try_into().unwrap());
        let length = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize;
        assert!(rest.len() >= 12 + length, "a torn batch was served");
        let crc = u32::from_be_bytes(rest[17..21].try_into().unwrap());
        assert_eq!(
            crc,
            crc32c::crc32c(&rest[21..12 + length]),
            "a corrupt batch was served"
        );
        let delta = i64::from(i32::from_be_bytes(rest[23..27].try_into().unwrap()));
        offsets.extend(base..=base + delta);
        rest = &rest[12 + length..];
    }
    offsets
}

/// Every record served from 0 to the end as (offset, value), checking each response holds
/// whole valid batches. A fetch reads one segment at a time.
async fn fetch_records(client: &mut Client, topic: &str) -> Vec<(i64, Bytes)> {
    let mut records = Vec::new();
    let mut next = 0;
    loop {
        let data = fetch(client, &fetch_request(topic, 0, next, 0, 8 << 20)).await;
        assert_eq!(data.error_code, 0, "fetch {topic} at {next}");
        let bytes = data.records.unwrap_or_default();
        let Some(&last) = whole_valid_batches(&bytes).last() else {
            return records;
        };
        let served = data::decode_offsets_and_values(bytes);
        records.extend(served.into_iter().filter(|(o, _)| *o >= next));
        next = last + 1;
        if next >= data.high_watermark {
            return records;
        }
    }
}

/// Every offset served from 0 to the end.
async fn fetch_everything(client: &mut Client, topic: &str) -> Vec<i64> {
    let records = fetch_records(client, topic).await;
    records.into_iter().map(|(offset, _)| offset).collect()
}

async fn fetch_error(client: &mut Client, topic: &str) -> i16 {
    fetch(client, &fetch_request(topic, 0, 0, 0, 1 << 20))
        .await
        .error_code
}

async fn list_offsets_error(client: &mut Client, topic: &str) -> i16 {
    data::list_offset(client, topic, 0, -1).await.error_code
}

async fn delete_records_error(client: &mut Client, topic: &str) -> i16 {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(1),
            ])]);
    let response: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &request).await;
    response.topics[0].partitions[0].error_code
}

async fn describe_log_dir_error(client: &mut Client) -> i16 {
    let request = DescribeLogDirsRequest::default().with_topics(None);
    let response: DescribeLogDirsResponse = client.call(ApiKey::DescribeLogDirs, 1, &request).await;
    response.results[0].error_code
}

async fn delete_topic_error(client: &mut Client, topic: &str) -> i16 {
    let request = DeleteTopicsRequest::default().with_topic_names(vec![topic_name(topic)]);
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 4, &request).await;
    response.responses[0].error_code
}

async fn create(client: &mut Client, topic: &str, partitions: i32) -> i16 {
    create_topic_with_configs(client, topic, partitions, &[]).await
}

fn small_batch() -> Bytes {
    batch(3, Compression::None, now_ms())
}

/// A write that fails part way (`kind`) is cut back: that produce alone fails, the partition
/// stays online, the next produce takes the same offsets, and nothing torn is ever served.
async fn a_failed_append_write_is_cut_back(kind: FaultKind) {
    let mut broker = TestBroker::start_with_faults(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "append", 1).await, 0);
    let mut acknowledged = Vec::new();
    for _ in 0..3 {
        acknowledged.extend(produce_ok(&mut client, "append", small_batch()).await);
    }
    let segment = broker
        .dir
        .path()
        .join("append-0")
        .join(format!("{:020}.log", 0));
    let stored_bytes = std::fs::metadata(&segment).unwrap().len();
    broker
        .faults()
        .arm(Fault::new(Op::Write, "append-0/", kind).once());
    let (error, _) = produce(&mut client, "append", 0, small_batch()).await;
    assert_eq!(error, STORAGE_ERROR);
    assert_eq!(broker.faults().fired(), 1);
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        stored_bytes,
        "the partial write was cut off"
    );
    assert_eq!(fetch_everything(&mut client, "append").await, acknowledged);
    let next = produce_ok(&mut client, "append", small_batch()).await;
    assert_eq!(next[0], 9, "the failed append took no offsets");
    acknowledged.extend(next);
    assert_eq!(fetch_everything(&mut client, "append").await, acknowledged);
    broker.restart().await;
    let mut client = broker.client().await;
    assert_eq!(fetch_everything(&mut client, "append").await, acknowledged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_append_write_fails_only_that_produce() {
    a_failed_append_write_is_cut_back(FaultKind::ShortWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_only_that_produce() {
    a_failed_append_write_is_cut_back(FaultKind::DiskFull).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_takes_the_log_directory_offline_until_a_restart() {
    let mut broker = TestBroker::start_with_faults(&[("log.flush.interval.messages", "1")]).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "synced", 1).await, 0);
    assert_eq!(create(&mut client, "other", 1).await, 0);
    let mut acknowledged = Vec::new();
    for _ in 0..3 {
        acknowledged.extend(produce_ok(&mut client, "synced", small_batch()).await);
    }
    let other = produce_ok(&mut client, "other", small_batch()).await;
    broker
        .faults()
        .arm(Fault::new(Op::Sync, "synced-0/", FaultKind::SyncFailure).once());
    let (error, _) = produce(&mut client, "synced", 0, small_batch()).await;
    assert_eq!(
        error, STORAGE_ERROR,
        "an append whose fsync failed is not acknowledged"
    );
    // Clearing the fault does not bring the directory back: a later fsync proves nothing.
    broker.faults().clear();
    for topic in ["synced", "other"] {
        let (error, _) = produce(&mut client, topic, 0, small_batch()).await;
        assert_eq!(error, STORAGE_ERROR, "produce to {topic} while offline");
        assert_eq!(fetch_error(&mut client, topic).await, STORAGE_ERROR);
        assert_eq!(list_offsets_error(&mut client, topic).await, STORAGE_ERROR);
    }
    assert_eq!(
        delete_records_error(&mut client, "other").await,
        STORAGE_ERROR
    );
    assert_eq!(describe_log_dir_error(&mut client).await, STORAGE_ERROR);
    // A topic whose directories cannot be renamed is not deleted: it would come back at the
    // restart. It stays, refusing like every other topic.
    assert_eq!(
        delete_topic_error(&mut client, "other").await,
        STORAGE_ERROR
    );
    let (error, _) = produce(&mut client, "other", 0, small_batch()).await;
    assert_eq!(error, STORAGE_ERROR, "the topic is still there");
    broker.restart_after_failure().await;
    let mut client = broker.client().await;
    assert_eq!(describe_log_dir_error(&mut client).await, 0);
    let served = fetch_everything(&mut client, "synced").await;
    assert_eq!(
        served[..acknowledged.len()],
        acknowledged[..],
        "every acknowledged record is served"
    );
    assert_eq!(fetch_everything(&mut client, "other").await, other);
    let next = produce_ok(&mut client, "synced", small_batch()).await;
    assert_eq!(next[0], served.len() as i64);
}

/// Small segments: a few 700-byte batches fill one, and every batch after the first gets an
/// index entry, so reads go through the indexes.
const SMALL_SEGMENTS: &[(&str, &str)] = &[
    ("log.segment.bytes", "2048"),
    ("log.index.size.max.bytes", "4096"),
    ("log.index.interval.bytes", "1"),
];

/// A roll that fails at `fault` fails that produce; the next produce rolls and nothing is lost.
async fn a_failed_roll_is_retried(fault: Fault) {
    let mut broker = TestBroker::start_with_faults(SMALL_SEGMENTS).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "roll", 1).await, 0);
    let mut acknowledged = Vec::new();
    for _ in 0..2 {
        acknowledged.extend(produce_ok(&mut client, "roll", sized_batch(1, 700)).await);
    }
    broker.faults().arm(fault.once());
    // The third batch does not fit: the segment rolls first, and that fails.
    let (error, _) = produce(&mut client, "roll", 0, sized_batch(1, 700)).await;
    assert_eq!(error, STORAGE_ERROR);
    assert_eq!(broker.faults().fired(), 1);
    assert_eq!(fetch_everything(&mut client, "roll").await, acknowledged);
    for _ in 0..6 {
        acknowledged.extend(produce_ok(&mut client, "roll", sized_batch(1, 700)).await);
    }
    assert_eq!(fetch_everything(&mut client, "roll").await, acknowledged);
    let log = broker.partition("roll", 0);
    assert!(log.log_stats().unwrap().active_segment_base_offset > 0);
    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    assert_eq!(fetch_everything(&mut client, "roll").await, acknowledged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_whose_new_segment_cannot_be_created_fails_that_produce() {
    a_failed_roll_is_retried(Fault::new(Op::Open, ".timeindex", FaultKind::DiskFull)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_whose_index_cannot_be_resized_fails_that_produce() {
    a_failed_roll_is_retried(Fault::new(Op::SetLen, ".index", FaultKind::Error)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_fsync_of_a_rolled_segment_takes_the_directory_offline() {
    let mut broker = TestBroker::start_with_faults(SMALL_SEGMENTS).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "rolled", 1).await, 0);
    broker
        .faults()
        .arm(Fault::new(Op::Sync, ".timeindex", FaultKind::SyncFailure).once());
    let mut acknowledged = Vec::new();
    for _ in 0..2 {
        acknowledged.extend(produce_ok(&mut client, "rolled", sized_batch(1, 700)).await);
    }
    // The third batch rolls the segment, and the flusher thread fsyncs the old one meanwhile:
    // the directory may go offline before the batch is written (then it is refused) or after
    // (then it is acknowledged, and must be served after the restart like the others).
    let (error, base_offset) = produce(&mut client, "rolled", 0, sized_batch(1, 700)).await;
    match error {
        0 => acknowledged.push(base_offset),
        STORAGE_ERROR => {}
        other => panic!("the rolling produce got error {other}"),
    }
    let logs = broker.broker.as_ref().unwrap().log_manager().clone();
    for _ in 0..500 {
        if logs.is_offline() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        logs.is_offline(),
        "the failed background fsync took the directory offline"
    );
    assert_eq!(broker.faults().fired(), 1);
    let (error, _) = produce(&mut client, "rolled", 0, sized_batch(1, 700)).await;
    assert_eq!(error, STORAGE_ERROR);
    assert!(
        logs.write_checkpoints().is_err(),
        "no checkpoint moves while offline"
    );
    drop(logs);
    broker.restart_after_failure().await;
    let mut client = broker.client().await;
    assert_eq!(fetch_everything(&mut client, "rolled").await, acknowledged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_checkpoint_leaves_the_old_one_and_the_partition_online() {
    // The background checkpoint task runs at start-up and then not during the test, which
    // writes the checkpoints itself.
    let mut broker =
        TestBroker::start_with_faults(&[("log.flush.offset.checkpoint.interval.ms", "3600000")])
            .await;
    let mut client = broker.client().await;
    let flushed = [("flush.ms", "0")];
    assert_eq!(
        create_topic_with_configs(&mut client, "checked", 1, &flushed).await,
        0
    );
    let mut acknowledged = produce_ok(&mut client, "checked", small_batch()).await;
    let logs = broker.broker.as_ref().unwrap().log_manager().clone();
    logs.flush_due(now_ms());
    logs.write_checkpoints().expect("checkpoint");
    let path = broker.dir.path().join("recovery-point-offset-checkpoint");
    let before = std::fs::read_to_string(&path).unwrap();
    for file in [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
    ] {
        // Armed until cleared: the background checkpoint task may write meanwhile.
        broker
            .faults()
            .arm(Fault::new(Op::Rename, file, FaultKind::Error));
        acknowledged.extend(produce_ok(&mut client, "checked", small_batch()).await);
        logs.flush_due(now_ms());
        assert!(
            logs.write_checkpoints().is_err(),
            "{file} cannot be renamed"
        );
        assert!(
            !logs.is_offline(),
            "nothing was lost, the directory stays online"
        );
        if file == "recovery-point-offset-checkpoint" {
            let kept = std::fs::read_to_string(&path).unwrap();
            assert_eq!(kept, before, "the old checkpoint stays whole");
        }
        broker.faults().clear();
    }
    acknowledged.extend(produce_ok(&mut client, "checked", small_batch()).await);
    assert_eq!(fetch_everything(&mut client, "checked").await, acknowledged);
    logs.flush_due(now_ms());
    logs.write_checkpoints()
        .expect("checkpoint once the fault is gone");
    assert_ne!(std::fs::read_to_string(&path).unwrap(), before);
    drop(logs);
    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    assert_eq!(fetch_everything(&mut client, "checked").await, acknowledged);
}

const COMPACTED: &[(&str, &str)] = &[
    ("log.segment.bytes", "2048"),
    ("log.cleaner.backoff.ms", "3600000"),
    ("log.index.size.max.bytes", "4096"),
];

const KEYS: [&str; 4] = ["a", "b", "c", "d"];

fn keyed_batch(round: usize) -> Bytes {
    let records = KEYS.iter().map(|key| {
        PlainRecord::new(
            Some(Bytes::from(key.to_string())),
            Some(Bytes::from(format!("{key}@{round}:{}", "x".repeat(100)))),
            now_ms(),
        )
    });
    encode::batch(records, Compression::None).unwrap()
}

/// A compacted topic with several inactive segments of overwritten keys; returns the offsets of
/// the last round, which compaction must keep.
async fn compacted_topic(client: &mut Client) -> Vec<i64> {
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(
        create_topic_with_configs(client, "compacted", 1, &configs).await,
        0
    );
    let mut last = Vec::new();
    for round in 0..12 {
        last = produce_ok(client, "compacted", keyed_batch(round)).await;
    }
    last
}

/// (offset, value) of every record served from offset 0.
async fn values(client: &mut Client) -> Vec<(i64, Bytes)> {
    fetch_records(client, "compacted").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaned_segment_that_cannot_be_swapped_in_leaves_the_log_as_it_was() {
    let broker = TestBroker::start_with_faults(COMPACTED).await;
    let mut client = broker.client().await;
    let last = compacted_topic(&mut client).await;
    let before = values(&mut client).await;
    broker
        .faults()
        .arm(Fault::new(Op::Rename, ".cleaned", FaultKind::Error));
    broker.run_cleaner_pass().await;
    assert!(broker.faults().fired() > 0);
    assert_eq!(values(&mut client).await, before, "nothing was swapped in");
    broker.faults().clear();
    assert!(broker.run_cleaner_pass().await > 0);
    let after = values(&mut client).await;
    assert!(after.len() < before.len(), "cleaned once the fault is gone");
    let kept: Vec<i64> = after.iter().map(|(offset, _)| *offset).collect();
    assert!(last.iter().all(|offset| kept.contains(offset)));
    produce_ok(&mut client, "compacted", keyed_batch(99)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_that_cannot_be_finished_takes_the_directory_offline_and_a_restart_finishes_it() {
    let mut broker = TestBroker::start_with_faults(COMPACTED).await;
    let mut client = broker.client().await;
    let last = compacted_topic(&mut client).await;
    let before = values(&mut client).await;
    // The second rename of a swap: `.log.swap` to `.log`, after the old segments are deleted.
    broker.faults().arm(
        Fault::new(Op::Rename, ".swap", FaultKind::Error)
            .nth(2)
            .once(),
    );
    broker.run_cleaner_pass().await;
    assert_eq!(broker.faults().fired(), 1);
    let (error, _) = produce(&mut client, "compacted", 0, keyed_batch(99)).await;
    assert_eq!(error, STORAGE_ERROR);
    assert_eq!(fetch_error(&mut client, "compacted").await, STORAGE_ERROR);
    broker.restart_after_failure().await;
    let mut client = broker.client().await;
    let after = values(&mut client).await;
    let kept: Vec<i64> = after.iter().map(|(offset, _)| *offset).collect();
    assert!(last.iter().all(|offset| kept.contains(offset)), "{kept:?}");
    // Every key's latest value is still the one served last.
    for key in KEYS {
        let latest = |records: &[(i64, Bytes)]| {
            records
                .iter()
                .rev()
                .find(|(_, value)| value.starts_with(format!("{key}@").as_bytes()))
                .cloned()
        };
        assert_eq!(latest(&after), latest(&before), "key {key}");
    }
    produce_ok(&mut client, "compacted", keyed_batch(99)).await;
}

/// A topic whose directories cannot be made is answered KAFKA_STORAGE_ERROR and leaves nothing
/// behind: creating it again works, and a restart does not bring back a half-made topic.
async fn a_failed_topic_creation_leaves_nothing(fault: Fault) {
    let mut broker = TestBroker::start_with_faults(&[]).await;
    let mut client = broker.client().await;
    broker.faults().arm(fault);
    assert_eq!(create(&mut client, "made", 3).await, STORAGE_ERROR);
    assert!(broker.faults().fired() > 0);
    broker.faults().clear();
    broker.restart().await;
    let mut client = broker.client().await;
    let request = MetadataRequest::default().with_topics(None);
    let metadata: MetadataResponse = client.call(ApiKey::Metadata, 9, &request).await;
    assert!(
        metadata
            .topics
            .iter()
            .all(|t| t.name != Some(topic_name("made"))),
        "the failed topic came back after a restart"
    );
    assert!(!broker.dir.path().join("made-0").exists());
    assert_eq!(create(&mut client, "made", 3).await, 0);
    let acknowledged = produce_ok(&mut client, "made", small_batch()).await;
    assert_eq!(fetch_everything(&mut client, "made").await, acknowledged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_directory_that_cannot_be_created_fails_the_topic() {
    a_failed_topic_creation_leaves_nothing(Fault::new(
        Op::CreateDir,
        "made-1",
        FaultKind::DiskFull,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_metadata_file_that_cannot_be_written_fails_the_topic() {
    a_failed_topic_creation_leaves_nothing(
        Fault::new(Op::Open, "partition.metadata", FaultKind::Error).nth(2),
    )
    .await;
}
