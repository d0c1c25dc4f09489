//! Time index maintenance and the two ListOffsets lookups, over plain, compressed and
//! LogAppendTime batches.

use super::*;

/// Deterministic pseudo-random timestamps, not monotonic within or across batches.
fn timestamps_for(batch_number: u64, records: usize) -> Vec<i64> {
    let mut state = batch_number
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..records)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            10_000 + batch_number as i64 * 100 + (state >> 33) as i64 % 250 - 125
        })
        .collect()
}

/// A log of compressed and plain batches over several segments; returns every record as
/// (offset, timestamp).
fn mixed_log(dir: &Path) -> (PartitionLog, Vec<(i64, i64)>) {
    let mut log = open(dir, &small_config(), true, 0);
    let mut records = Vec::new();
    let codecs = [
        Compression::Gzip,
        Compression::Lz4,
        Compression::None,
        Compression::Zstd,
    ];
    for n in 0..60u64 {
        let timestamps = timestamps_for(n, 1 + n as usize % 5);
        let spec = BatchSpec {
            timestamps: timestamps.clone(),
            compression: codecs[n as usize % codecs.len()],
            value_bytes: 30,
            ..Default::default()
        };
        let info = log
            .append(&encode_batch(&spec), 0, 0, false)
            .expect("append");
        records.extend(
            timestamps
                .iter()
                .enumerate()
                .map(|(i, ts)| (info.base_offset + i as i64, *ts)),
        );
    }
    (log, records)
}

#[test]
fn find_offset_by_timestamp_matches_a_linear_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, records) = mixed_log(dir.path());
    assert!(segment_files(dir.path()).len() >= 2);
    let expected = |target: i64| {
        records
            .iter()
            .find(|(_, ts)| *ts >= target)
            .map(|(o, ts)| (*o, *ts))
    };
    for target in (9_700..16_200).step_by(37) {
        assert_eq!(
            log.find_offset_by_timestamp(target).expect("lookup"),
            expected(target),
            "ts {target}"
        );
    }
    assert_eq!(
        log.find_offset_by_timestamp(0).expect("lookup"),
        Some(records[0])
    );
    assert_eq!(
        log.find_offset_by_timestamp(i64::MAX).expect("lookup"),
        None
    );
}

#[test]
fn time_index_entries_track_max_timestamp_so_far() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, records) = mixed_log(dir.path());
    log.close().expect("close");
    let bases = segment_files(dir.path());
    for (n, base) in bases.iter().enumerate() {
        let end = bases.get(n + 1).copied().unwrap_or(log.log_end_offset());
        let entries = time_index_entries(&dir.path().join(file_name(*base, ".timeindex")));
        assert!(entries.len() >= 2, "segment {base} has {entries:?}");
        assert!(entries
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let segment_max = records
            .iter()
            .filter(|(o, _)| *o >= *base && *o < end)
            .map(|(_, ts)| *ts)
            .max();
        assert_eq!(
            entries.last().map(|e| e.0),
            segment_max,
            "final entry is the segment max"
        );
    }
}

#[test]
fn log_start_offset_hides_earlier_records_from_timestamp_lookups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, records) = mixed_log(dir.path());
    log.close().expect("close");
    drop(log);
    let log_start_offset = records[records.len() / 2].0 + 1;
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset,
        clean_shutdown: true,
    };
    let log = PartitionLog::open(
        &crate::disk::Disk::real(),
        dir.path(),
        small_config(),
        options,
        0,
    )
    .expect("open");
    let visible: Vec<_> = records
        .iter()
        .filter(|(o, _)| *o >= log_start_offset)
        .collect();
    for target in (9_700..16_200).step_by(53) {
        let expected = visible
            .iter()
            .find(|(_, ts)| *ts >= target)
            .map(|(o, ts)| (*o, *ts));
        assert_eq!(
            log.find_offset_by_timestamp(target).expect("lookup"),
            expected,
            "ts {target}"
        );
    }
}

#[test]
fn max_timestamp_points_at_the_record_and_the_first_segment_wins_ties() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config(), true, 0);
    assert_eq!(log.max_timestamp_and_offset(), None);
    assert_eq!(log.find_offset_by_timestamp(0).expect("lookup"), None);
    append_batches(&mut log, 5, 2, 40);
    let spec = BatchSpec {
        timestamps: vec![5, 90_000, 7],
        compression: Compression::Gzip,
        ..Default::default()
    };
    log.append(&encode_batch(&spec), 0, 0, false)
        .expect("append");
    append_batches(&mut log, 30, 2, 40);
    log.append(&encode_batch(&spec), 0, 0, false)
        .expect("append a tie in a later segment");
    assert!(segment_files(dir.path()).len() >= 3);
    assert_eq!(log.max_timestamp_and_offset(), Some((90_000, 11)));

    // A LogAppendTime topic's batch: its records say 1, the append time is 95_000.
    let info = log
        .append(&batch(3, 1, 10), 0, 95_000, true)
        .expect("append");
    assert_eq!(
        log.max_timestamp_and_offset(),
        Some((95_000, info.base_offset))
    );
    assert_eq!(
        log.find_offset_by_timestamp(94_000).expect("lookup"),
        Some((info.base_offset, 95_000))
    );
    assert_eq!(
        log.find_offset_by_timestamp(90_000).expect("lookup"),
        Some((11, 90_000))
    );

    // The same answers after a clean reopen, where the max timestamp comes from the time index.
    log.close().expect("close");
    drop(log);
    let log = open(dir.path(), &small_config(), true, 0);
    assert_eq!(
        log.max_timestamp_and_offset(),
        Some((95_000, info.base_offset))
    );
    assert_eq!(
        log.find_offset_by_timestamp(94_000).expect("lookup"),
        Some((info.base_offset, 95_000))
    );
}

#[test]
fn log_append_time_stamps_the_batch_and_lookups_use_the_append_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config(), true, 0);
    let create_time = log
        .append(&batch(2, 1_000, 10), 0, 5_000, false)
        .expect("append");
    assert_eq!(create_time.log_append_time_ms, -1);
    assert_eq!(create_time.max_timestamp, 1_000);
    let mut appended = Vec::new();
    for (n, compression) in [Compression::None, Compression::Gzip]
        .into_iter()
        .enumerate()
    {
        let spec = BatchSpec {
            timestamps: vec![10, 30, 20],
            compression,
            ..Default::default()
        };
        let original = encode_batch(&spec);
        let now_ms = 50_000 + n as i64;
        let info = log
            .append(&original.clone(), 0, now_ms, true)
            .expect("append");
        assert_eq!(info.log_append_time_ms, now_ms);
        assert_eq!(info.max_timestamp, now_ms);
        let read = log
            .read(info.base_offset, 10_000, true, i64::MAX)
            .expect("read");
        let header = BatchHeader::parse(&read.records).expect("header");
        let stored = &read.records[..header.total_size()];
        assert!(
            crate::record_batch::header::crc_is_valid(stored),
            "{compression:?}"
        );
        assert!(header.timestamp_type_is_log_append());
        assert_eq!(header.attributes & 0x08, 0x08);
        assert_eq!(header.compression(), compression as u8);
        assert_eq!(header.max_timestamp, now_ms);
        // Last offset delta, base timestamp and the records are as the producer sent them.
        assert_eq!(stored[23..35], original[23..35]);
        assert_eq!(stored[43..], original[43..]);
        appended.push(info);
    }
    // Every record of a LogAppendTime batch has the append time; its own deltas (10, 30, 20)
    // are ignored.
    let first = appended[0].base_offset;
    assert_eq!(
        log.find_offset_by_timestamp(1_001).expect("lookup"),
        Some((first, 50_000))
    );
    assert_eq!(
        log.find_offset_by_timestamp(50_001).expect("lookup"),
        Some((appended[1].base_offset, 50_001))
    );
    assert_eq!(
        log.max_timestamp_and_offset(),
        Some((50_001, appended[1].base_offset))
    );
    // Retention measures from the append time too: 55_000 - 50_001 is within 10 s.
    let retention = crate::log::RetentionConfig {
        retention_ms: 10_000,
        retention_bytes: -1,
        file_delete_delay_ms: 0,
    };
    let end = log.log_end_offset();
    assert_eq!(
        log.delete_old_segments(&retention, end, 55_000)
            .expect("retention"),
        0
    );
    log.close().expect("close");
    let entries = time_index_entries(&dir.path().join(file_name(0, ".timeindex")));
    assert_eq!(
        entries.last(),
        Some(&(50_001, appended[1].last_offset as i32))
    );
}
