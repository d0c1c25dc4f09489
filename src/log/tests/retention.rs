//! Delete retention, DeleteRecords and `*.deleted` files. Clocks are explicit and far below the
//! files' real modification times, so any deletion seen here was decided by record timestamps.

use super::*;
use crate::log::{LogError, RetentionConfig};

/// One record per batch, so offsets and batches coincide; every such batch has the same size.
fn one_record(timestamp: i64) -> Vec<u8> {
    batch(1, timestamp, 20)
}

fn batch_bytes() -> u64 {
    one_record(0).len() as u64
}

/// Segments of exactly three batches: bases 0, 3, 6, ...
fn three_batch_config() -> LogConfig {
    LogConfig {
        segment_bytes: 3 * batch_bytes(),
        ..small_config()
    }
}

/// A log with one single-record batch per timestamp.
fn log_with(dir: &Path, timestamps: &[i64]) -> PartitionLog {
    let mut log = open(dir, &three_batch_config(), true, 0);
    for timestamp in timestamps {
        log.append(&one_record(*timestamp), 0, 0, false)
            .expect("append");
    }
    log
}

/// Nine batches with timestamps 1000..=1008 in segments 0, 3 and 6 (the active one, full).
fn nine_batches(dir: &Path) -> PartitionLog {
    let timestamps: Vec<i64> = (1_000..1_009).collect();
    let log = log_with(dir, &timestamps);
    assert_eq!(segment_files(dir), vec![0, 3, 6]);
    assert_eq!(log.log_end_offset(), 9);
    log
}

fn retention(
    retention_ms: i64,
    retention_bytes: i64,
    file_delete_delay_ms: i64,
) -> RetentionConfig {
    RetentionConfig {
        retention_ms,
        retention_bytes,
        file_delete_delay_ms,
    }
}

/// Names of the `*.deleted` files in `dir`, sorted.
fn deleted_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .filter(|name| name.ends_with(".deleted"))
        .collect();
    names.sort();
    names
}

fn assert_out_of_range(log: &PartitionLog, offset: i64) {
    assert!(
        matches!(
            log.read(offset, 1_000, true, i64::MAX),
            Err(LogError::OffsetOutOfRange { .. })
        ),
        "read at {offset} must be out of range"
    );
}

/// Base offset of the first batch a fetch at `offset` returns.
fn first_batch_at(log: &PartitionLog, offset: i64) -> i64 {
    let read = log.read(offset, 1_000, true, i64::MAX).expect("read");
    BatchHeader::parse(&read.records)
        .expect("a batch")
        .base_offset
}

#[test]
fn time_retention_uses_the_largest_record_timestamp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = nine_batches(dir.path());
    let config = retention(100, -1, 0);
    // Segment 0's largest timestamp is 1002: exactly retention_ms old is not yet breached.
    assert_eq!(
        log.delete_old_segments(&config, 9, 1_102)
            .expect("retention"),
        0
    );
    assert_eq!(
        log.delete_old_segments(&config, 9, 1_103)
            .expect("retention"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![3, 6]);
    assert!(
        deleted_files(dir.path()).is_empty(),
        "no delay: removed at once"
    );
    assert_eq!(log.log_start_offset(), 3);
    assert_eq!(log.log_end_offset(), 9);
    assert_out_of_range(&log, 2);
    assert_eq!(first_batch_at(&log, 3), 3);
    assert_eq!(
        log.find_offset_by_timestamp(0).expect("lookup"),
        Some((3, 1_003))
    );
    assert_eq!(log.size_bytes(), 6 * batch_bytes());
}

#[test]
fn an_expired_active_segment_is_deleted_after_rolling_an_empty_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = nine_batches(dir.path());
    let config = retention(100, -1, 0);
    assert_eq!(
        log.delete_old_segments(&config, 9, 10_000)
            .expect("retention"),
        3
    );
    assert_eq!(segment_files(dir.path()), vec![9]);
    assert_eq!(
        log.log_end_offset(),
        9,
        "the log end offset never moves back"
    );
    assert_eq!(log.log_start_offset(), 9);
    assert_eq!(log.size_bytes(), 0);
    assert!(log
        .read(9, 1_000, true, i64::MAX)
        .expect("read")
        .records
        .is_empty());
    assert_out_of_range(&log, 8);
    // The empty active segment is never deleted.
    assert_eq!(
        log.delete_old_segments(&config, 9, 10_000)
            .expect("retention"),
        0
    );
    assert_eq!(segment_files(dir.path()), vec![9]);
    let info = log
        .append(&one_record(10_000), 0, 10_000, false)
        .expect("append after retention");
    assert_eq!(info.base_offset, 9);
    assert_eq!(read_all(&log).len(), 1);
}

#[test]
fn nothing_at_or_above_the_high_watermark_is_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = nine_batches(dir.path());
    let config = retention(100, -1, 0);
    let now_ms = 10_000;
    // Every segment has expired; the high watermark alone decides, segment by segment.
    assert_eq!(
        log.delete_old_segments(&config, 2, now_ms).expect("hw 2"),
        0
    );
    assert_eq!(
        log.delete_old_segments(&config, 4, now_ms).expect("hw 4"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![3, 6]);
    assert_eq!(
        log.delete_old_segments(&config, 8, now_ms).expect("hw 8"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![6]);
    assert_eq!(log.log_start_offset(), 6);
    assert_eq!(
        log.delete_old_segments(&config, 9, now_ms).expect("hw 9"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![9]);
    assert_eq!(log.log_start_offset(), 9);
    assert_eq!(log.log_end_offset(), 9);
}

#[test]
fn size_retention_deletes_whole_segments_and_keeps_at_least_retention_bytes() {
    let s = batch_bytes() as i64;
    // Eight batches: segments of 3, 3 and 2 (active) batches. (retention.bytes, segments left)
    let cases: [(i64, Vec<i64>); 8] = [
        (9 * s, vec![0, 3, 6]),
        (8 * s, vec![0, 3, 6]),
        (5 * s + 1, vec![0, 3, 6]),
        (5 * s, vec![3, 6]),
        (5 * s - 1, vec![3, 6]),
        (2 * s, vec![6]),
        (s, vec![6]),
        (0, vec![8]),
    ];
    for (retention_bytes, left) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let timestamps: Vec<i64> = (1_000..1_008).collect();
        let mut log = log_with(dir.path(), &timestamps);
        assert_eq!(log.size_bytes(), 8 * s as u64);
        let config = retention(-1, retention_bytes, 0);
        log.delete_old_segments(&config, 8, 0).expect("retention");
        assert_eq!(
            segment_files(dir.path()),
            left,
            "retention.bytes {retention_bytes}"
        );
        // Kafka's rule: nothing goes below retention.bytes, and no more could go without that.
        let size = log.size_bytes() as i64;
        if retention_bytes <= 8 * s {
            assert!(size >= retention_bytes, "retention.bytes {retention_bytes}");
        }
        let first_segment_bytes = (left.get(1).unwrap_or(&8) - left[0]) * s;
        assert!(size == 0 || size - first_segment_bytes < retention_bytes);
        assert_eq!(log.log_start_offset(), left[0]);
        assert_eq!(log.log_end_offset(), 8);
    }
}

#[test]
fn size_retention_also_stops_at_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let timestamps: Vec<i64> = (1_000..1_008).collect();
    let mut log = log_with(dir.path(), &timestamps);
    let config = retention(-1, 0, 0);
    assert_eq!(
        log.delete_old_segments(&config, 5, 0).expect("retention"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![3, 6]);
}

#[test]
fn deleted_files_wait_for_the_delay_and_take_the_segment_snapshot_along() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = nine_batches(dir.path());
    for offset in [0, 1, 3] {
        std::fs::write(dir.path().join(file_name(offset, ".snapshot")), b"state")
            .expect("snapshot");
    }
    let config = retention(100, -1, 60_000);
    let now_ms = 1_103;
    assert_eq!(
        log.delete_old_segments(&config, 9, now_ms)
            .expect("retention"),
        1
    );
    let expected: Vec<String> = [".index", ".log", ".snapshot", ".timeindex"]
        .iter()
        .map(|suffix| file_name(0, &format!("{suffix}.deleted")))
        .collect();
    assert_eq!(deleted_files(dir.path()), expected);
    assert_eq!(segment_files(dir.path()), vec![3, 6]);
    assert_eq!(log.log_start_offset(), 3);
    log.remove_deleted_files(now_ms + 59_999)
        .expect("not yet due");
    assert_eq!(deleted_files(dir.path()), expected);
    log.remove_deleted_files(now_ms + 60_000).expect("due");
    assert!(deleted_files(dir.path()).is_empty());
    // Only the snapshot named after the deleted segment went.
    for offset in [1, 3] {
        assert!(dir.path().join(file_name(offset, ".snapshot")).exists());
    }
    assert!(!dir.path().join(file_name(0, ".snapshot")).exists());
}

#[test]
fn reopening_removes_deleted_files_after_clean_and_unclean_shutdown() {
    for clean_shutdown in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = nine_batches(dir.path());
        let config = retention(100, -1, 60_000);
        assert_eq!(
            log.delete_old_segments(&config, 9, 1_106)
                .expect("retention"),
            2
        );
        assert_eq!(deleted_files(dir.path()).len(), 6);
        let log_start_offset = log.log_start_offset();
        if clean_shutdown {
            log.close().expect("close");
        }
        drop(log);
        let options = OpenOptions {
            recovery_point: 0,
            log_start_offset,
            clean_shutdown,
        };
        let log = PartitionLog::open(
            &crate::disk::Disk::real(),
            dir.path(),
            three_batch_config(),
            options,
            0,
        )
        .expect("reopen");
        assert!(
            deleted_files(dir.path()).is_empty(),
            "clean: {clean_shutdown}"
        );
        assert_eq!(segment_files(dir.path()), vec![6]);
        assert_eq!(log.log_start_offset(), 6);
        assert_eq!(read_all(&log).len(), 3);
    }
}

#[test]
fn delete_records_moves_the_log_start_offset_and_retention_follows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = nine_batches(dir.path());
    assert_eq!(log.advance_log_start_offset(4).expect("advance"), 4);
    assert_eq!(log.log_start_offset(), 4);
    assert_out_of_range(&log, 3);
    assert_eq!(first_batch_at(&log, 4), 4);
    assert_eq!(
        log.find_offset_by_timestamp(0).expect("lookup"),
        Some((4, 1_004))
    );
    assert!(log.recovery_point() >= 4);
    // Never backwards, never past the log end offset.
    assert_eq!(log.advance_log_start_offset(2).expect("lower"), 4);
    assert!(matches!(
        log.advance_log_start_offset(10),
        Err(LogError::OffsetOutOfRange { requested: 10, .. })
    ));
    assert_eq!(log.log_start_offset(), 4);
    // Only the segment wholly below the log start offset goes, even with infinite retention.
    let infinite = retention(-1, -1, 0);
    assert_eq!(
        log.delete_old_segments(&infinite, 9, 0).expect("retention"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![3, 6]);
    assert_eq!(log.log_start_offset(), 4);
    assert_out_of_range(&log, 3);
    // Up to the log end offset: everything is hidden; the active segment is never deleted by it.
    assert_eq!(log.advance_log_start_offset(9).expect("advance"), 9);
    assert_eq!(
        log.delete_old_segments(&infinite, 9, 0).expect("retention"),
        1
    );
    assert_eq!(segment_files(dir.path()), vec![6]);
    assert_eq!(log.log_start_offset(), 9);
    assert!(log
        .read(9, 1_000, true, i64::MAX)
        .expect("read")
        .records
        .is_empty());
    assert_out_of_range(&log, 8);
}

#[test]
fn reopening_keeps_a_log_start_offset_inside_a_segment() {
    for clean_shutdown in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = nine_batches(dir.path());
        log.advance_log_start_offset(4).expect("advance");
        let checkpointed = log.log_start_offset();
        if clean_shutdown {
            log.close().expect("close");
        }
        drop(log);
        let options = OpenOptions {
            recovery_point: 0,
            log_start_offset: checkpointed,
            clean_shutdown,
        };
        let mut log = PartitionLog::open(
            &crate::disk::Disk::real(),
            dir.path(),
            three_batch_config(),
            options,
            0,
        )
        .expect("reopen");
        assert_eq!(log.log_start_offset(), 4, "clean: {clean_shutdown}");
        assert_eq!(log.log_end_offset(), 9);
        assert_out_of_range(&log, 3);
        assert_eq!(first_batch_at(&log, 4), 4);
        assert_eq!(
            log.find_offset_by_timestamp(0).expect("lookup"),
            Some((4, 1_004))
        );
        assert_eq!(
            log.delete_old_segments(&retention(-1, -1, 0), 9, 0)
                .expect("retention"),
            1
        );
        assert_eq!(segment_files(dir.path()), vec![3, 6]);
        assert_eq!(log.log_start_offset(), 4);
    }
}
