//! The log cleaner: the last record of each key survives with its offset, tombstones last
//! `delete.retention.ms`, the map bound limits a round, and an interrupted swap is completed on
//! open.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::{open, small_config};
use crate::log::batch::{
    set_delete_horizon, with_records, BatchHeader, BatchIter, RECORD_BATCH_OVERHEAD,
};
use crate::log::encode::{self, PlainRecord};
use crate::log::{CleanerConfig, LogConfig, PartitionLog, RetentionConfig};

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

fn eager() -> CleanerConfig {
    CleanerConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..CleanerConfig::default()
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
        ..CleanerConfig::default()
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
fn tombstones_stay_for_delete_retention_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    for round in 0..20 {
        let value = format!("v{round}");
        let last = round == 19;
        let batch = keyed_batch(
            &[
                ("gone", if last { None } else { Some(&value) }),
                ("kept", Some(&value)),
            ],
            1_000,
            Compression::Zstd,
        );
        log.append(&batch, 0, 0, false).unwrap();
        // Roll so the tombstone's batch lies below the active segment.
        if last {
            log.roll(0).unwrap();
        }
    }
    let keep = CleanerConfig {
        delete_retention_ms: 3_600_000,
        ..eager()
    };
    log.clean(0, &keep, now_ms()).unwrap().expect("a round ran");
    let after = stored(&log);
    assert_eq!(
        after,
        vec![
            (38, Some(Bytes::from("gone")), None),
            (39, Some(Bytes::from("kept")), Some(Bytes::from("v19")))
        ]
    );
    // An hour and a second later the tombstone's segment is past delete.retention.ms.
    let outcome = log
        .clean(
            0,
            &CleanerConfig {
                max_compaction_lag_ms: 1,
                ..keep
            },
            now_ms() + 3_601_000,
        )
        .unwrap()
        .expect("a round ran");
    assert_eq!(outcome.records_removed, 1);
    assert_eq!(
        stored(&log),
        vec![(39, Some(Bytes::from("kept")), Some(Bytes::from("v19")))]
    );
    assert_eq!(log.log_end_offset(), 40);
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

#[test]
fn an_interrupted_swap_is_completed_on_open() {
    let config = small_config();
    let cleaned = tempfile::tempdir().unwrap();
    let mut log = rounds(cleaned.path(), &config);
    log.clean(0, &eager(), now_ms())
        .unwrap()
        .expect("a round ran");
    let expected = stored(&log);
    let first = *log.inactive.keys().next().unwrap();
    let second = log.inactive.keys().nth(1).copied();
    drop(log);

    // The same log, crashed after the first group's swap file was written: the swap replaces
    // the segments it covers, and a leftover `.cleaned` file is deleted.
    let crashed = tempfile::tempdir().unwrap();
    drop(rounds(crashed.path(), &config));
    let name = |base: i64, suffix: &str| format!("{base:020}{suffix}");
    std::fs::copy(
        cleaned.path().join(name(first, ".log")),
        crashed.path().join(name(first, ".log.swap")),
    )
    .unwrap();
    std::fs::write(crashed.path().join(name(7, ".log.cleaned")), b"partial").unwrap();
    let log = open(crashed.path(), &config, false, 0);
    let recovered = stored(&log);
    let covered_end = second.unwrap_or(log.active_segment_base_offset());
    let below = |records: &[Stored]| -> Vec<Stored> {
        records
            .iter()
            .filter(|(offset, _, _)| *offset < covered_end)
            .cloned()
            .collect()
    };
    assert_eq!(below(&recovered), below(&expected));
    assert_eq!(log.log_end_offset(), 150);
    assert!(!crashed.path().join(name(7, ".log.cleaned")).exists());
    assert!(!crashed.path().join(name(first, ".log.swap")).exists());
}

#[test]
fn a_group_whose_segments_changed_meanwhile_is_not_swapped_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let round = log
        .plan_cleaning(0, &eager(), HashSet::new(), now_ms())
        .unwrap()
        .expect("due");
    let cleaned = round.write().unwrap().expect("written");
    let cleaned_files = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".cleaned")
            })
            .count()
    };
    assert!(
        cleaned_files(dir.path()) > 1,
        "the round wrote one file per group"
    );
    // Meanwhile DeleteRecords and retention remove the first segment.
    let second = *log.inactive.keys().nth(1).unwrap();
    log.advance_log_start_offset(second).unwrap();
    let retention = RetentionConfig {
        retention_ms: -1,
        retention_bytes: -1,
        file_delete_delay_ms: 0,
    };
    let end = log.log_end_offset();
    assert_eq!(log.delete_old_segments(&retention, end, 0).unwrap(), 1);
    let before = stored(&log);
    let outcome = log
        .finish_cleaning(cleaned, now_ms())
        .unwrap()
        .expect("the other groups were swapped in");
    assert_eq!(
        cleaned_files(dir.path()),
        0,
        "the first group's output is deleted"
    );
    assert_eq!(log.log_start_offset(), second);
    assert_compacted(&before, &stored(&log), outcome.next_dirty_offset);
}

/// A batch of `records` with a delete horizon (KIP-534) of `horizon_ms` already stamped.
fn with_horizon(batch: Vec<u8>, horizon_ms: i64) -> Vec<u8> {
    let mut head = [0u8; RECORD_BATCH_OVERHEAD];
    head.copy_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    set_delete_horizon(&mut head, horizon_ms);
    with_records(&head, &batch[RECORD_BATCH_OVERHEAD..], 0)
}

/// The same batch from producer `producer_id` (epoch 0, base sequence 0).
fn from_producer(batch: Vec<u8>, producer_id: i64) -> Vec<u8> {
    let mut head = [0u8; RECORD_BATCH_OVERHEAD];
    head.copy_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    head[43..51].copy_from_slice(&producer_id.to_be_bytes());
    head[51..53].copy_from_slice(&0i16.to_be_bytes());
    head[53..57].copy_from_slice(&0i32.to_be_bytes());
    with_records(&head, &batch[RECORD_BATCH_OVERHEAD..], 0)
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

#[test]
fn a_tombstone_gets_a_delete_horizon_on_its_first_cleaning_and_keeps_its_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    let none = Compression::None;
    log.append(&keyed_batch(&[("k", Some("v"))], 1_000, none), 0, 0, false)
        .unwrap();
    log.roll(0).unwrap();
    // Timestamps 2_000 in a batch that also holds a kept value.
    log.append(
        &keyed_batch(&[("k", None), ("j", Some("w"))], 2_000, Compression::Lz4),
        0,
        0,
        false,
    )
    .unwrap();
    log.roll(0).unwrap();
    let retention = CleanerConfig {
        delete_retention_ms: 0,
        ..eager()
    };
    // Even with delete.retention.ms=0 the first cleaning keeps the tombstone and stamps it.
    let now = now_ms();
    log.clean(0, &retention, now).unwrap().expect("a round ran");
    let tombstone_batch = headers(&log)
        .into_iter()
        .find(|h| h.base_offset == 1)
        .unwrap();
    assert_eq!(tombstone_batch.delete_horizon_ms(), Some(now));
    let read = log.read(1, 1 << 20, true, i64::MAX).unwrap();
    let mut bytes = read.records.clone();
    let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
    let times: Vec<(i64, i64)> = set
        .records
        .iter()
        .map(|r| (r.offset, r.timestamp))
        .collect();
    assert_eq!(
        times,
        vec![(1, 2_000), (2, 2_000)],
        "timestamps survive the horizon"
    );
    assert_eq!(
        stored(&log),
        vec![
            (1, Some(Bytes::from("k")), None),
            (2, Some(Bytes::from("j")), Some(Bytes::from("w")))
        ]
    );
    // Once the horizon has passed, the next cleaning drops it.
    let outcome = log
        .clean(
            0,
            &CleanerConfig {
                max_compaction_lag_ms: 1,
                ..retention
            },
            now + 1,
        )
        .unwrap()
        .expect("a round ran");
    assert_eq!(outcome.records_removed, 1);
    assert_eq!(
        stored(&log),
        vec![(2, Some(Bytes::from("j")), Some(Bytes::from("w")))]
    );
}

#[test]
fn records_past_the_key_map_stay_even_expired_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    let none = Compression::None;
    log.append(
        &keyed_batch(&[("k", Some("v")), ("a", Some("1"))], 1_000, none),
        0,
        0,
        false,
    )
    .unwrap();
    log.roll(0).unwrap();
    let expired = with_horizon(keyed_batch(&[("k", None)], 1_000, none), 1);
    log.append(&expired, 0, 0, false).unwrap();
    log.roll(0).unwrap();
    // The map holds the first batch only: the tombstone lies past its end.
    let tiny = CleanerConfig {
        dedupe_buffer_bytes: 1,
        ..eager()
    };
    let outcome = log.clean(0, &tiny, now_ms()).unwrap().expect("a round ran");
    assert_eq!(outcome.next_dirty_offset, 2);
    assert_eq!(
        stored(&log),
        vec![
            (0, Some(Bytes::from("k")), Some(Bytes::from("v"))),
            (1, Some(Bytes::from("a")), Some(Bytes::from("1"))),
            (2, Some(Bytes::from("k")), None)
        ],
        "the delete of k must not be lost while its value stays"
    );
}

#[test]
fn a_live_producers_last_batch_stays_when_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &small_config(), true, 0);
    let none = Compression::None;
    let produced = from_producer(keyed_batch(&[("k", Some("1"))], 1_000, none), 7);
    log.append(&produced, 0, 0, false).unwrap();
    log.append(&keyed_batch(&[("k", Some("2"))], 1_000, none), 0, 0, false)
        .unwrap();
    log.append(&keyed_batch(&[("j", Some("3"))], 1_000, none), 0, 0, false)
        .unwrap();
    log.roll(0).unwrap();
    let round = log
        .plan_cleaning(0, &eager(), HashSet::from([0]), now_ms())
        .unwrap()
        .expect("due");
    let cleaned = round.write().unwrap().expect("written");
    log.finish_cleaning(cleaned, now_ms())
        .unwrap()
        .expect("swapped in");
    let kept: Vec<(i64, i64, i32)> = headers(&log)
        .iter()
        .map(|h| (h.base_offset, h.producer_id, h.records_count))
        .collect();
    assert_eq!(kept, vec![(0, 7, 0), (1, -1, 1), (2, -1, 1)]);
}

#[test]
fn a_source_batch_with_a_bad_crc_stops_the_round_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = rounds(dir.path(), &small_config());
    let first = dir.path().join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&first).unwrap();
    // The last byte of the first batch's last value: a CRC mismatch, still decodable.
    let first_batch = BatchHeader::parse(&bytes).unwrap().total_size();
    bytes[first_batch - 1] ^= 0x01;
    std::fs::write(&first, &bytes).unwrap();
    let segments = log.inactive.len();
    let error = log.clean(0, &eager(), now_ms()).unwrap_err();
    assert!(error.to_string().contains("CRC"), "{error}");
    assert_eq!(log.inactive.len(), segments);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        bytes,
        "the segment is untouched"
    );
    let leftovers = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".log.")
        })
        .count();
    assert_eq!(leftovers, 0, "no .cleaned or .swap file is left behind");
}
