//! Produce rules that Kafka enforces per partition (`ProduceRequest.validateRecords`,
//! `LogValidator`): acks, the batch's magic, its offset range, the control bit and timestamps.
//! Each refused batch gets Kafka's error code and leaves what was stored before it untouched.

mod common;

use bytes::Bytes;
use common::data::{create_topic, fetch_all_offsets, produce, produce_acks};
use common::{batch, now_ms, Client, TestBroker};
use kafka_protocol::records::Compression;

const CORRUPT_MESSAGE: i16 = 2;
const INVALID_RECORD: i16 = 87;
const INVALID_REQUIRED_ACKS: i16 = 21;
const INVALID_TIMESTAMP: i16 = 32;

/// The v2 batch header fields these tests rewrite (byte offsets, see docs/log-format.md).
const BATCH_LENGTH: usize = 8;
const MAGIC: usize = 16;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const CONTROL_BIT: u8 = 0x20;

/// Recomputes the CRC-32C, which covers everything from the attributes on, so that only the
/// field a test changed is wrong.
fn with_crc(mut bytes: Vec<u8>) -> Bytes {
    let crc = crc32c::crc32c(&bytes[ATTRIBUTES..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes.into()
}

/// Stores offsets 0..3 on partition 0 of a new topic `name`.
async fn topic_with_three_records(client: &mut Client, name: &str) {
    create_topic(client, name, 1).await;
    let stored = produce(client, 9, name, 0, batch(3, Compression::None, now_ms())).await;
    assert_eq!((stored.error_code, stored.base_offset), (0, 0));
}

/// What was stored before is still there, and the next good batch gets the next offset.
async fn assert_untouched(client: &mut Client, name: &str) {
    assert_eq!(fetch_all_offsets(client, name, 0).await, vec![0, 1, 2]);
    let next = produce(client, 9, name, 0, batch(1, Compression::None, now_ms())).await;
    assert_eq!((next.error_code, next.base_offset), (0, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_one_is_answered_after_the_append_and_other_acks_are_refused() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    topic_with_three_records(&mut client, "acks").await;
    let one = produce_acks(
        &mut client,
        9,
        1,
        "acks",
        0,
        batch(2, Compression::Lz4, now_ms()),
    )
    .await;
    assert_eq!((one.error_code, one.base_offset), (0, 3), "acks=1");
    assert_eq!(
        fetch_all_offsets(&mut client, "acks", 0).await,
        vec![0, 1, 2, 3, 4],
        "an acks=1 append is readable once answered"
    );
    for acks in [2, -2, 5] {
        let refused = produce_acks(
            &mut client,
            9,
            acks,
            "acks",
            0,
            batch(1, Compression::None, now_ms()),
        )
        .await;
        assert_eq!(refused.error_code, INVALID_REQUIRED_ACKS, "acks={acks}");
        assert_eq!(refused.base_offset, -1);
    }
    // Kafka's order (checked against Kafka 4.1): an unknown topic or partition first, then the
    // request-level framing checks, then acks, then the batch's contents.
    let one = || batch(1, Compression::None, now_ms());
    for (topic, partition) in [("missing", 0), ("acks", 7)] {
        let refused = produce_acks(&mut client, 9, 2, topic, partition, one()).await;
        assert_eq!(
            refused.error_code, 3,
            "{topic}-{partition}: UNKNOWN_TOPIC_OR_PARTITION"
        );
    }
    let mut old_magic = one().to_vec();
    old_magic[MAGIC] = 1;
    let refused = produce_acks(&mut client, 9, 2, "acks", 0, old_magic.into()).await;
    assert_eq!(refused.error_code, INVALID_RECORD, "framing before acks");
    let mut control = one().to_vec();
    control[ATTRIBUTES + 1] |= CONTROL_BIT;
    let refused = produce_acks(&mut client, 9, 2, "acks", 0, with_crc(control)).await;
    assert_eq!(
        refused.error_code, INVALID_REQUIRED_ACKS,
        "acks before contents"
    );
    assert_eq!(
        fetch_all_offsets(&mut client, "acks", 0).await,
        vec![0, 1, 2, 3, 4]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_kafkas_log_validator_refuses_leave_the_log_intact() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    topic_with_three_records(&mut client, "rules").await;
    let good = batch(4, Compression::None, now_ms()).to_vec();
    let compressed = batch(4, Compression::Gzip, now_ms()).to_vec();

    // Produce v3+ carries only magic 2 batches (the magic byte is outside the CRC); a magic
    // no format has is a corrupt batch.
    for (magic, error_code) in [
        (0u8, INVALID_RECORD),
        (1, INVALID_RECORD),
        (3, CORRUPT_MESSAGE),
        (0xff, CORRUPT_MESSAGE),
    ] {
        let mut other = good.clone();
        other[MAGIC] = magic;
        let refused = produce(&mut client, 9, "rules", 0, other.into()).await;
        assert_eq!(refused.error_code, error_code, "magic {magic}");
    }

    // No whole batch: INVALID_RECORD; a size field no batch can have: CORRUPT_MESSAGE.
    for cut in [1, 40, good.len() - 11] {
        let truncated = Bytes::copy_from_slice(&good[..good.len() - cut]);
        let refused = produce(&mut client, 9, "rules", 0, truncated).await;
        assert_eq!(
            refused.error_code, INVALID_RECORD,
            "batch short by {cut} bytes"
        );
    }
    for size_field in [-3i32, 5, 40] {
        let mut lying = good.clone();
        lying[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&size_field.to_be_bytes());
        let refused = produce(&mut client, 9, "rules", 0, lying.into()).await;
        assert_eq!(
            refused.error_code, CORRUPT_MESSAGE,
            "size field {size_field}"
        );
    }

    // lastOffsetDelta + 1 must equal the record count, compressed or not.
    for (codec, bytes) in [("none", &good), ("gzip", &compressed)] {
        for last_offset_delta in [2i32, 4, -1] {
            let mut lying = bytes.clone();
            lying[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4]
                .copy_from_slice(&last_offset_delta.to_be_bytes());
            let refused = produce(&mut client, 9, "rules", 0, with_crc(lying)).await;
            assert_eq!(
                refused.error_code, INVALID_RECORD,
                "{codec}: lastOffsetDelta {last_offset_delta} with 4 records"
            );
        }
    }

    // Only the transaction coordinator writes control batches.
    let mut control = good.clone();
    control[ATTRIBUTES + 1] |= CONTROL_BIT;
    let refused = produce(&mut client, 9, "rules", 0, with_crc(control)).await;
    assert_eq!(refused.error_code, INVALID_RECORD, "control batch");

    assert_untouched(&mut client, "rules").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_older_than_timestamp_before_max_ms_are_refused() {
    let broker = TestBroker::start(&[("log.message.timestamp.before.max.ms", "3600000")]).await;
    let mut client = broker.client().await;
    topic_with_three_records(&mut client, "old").await;
    let two_hours_ago = now_ms() - 7_200_000;
    for codec in [Compression::None, Compression::Zstd] {
        let refused = produce(&mut client, 9, "old", 0, batch(2, codec, two_hours_ago)).await;
        assert_eq!(refused.error_code, INVALID_TIMESTAMP, "{codec:?}");
    }
    // One old record among recent ones is enough: every record is checked, not just the
    // batch's maximum timestamp.
    let mut mixed = batch(2, Compression::None, two_hours_ago).to_vec();
    let max_timestamp = now_ms().to_be_bytes();
    mixed[35..43].copy_from_slice(&max_timestamp);
    let refused = produce(&mut client, 9, "old", 0, with_crc(mixed)).await;
    assert_eq!(refused.error_code, INVALID_TIMESTAMP, "one old record");
    assert_untouched(&mut client, "old").await;
    // Within the bound (59 minutes old) is accepted.
    let recent = produce(
        &mut client,
        9,
        "old",
        0,
        batch(1, Compression::None, now_ms() - 3_540_000),
    )
    .await;
    assert_eq!((recent.error_code, recent.base_offset), (0, 4));
}

/// Bytes after the batch that do not form a whole second batch are dropped, as Kafka's batch
/// iterator stops at them and its append trims them; a whole second batch is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_bytes_that_are_not_a_batch_are_dropped() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    topic_with_three_records(&mut client, "tail").await;
    let two = batch(2, Compression::None, now_ms());
    let next = batch(3, Compression::None, now_ms());
    for tail in [&[0u8, 0, 0, 0, 1][..], &next[..30], &next[..next.len() - 1]] {
        let mut records = two.to_vec();
        records.extend_from_slice(tail);
        let stored = produce(&mut client, 9, "tail", 0, records.into()).await;
        assert_eq!(stored.error_code, 0, "{} trailing bytes", tail.len());
    }
    let mut whole = two.to_vec();
    whole.extend_from_slice(&next);
    let refused = produce(&mut client, 9, "tail", 0, whole.into()).await;
    assert_eq!(refused.error_code, INVALID_RECORD, "two whole batches");
    assert_eq!(
        fetch_all_offsets(&mut client, "tail", 0).await,
        (0..9).collect::<Vec<_>>(),
        "three batches of two were stored, and nothing of their tails"
    );
    let last = produce(
        &mut client,
        9,
        "tail",
        0,
        batch(1, Compression::None, now_ms()),
    )
    .await;
    assert_eq!((last.error_code, last.base_offset), (0, 9));
}
