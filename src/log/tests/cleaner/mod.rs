//! The log cleaner: the last record of each key survives with its offset, the dirty ratio and
//! the compaction lags decide when a round runs, and the map bound limits a round. Tombstones
//! (`tombstones.rs`) and what keeps a round safe (`safety.rs`) have their own files; the helpers
//! here serve all three.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::{open, small_config};
use crate::config::Config;
use crate::log::{CleanerConfig, LogConfig, PartitionLog, RetentionConfig};
use crate::record_batch::encode::{self, PlainRecord};
use crate::record_batch::header::{
    set_delete_horizon, with_records, BatchHeader, BatchIter, RECORD_BATCH_OVERHEAD,
};

/// (offset, key, value) of one stored record.
type Stored = (i64, Option<Bytes>, Option<Bytes>);

/// A batch of `(key, value)` records; a None value is a tombstone.
fn keyed_batch(
    records: &[(&str, Option<&str>)],
    timestamp: i64,
    compression: Compression,
) -> Vec<u8> {
    let records = records.iter().map(|(key, value)| {
        PlainRecord::new(
            Some(Bytes::copy_from_slice(key.as_bytes())),
            value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            timestamp,
        )
    });
    encode::batch(records, compression).unwrap().to_vec()
}

/// Every record from the log start offset to the log end offset, read as a consumer would.
fn stored(log: &PartitionLog) -> Vec<Stored> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1 << 20, true, i64::MAX).expect("read");
        assert!(!read.records.is_empty(), "nothing at {offset}");
        let mut last_offset = offset - 1;
        for item in BatchIter::new(&read.records) {
            let (position, header) = item.expect("whole batch");
            last_offset = header.last_offset();
            let mut one = read.records.slice(position..position + header.total_size());
            let set = RecordBatchDecoder::decode(&mut one).expect("decode");
            out.extend(
                set.records
                    .into_iter()
                    .filter(|r| r.offset >= offset)
                    .map(|r| (r.offset, r.key, r.value)),
            );
        }
        offset = last_offset + 1;
    }
    out
}

/// The cleaner settings of a compacted topic on a broker with the default settings.
fn defaults() -> CleanerConfig {
    let broker = Config::default();
    CleanerConfig::from_topic(
        &broker.topic_values(),
        broker.log_cleaner_dedupe_buffer_bytes,
    )
}

fn eager() -> CleanerConfig {
    CleanerConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..defaults()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// 30 rounds over keys k0..k4 (round r writes value "r-<key>"), alternating codecs.
fn rounds(dir: &Path, config: &LogConfig) -> PartitionLog {
    let mut log = open(dir, config, true, 0);
    for round in 0..30 {
        let values: Vec<String> = (0..5)
            .map(|k| format!("{round}-k{k}-{}", "x".repeat(60)))
            .collect();
        let keys: Vec<String> = (0..5).map(|k| format!("k{k}")).collect();
        let records: Vec<(&str, Option<&str>)> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        let compression = if round % 2 == 0 {
            Compression::None
        } else {
            Compression::Lz4
        };
        log.append(
            &keyed_batch(&records, 1_000 + round, compression),
            0,
            0,
            false,
        )
        .expect("append");
    }
    log
}

/// Below `end`: exactly each key's last record below `end`. At or above: everything unchanged.
fn assert_compacted(before: &[Stored], after: &[Stored], end: i64) {
    let mut last_below: HashMap<Bytes, i64> = HashMap::new();
    for (offset, key, _) in before.iter().filter(|(o, _, _)| *o < end) {
        last_below.insert(key.clone().expect("keyed"), *offset);
    }
    let expected: Vec<Stored> = before
        .iter()
        .filter(|(offset, key, _)| {
            *offset >= end || last_below.get(key.as_ref().expect("keyed")) == Some(offset)
        })
        .cloned()
        .collect();
    assert_eq!(after, expected.as_slice());
}

#[test]
fn the_last_record_of_each_key_survives_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let mut log = rounds(dir.path(), &config);
    let before = stored(&log);
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let segments = log.inactive.len();
    assert!(
        segments >= 3,
        "the test needs several segments, got {segments}"
    );

    let outcome = log
        .clean(0, &eager(), now_ms())
        .unwrap()
        .expect("a round ran");
    assert_eq!(outcome.next_dirty_offset, log.active_segment_base_offset());
    assert!(
        outcome.bytes_after < outcome.bytes_before / 2,
        "{outcome:?}"
    );
    // Groups are formed from the sizes before cleaning, as Kafka does: full segments stay apart.
    assert_eq!(
        outcome.segments_after, outcome.segments_before,
        "{outcome:?}"
    );
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (start, end));
    let after = stored(&log);
    assert_compacted(&before, &after, outcome.next_dirty_offset);

    // Nothing new is dirty: no second round.
    assert_eq!(
        log.clean(outcome.next_dirty_offset, &eager(), now_ms())
            .unwrap(),
        None
    );
    // The next round merges the segments the first one shrank.
    for round in 0..3 {
        let batch = keyed_batch(
            &[("k9", Some(&format!("{round:0>1000}")))],
            9,
            Compression::None,
        );
        log.append(&batch, 0, 0, false).unwrap();
    }
    let before = stored(&log);
    let segments_before_second = log.inactive.len();
    let second = log
        .clean(outcome.next_dirty_offset, &eager(), now_ms())
        .unwrap()
        .expect("a second round ran");
    assert!(log.inactive.len() < segments_before_second, "{second:?}");
    let after = stored(&log);
    assert_compacted(&before, &after, second.next_dirty_offset);
    let end = log.log_end_offset();
    // Appends continue at the log end offset, and the files reopen to the same records after a
    // crash (full recovery) and after a clean close.
    drop(log);
    let mut log = open(dir.path(), &config, false, 0);
    assert_eq!(stored(&log), after);
    log.append(
        &keyed_batch(&[("k0", Some("new"))], 5_000, Compression::None),
        0,
        0,
        false,
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), end + 1);
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), &config, true, end + 1);
    assert_eq!(stored(&log)[..after.len()], after[..]);
}

#[test]
fn a_dirty_ratio_at_or_below_the_setting_waits() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let lazy = CleanerConfig {
        min_cleanable_dirty_ratio: 0.99,
        ..defaults()
    };
    let first_dirty = log.inactive.keys().nth(2).copied().unwrap();
    assert_eq!(log.clean(first_dirty, &lazy, now_ms()).unwrap(), None);
    // The same log is due when its dirty segments are past max.compaction.lag.ms.
    let overdue = CleanerConfig {
        max_compaction_lag_ms: 1,
        ..lazy
    };
    assert!(log
        .clean(first_dirty, &overdue, now_ms())
        .unwrap()
        .is_some());
    // Nothing inactive at all: never due.
    let dir = tempfile::tempdir().unwrap();
    let mut fresh = open(dir.path(), &small_config(), true, 0);
    fresh
        .append(
            &keyed_batch(&[("a", Some("1")), ("a", Some("2"))], 1, Compression::None),
            0,
            0,
            false,
        )
        .unwrap();
    assert_eq!(fresh.clean(0, &eager(), now_ms()).unwrap(), None);
}

#[test]
fn records_newer_than_min_compaction_lag_stay() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let before = stored(&log);
    // Timestamps are 1_000 + round: a lag reaching back past round 10 keeps rounds 10 and later.
    let now = 1_000 + 10 + 100;
    let config = CleanerConfig {
        min_compaction_lag_ms: 100,
        delete_retention_ms: i64::MAX,
        ..eager()
    };
    let outcome = log.clean(0, &config, now).unwrap().expect("a round ran");
    assert!(outcome.next_dirty_offset < log.active_segment_base_offset());
    let cut_round = before
        .iter()
        .find(|(offset, _, _)| *offset >= outcome.next_dirty_offset)
        .map(|(offset, _, _)| offset / 5)
        .unwrap();
    assert!(
        cut_round <= 11,
        "records of round {cut_round} were eligible"
    );
    assert_compacted(&before, &stored(&log), outcome.next_dirty_offset);
}

#[test]
fn a_full_key_map_ends_the_round_early() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let before = stored(&log);
    let tiny = CleanerConfig {
        dedupe_buffer_bytes: 1,
        ..eager()
    };
    let outcome = log.clean(0, &tiny, now_ms()).unwrap().expect("a round ran");
    // One batch (five keys) fills the map.
    assert_eq!(outcome.next_dirty_offset, 5);
    assert_compacted(&before, &stored(&log), 5);
}

/// Every batch header of the log, empty batches included.
fn headers(log: &PartitionLog) -> Vec<BatchHeader> {
    let read = log
        .read(log.log_start_offset(), 1 << 20, true, i64::MAX)
        .unwrap();
    let mut out: Vec<BatchHeader> = BatchIter::new(&read.records)
        .map(|b| b.unwrap().1)
        .collect();
    // Later segments, read one at a time.
    while let Some(last) = out.last().map(|h| h.last_offset() + 1) {
        if last >= log.log_end_offset() {
            break;
        }
        let read = log.read(last, 1 << 20, true, i64::MAX).unwrap();
        out.extend(BatchIter::new(&read.records).map(|b| b.unwrap().1));
    }
    out
}

mod safety;
mod tombstones;
