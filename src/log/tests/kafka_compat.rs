//! Byte-for-byte compatibility with Apache Kafka. `kafka_fixture/` holds a partition directory
//! written by Kafka 4.1.0's own `LogSegment` (see `kafka_fixture/Write.java`): two segments of
//! 40 batches each, mixing gzip, lz4 and uncompressed batches, rolled and closed by Kafka.
//! Appending the same batches through sluice must give the same bytes, opening Kafka's files
//! must leave them untouched, and rebuilt indexes must equal Kafka's.

use std::fs;
use std::path::Path;

use super::*;

const FIXTURE: [(&str, &[u8]); 6] = [
    (
        "00000000000000000000.index",
        include_bytes!("kafka_fixture/00000000000000000000.index"),
    ),
    (
        "00000000000000000000.log",
        include_bytes!("kafka_fixture/00000000000000000000.log"),
    ),
    (
        "00000000000000000000.timeindex",
        include_bytes!("kafka_fixture/00000000000000000000.timeindex"),
    ),
    (
        "00000000000000000120.index",
        include_bytes!("kafka_fixture/00000000000000000120.index"),
    ),
    (
        "00000000000000000120.log",
        include_bytes!("kafka_fixture/00000000000000000120.log"),
    ),
    (
        "00000000000000000120.timeindex",
        include_bytes!("kafka_fixture/00000000000000000120.timeindex"),
    ),
];

/// Kafka wrote the fixture with index.interval.bytes=1024 and rolled after 40 batches, which is
/// exactly one segment's worth of bytes here.
fn kafka_config() -> LogConfig {
    LogConfig {
        segment_bytes: FIXTURE[1].1.len() as u64,
        index_interval_bytes: 1024,
        ..LogConfig::from_topic(&Config::default().topic_values())
    }
}

fn write_fixture(dir: &Path, with_indexes: bool) {
    fs::create_dir_all(dir).expect("mkdir");
    for (name, bytes) in FIXTURE {
        if with_indexes || name.ends_with(".log") {
            fs::write(dir.join(name), bytes).expect("write fixture");
        }
    }
}

fn assert_same_as_kafka(dir: &Path) {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    names.sort();
    let expected: Vec<&str> = FIXTURE.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, expected);
    for (name, bytes) in FIXTURE {
        assert!(
            fs::read(dir.join(name)).expect("read") == bytes,
            "{name} differs from Kafka's"
        );
    }
}

#[test]
fn appending_kafkas_batches_reproduces_kafkas_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &kafka_config(), true, 0);
    for (name, bytes) in FIXTURE.iter().filter(|(name, _)| name.ends_with(".log")) {
        for item in BatchIter::new(bytes) {
            let (position, header) = item.expect("Kafka's batch");
            let mut batch = bytes[position..position + header.total_size()].to_vec();
            batch[..8].fill(0);
            log.append(&batch, -1, 0, false)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    log.close().expect("close");
    drop(log);
    assert_same_as_kafka(dir.path());
}

#[test]
fn kafkas_files_open_clean_unchanged_and_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_fixture(dir.path(), true);
    let mut log = open(dir.path(), &kafka_config(), true, 0);
    assert_eq!(log.log_end_offset(), 240);
    assert_eq!(read_all(&log).len(), 80);
    // Segment 120, batch 17 (offsets 168..=170): timestamps base + 17000 + {0, 4, 8}.
    let base_ms = 1_700_001_000_000;
    assert_eq!(
        log.find_offset_by_timestamp(base_ms + 17_005)
            .expect("lookup"),
        Some((170, base_ms + 17_008))
    );
    assert_eq!(
        log.max_timestamp_and_offset(),
        Some((base_ms + 39_008, 237))
    );
    log.close().expect("close");
    drop(log);
    assert_same_as_kafka(dir.path());
}

#[test]
fn rebuilt_indexes_equal_kafkas() {
    for clean_shutdown in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        write_fixture(dir.path(), false);
        let mut log = open(dir.path(), &kafka_config(), clean_shutdown, 0);
        assert_eq!(log.log_end_offset(), 240);
        log.close().expect("close");
        drop(log);
        assert_same_as_kafka(dir.path());
    }
}
