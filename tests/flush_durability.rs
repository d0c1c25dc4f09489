//! When the broker fsyncs a partition's `.log`, checked over real sockets. With
//! `log.flush.interval.messages=1` every acknowledged produce must be fsynced before its response
//! is written. A kill -9 test cannot show that (the page cache outlives the process), so these
//! tests read the log's count of `.log` fsyncs and its recovery point after each response.

mod common;

use bytes::Bytes;
use common::data::{self, create_topic_with_configs};
use common::{batch, now_ms, Client, TestBroker};
use kafka_protocol::records::Compression;
use sluice::storage::Partition;

const BATCHES: i64 = 20;
const RECORDS_PER_BATCH: i64 = 3;

async fn create_topic(client: &mut Client, name: &str, configs: &[(&str, &str)]) {
    assert_eq!(create_topic_with_configs(client, name, 1, configs).await, 0);
}

/// Produces with acks=all and returns the acknowledged base offset.
async fn produce(client: &mut Client, topic: &str, records: Bytes) -> i64 {
    let p = data::produce(client, 9, topic, 0, records).await;
    assert_eq!(p.error_code, 0, "{:?}", p.error_message);
    p.base_offset
}

/// (fsyncs of the partition's `.log` files so far, recovery point).
fn fsyncs_and_recovery_point(partition: &Partition) -> (u64, i64) {
    let stats = partition.log_stats().unwrap();
    (stats.segment_fsyncs, stats.recovery_point)
}

/// Produces `BATCHES` batches one at a time and checks, after each acknowledgement, that the
/// `.log` was fsynced exactly once for it and the recovery point covers the acknowledged records.
async fn assert_each_ack_follows_an_fsync(broker: &TestBroker, client: &mut Client, topic: &str) {
    let partition = broker.partition(topic, 0);
    let (mut fsyncs, _) = fsyncs_and_recovery_point(&partition);
    for n in 0..BATCHES {
        let records = batch(RECORDS_PER_BATCH as usize, Compression::None, now_ms());
        let base_offset = produce(client, topic, records).await;
        assert_eq!(base_offset, n * RECORDS_PER_BATCH);
        let (after, recovery_point) = fsyncs_and_recovery_point(&partition);
        assert_eq!(
            after,
            fsyncs + 1,
            "{topic} batch {n}: one fsync of the .log before the response"
        );
        assert_eq!(
            recovery_point,
            base_offset + RECORDS_PER_BATCH,
            "{topic} batch {n}: the recovery point covers every acknowledged record"
        );
        fsyncs = after;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_broker_flush_interval_one_every_acknowledged_produce_was_fsynced() {
    let broker = TestBroker::start(&[("log.flush.interval.messages", "1")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "durable", &[]).await;
    assert_each_ack_follows_an_fsync(&broker, &mut client, "durable").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_produce_does_not_fsync_but_a_flush_messages_topic_does() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "lazy", &[]).await;
    create_topic(&mut client, "eager", &[("flush.messages", "1")]).await;

    let lazy = broker.partition("lazy", 0);
    let (fsyncs, recovery_point) = fsyncs_and_recovery_point(&lazy);
    for n in 0..BATCHES {
        let records = batch(RECORDS_PER_BATCH as usize, Compression::None, now_ms());
        assert_eq!(
            produce(&mut client, "lazy", records).await,
            n * RECORDS_PER_BATCH
        );
    }
    assert_eq!(
        fsyncs_and_recovery_point(&lazy),
        (fsyncs, recovery_point),
        "Kafka's default leaves flushing to the OS: no fsync, and the recovery point stays"
    );
    assert_eq!(recovery_point, 0);

    // The topic-level override of the same broker gets the guarantee.
    assert_each_ack_follows_an_fsync(&broker, &mut client, "eager").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_ms_fsyncs_once_the_interval_has_passed_on_the_broker_clock() {
    let broker = TestBroker::start_with_manual_clock(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "timed", &[("flush.ms", "60000")]).await;
    let partition = broker.partition("timed", 0);
    let (fsyncs, _) = fsyncs_and_recovery_point(&partition);
    for _ in 0..2 {
        let records = batch(RECORDS_PER_BATCH as usize, Compression::None, now_ms());
        produce(&mut client, "timed", records).await;
    }
    broker.advance_clock_ms(59_999);
    broker.run_flush_pass().await;
    assert_eq!(
        fsyncs_and_recovery_point(&partition),
        (fsyncs, 0),
        "not due before flush.ms has passed"
    );
    broker.advance_clock_ms(1);
    broker.run_flush_pass().await;
    assert_eq!(
        fsyncs_and_recovery_point(&partition),
        (fsyncs + 1, 2 * RECORDS_PER_BATCH),
        "due once flush.ms has passed: one fsync covering both batches"
    );
    broker.run_flush_pass().await;
    assert_eq!(
        fsyncs_and_recovery_point(&partition).0,
        fsyncs + 1,
        "nothing unflushed, nothing to fsync"
    );
}
