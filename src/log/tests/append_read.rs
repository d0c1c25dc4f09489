//! Appends, rolls, reads and their size and offset bounds.

use super::*;
use crate::log::LogError;
use crate::record_batch::header::{
    crc_is_valid, set_base_offset, set_partition_leader_epoch, RECORD_BATCH_OVERHEAD,
};

#[test]
fn round_trip_across_rolls_keeps_bytes_and_stamps_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    let mut appended = Vec::new();
    let mut next_offset = 0;
    for n in 0..40 {
        let mut bytes = batch(1 + n % 3, 1_000 + n as i64, 60);
        let info = log.append(&bytes, 7, 0, false).expect("append");
        assert_eq!(info.base_offset, next_offset);
        next_offset = info.last_offset + 1;
        assert_eq!(info.last_offset - info.base_offset, (n % 3) as i64);
        // The log stamps its stored copy; stamp ours the same way to compare.
        set_base_offset(&mut bytes, info.base_offset);
        set_partition_leader_epoch(&mut bytes, 7);
        assert!(crc_is_valid(&bytes), "stamping must not break the CRC");
        appended.push(bytes);
    }
    let total: i64 = (0..40).map(|n| 1 + (n % 3) as i64).sum();
    assert_eq!(log.log_end_offset(), total);
    let bases = segment_files(dir.path());
    assert!(bases.len() >= 4, "expected several segments, got {bases:?}");

    let headers = read_all(&log);
    assert_eq!(headers.len(), appended.len());
    let mut expected_base = 0;
    for (header, bytes) in headers.iter().zip(&appended) {
        assert_eq!(header.base_offset, expected_base);
        assert_eq!(header.partition_leader_epoch, 7);
        assert_eq!(header.total_size(), bytes.len());
        expected_base = header.last_offset() + 1;
    }
    // Every segment's file name is the base offset of its first batch, and each stays within
    // segment_bytes.
    for base in &bases {
        let path = dir.path().join(file_name(*base, ".log"));
        let contents = std::fs::read(&path).expect("read segment");
        assert!(contents.len() as u64 <= config.segment_bytes);
        let first = BatchHeader::parse(&contents).expect("first batch");
        assert_eq!(first.base_offset, *base);
    }
    // Stored bytes equal the stamped input, byte for byte.
    let first_segment = std::fs::read(dir.path().join(file_name(0, ".log"))).expect("read");
    assert_eq!(&first_segment[..appended[0].len()], &appended[0][..]);
}

#[test]
fn read_inside_a_batch_returns_that_whole_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config(), true, 0);
    append_batches(&mut log, 3, 5, 10);
    let read = log.read(7, 100_000, false, i64::MAX).expect("read");
    let headers: Vec<BatchHeader> = BatchIter::new(&read.records)
        .map(|item| item.expect("batch").1)
        .collect();
    assert_eq!(headers[0].base_offset, 5);
    assert_eq!(headers[0].last_offset(), 9);
    assert_eq!(headers.len(), 2);
    assert!(log
        .read(15, 100, true, i64::MAX)
        .expect("read at end")
        .records
        .is_empty());
}

#[test]
fn max_bytes_with_and_without_min_one_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config(), true, 0);
    append_batches(&mut log, 3, 2, 40);
    let size = log
        .read(0, 100_000, false, i64::MAX)
        .expect("read")
        .records
        .len()
        / 3;

    assert!(log
        .read(0, size - 1, false, i64::MAX)
        .expect("read")
        .records
        .is_empty());
    assert_eq!(
        log.read(0, size - 1, true, i64::MAX)
            .expect("read")
            .records
            .len(),
        size
    );
    assert_eq!(
        log.read(0, 1, true, i64::MAX).expect("read").records.len(),
        size
    );
    assert_eq!(
        log.read(0, 0, true, i64::MAX).expect("read").records.len(),
        size
    );
    assert_eq!(
        log.read(0, size, false, i64::MAX)
            .expect("read")
            .records
            .len(),
        size
    );
    // A trailing partial batch is allowed when max_bytes cuts it.
    let read = log.read(0, size + 20, false, i64::MAX).expect("read");
    assert_eq!(read.records.len(), size + 20);
    let mut iter = BatchIter::new(&read.records);
    assert_eq!(iter.by_ref().count(), 1);
    assert!(iter.stopped_at_torn_tail());
}

#[test]
fn max_offset_bounds_the_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config(), true, 0);
    append_batches(&mut log, 4, 2, 10);
    let bases = |max_offset: i64| -> Vec<i64> {
        let read = log.read(0, 100_000, true, max_offset).expect("read");
        BatchIter::new(&read.records)
            .map(|item| item.expect("batch").1.base_offset)
            .collect()
    };
    assert_eq!(bases(i64::MAX), vec![0, 2, 4, 6]);
    assert_eq!(bases(8), vec![0, 2, 4, 6]);
    assert_eq!(bases(4), vec![0, 2]);
    assert_eq!(
        bases(3),
        vec![0, 2],
        "a batch starting below the bound is returned whole"
    );
    assert_eq!(bases(0), Vec::<i64>::new());
    assert!(log
        .read(4, 100_000, true, 4)
        .expect("read")
        .records
        .is_empty());
}

#[test]
fn offsets_outside_the_log_are_out_of_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset: 10,
        clean_shutdown: true,
    };
    let mut log = PartitionLog::open(
        &crate::disk::Disk::real(),
        dir.path(),
        small_config(),
        options,
        0,
    )
    .expect("open");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 10));
    assert_eq!(segment_files(dir.path()), vec![10]);
    append_batches(&mut log, 2, 3, 10);
    assert!(matches!(
        log.read(9, 100, true, i64::MAX),
        Err(LogError::OffsetOutOfRange {
            requested: 9,
            log_start_offset: 10,
            log_end_offset: 16
        })
    ));
    assert!(matches!(
        log.read(17, 100, true, i64::MAX),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(log
        .read(16, 100, true, i64::MAX)
        .expect("read at the end")
        .records
        .is_empty());
    assert_eq!(read_all(&log)[0].base_offset, 10);
}

#[test]
fn batch_larger_than_a_segment_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 1, 1, 10);
    let huge = batch(1, 0, config.segment_bytes as usize);
    let before = huge.clone();
    assert!(matches!(
        log.append(&huge, 1, 0, false),
        Err(LogError::RecordTooLarge)
    ));
    assert_eq!(huge, before);
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(segment_files(dir.path()), vec![0]);
    let mut short = batch(1, 0, 10);
    short.truncate(RECORD_BATCH_OVERHEAD + 2);
    assert!(matches!(
        log.append(&short, 1, 0, false),
        Err(LogError::Corrupt(_))
    ));
}

#[test]
fn offset_index_entry_every_index_interval_maps_last_offset_to_batch_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 1_000_000,
        ..small_config()
    };
    let mut log = open(dir.path(), &config, true, 0);
    // Model of Kafka's rule: check before counting the batch, reset on an entry.
    let mut expected = Vec::new();
    let (mut position, mut since_last_entry) = (0u64, 0u64);
    for n in 0..30 {
        let bytes = batch(1 + n % 4, 1_000 + n as i64, 20 + 7 * n);
        let info = log.append(&bytes, 0, 0, false).expect("append");
        if since_last_entry > config.index_interval_bytes {
            expected.push((info.last_offset as i32, position as i32));
            since_last_entry = 0;
        }
        since_last_entry += bytes.len() as u64;
        position += bytes.len() as u64;
    }
    log.close().expect("close");
    let entries = offset_index_entries(&dir.path().join(file_name(0, ".index")));
    assert!(expected.len() >= 5);
    assert_eq!(entries, expected);
    // Each entry points at a batch whose last offset is the entry's offset.
    let segment = std::fs::read(dir.path().join(file_name(0, ".log"))).expect("read");
    for (relative, position) in entries {
        let header = BatchHeader::parse(&segment[position as usize..]).expect("batch at entry");
        assert_eq!(header.last_offset(), i64::from(relative));
    }
}

#[test]
fn roll_by_segment_ms_uses_record_timestamps_then_wall_clock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_ms: 1_000,
        ..small_config()
    };
    let mut log = open(dir.path(), &config, true, 0);
    for timestamp in [10_000, 10_500, 11_000] {
        log.append(&batch(1, timestamp, 10), 0, 0, false)
            .expect("append");
    }
    assert_eq!(
        segment_files(dir.path()),
        vec![0],
        "1000 ms waited is not more than segment_ms"
    );
    // Wall clock is irrelevant while the first batch has a timestamp.
    log.append(&batch(1, 11_000, 10), 0, 999_999, false)
        .expect("append");
    assert_eq!(segment_files(dir.path()), vec![0]);
    log.append(&batch(1, 11_001, 10), 0, 0, false)
        .expect("append");
    assert_eq!(segment_files(dir.path()), vec![0, 4]);
    // The rolled segment is fsynced in the background; the recovery point follows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while log.recovery_point() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(log.recovery_point(), 4, "a roll flushes the old segment");

    // A first batch without a timestamp makes the wall clock count from segment creation.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config, true, 0);
    log.append(&batch(1, -1, 10), 0, 0, false).expect("append");
    log.append(&batch(1, 50_000, 10), 0, 1_000, false)
        .expect("append");
    assert_eq!(segment_files(dir.path()), vec![0]);
    log.append(&batch(1, 50_000, 10), 0, 1_001, false)
        .expect("append");
    assert_eq!(segment_files(dir.path()), vec![0, 2]);
}

#[test]
fn flush_interval_messages_and_ms_advance_the_recovery_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        flush_interval_messages: 1,
        ..small_config()
    };
    let mut log = open(dir.path(), &config, false, 0);
    for _ in 0..5 {
        let fsyncs = log.segment_fsyncs();
        log.append(&batch(3, 0, 10), 0, 0, false).expect("append");
        assert_eq!(log.recovery_point(), log.log_end_offset());
        assert!(log.segment_fsyncs() > fsyncs, "the append fsynced a .log");
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        flush_interval_ms: 100,
        ..small_config()
    };
    let mut log = open(dir.path(), &config, true, 0);
    log.append(&batch(3, 0, 10), 0, 50, false).expect("append");
    assert_eq!(log.recovery_point(), 0);
    log.flush_if_due(99).expect("not due");
    assert_eq!((log.recovery_point(), log.segment_fsyncs()), (0, 0));
    log.flush_if_due(100).expect("due");
    assert_eq!((log.recovery_point(), log.segment_fsyncs()), (3, 1));
    log.append(&batch(2, 0, 10), 0, 150, false).expect("append");
    log.flush_if_due(199).expect("not due again");
    assert_eq!(log.recovery_point(), 3);
    log.flush().expect("explicit flush");
    assert_eq!(log.recovery_point(), 5);
}

#[test]
fn flushing_the_active_segment_skips_its_indexes_until_it_rolls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        flush_interval_messages: 1,
        ..small_config()
    };
    let mut log = open(dir.path(), &config, false, 0);
    let first_segment = log.active_segment_base_offset();
    while log.active_segment_base_offset() == first_segment {
        let fsyncs = log.segment_fsyncs();
        log.append(&batch(2, 0, 50), 0, 0, false).expect("append");
        assert!(
            log.segment_fsyncs() > fsyncs,
            "every append fsyncs the .log"
        );
        if log.active_segment_base_offset() == first_segment {
            assert_eq!(
                log.index_flushes(),
                0,
                "recovery rebuilds the active segment's indexes, so flushes skip them"
            );
        }
    }
    // The roll made the first segment's indexes durable before the recovery point could pass
    // it: a crash from now on would not re-validate that segment.
    assert_eq!(log.index_flushes(), 1);
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

#[test]
fn close_trims_indexes_and_a_clean_reopen_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 30, 2, 50);
    let active = *segment_files(dir.path()).last().expect("segments");
    let index_path = dir.path().join(file_name(active, ".index"));
    assert_eq!(
        std::fs::metadata(&index_path).expect("index").len(),
        1_200,
        "preallocated while active"
    );
    log.close().expect("close");
    let log_end_offset = log.log_end_offset();
    drop(log);

    let mut contents = Vec::new();
    for base in segment_files(dir.path()) {
        for (suffix, entry_bytes) in [(".index", 8), (".timeindex", 12)] {
            let path = dir.path().join(file_name(base, suffix));
            let len = std::fs::metadata(&path).expect("index").len();
            assert_eq!(len % entry_bytes, 0);
            assert!(len < 1_188, "{} must be trimmed", path.display());
            contents.push(std::fs::read(&path).expect("read"));
        }
        let times = time_index_entries(&dir.path().join(file_name(base, ".timeindex")));
        assert!(!times.is_empty(), "the final time-index entry is forced");
    }

    let mut log = open(dir.path(), &config, true, 0);
    assert_eq!(log.log_end_offset(), log_end_offset);
    assert_eq!(log.recovery_point(), log_end_offset);
    assert_eq!(read_all(&log).len(), 30);
    log.close().expect("close again");
    let mut again = Vec::new();
    for base in segment_files(dir.path()) {
        for suffix in [".index", ".timeindex"] {
            again.push(std::fs::read(dir.path().join(file_name(base, suffix))).expect("read"));
        }
    }
    assert_eq!(
        again, contents,
        "reopen and close leave the indexes as they were"
    );
    let info = log
        .append(&batch(1, 5_000, 10), 0, 0, false)
        .expect("append after close");
    assert_eq!(info.base_offset, log_end_offset);
    assert_eq!(read_all(&log).len(), 31);
}

#[test]
fn roll_when_the_last_offset_does_not_fit_relative_to_the_base() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config(), true, 0);
    log.append(&batch(3, 0, 10), 0, 0, false).expect("append");
    // A header claiming i32::MAX offsets: Kafka would roll before storing it.
    let mut wide = batch(1, 0, 10);
    wide[23..27].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&wide[21..]);
    wide[17..21].copy_from_slice(&crc.to_be_bytes());
    let info = log.append(&wide, 0, 0, false).expect("append");
    assert_eq!(info.base_offset, 3);
    assert_eq!(segment_files(dir.path()), vec![0, 3]);
    assert_eq!(log.log_end_offset(), 3 + i64::from(i32::MAX) + 1);
}

#[test]
fn roll_when_an_index_is_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 24 bytes: three offset-index slots, two time-index slots of which one is reserved.
    let config = LogConfig {
        max_index_size_bytes: 24,
        index_interval_bytes: 100,
        ..small_config()
    };
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 3, 2, 40);
    // Batch 0 gets no entry, batch 1 fills the time index, so batch 2 starts a new segment.
    assert_eq!(segment_files(dir.path()), vec![0, 4]);
    // The final entry at roll would repeat the max timestamp (1001 at offset 3), so it is skipped.
    assert_eq!(
        time_index_entries(&dir.path().join(file_name(0, ".timeindex"))),
        vec![(1_001, 3)]
    );
    assert_eq!(
        offset_index_entries(&dir.path().join(file_name(0, ".index"))),
        vec![(3, 165)]
    );
    assert_eq!(read_all(&log).len(), 3);
}
