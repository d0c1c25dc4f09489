//! Partition-log tests at the module boundary: batches in, bytes and offsets out, files on disk
//! inspected and damaged on purpose. Time is always passed explicitly; nothing sleeps.

mod append_read;
mod cleaner;
mod kafka_compat;
mod leader_epochs;
mod recovery;
mod retention;
mod timestamps;

use std::path::Path;

use kafka_protocol::records::Compression;

use super::{LogConfig, OpenOptions, PartitionLog};
use crate::config::Config;
use crate::record_batch::header::{BatchHeader, BatchIter};

pub(crate) use crate::record_batch::test_batches::{encode_batch, BatchSpec};

/// A batch of `records` records all at `timestamp`, with values of `value_bytes`.
pub(crate) fn batch(records: usize, timestamp: i64, value_bytes: usize) -> Vec<u8> {
    encode_batch(&BatchSpec {
        timestamps: vec![timestamp; records],
        value_bytes,
        ..Default::default()
    })
}

/// Small sizes so that a few kilobytes exercise rolling and indexing.
pub(crate) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2_000,
        index_interval_bytes: 300,
        max_index_size_bytes: 1_200,
        ..LogConfig::from_topic(&Config::default().topic_values())
    }
}

pub(crate) fn open(
    dir: &Path,
    config: &LogConfig,
    clean_shutdown: bool,
    recovery_point: i64,
) -> PartitionLog {
    let options = OpenOptions {
        recovery_point,
        log_start_offset: 0,
        clean_shutdown,
    };
    PartitionLog::open(&crate::disk::Disk::real(), dir, config.clone(), options, 0).expect("open")
}

/// Every batch header readable from the log start offset up to the log end offset, fetched the
/// way a consumer would, one read at a time.
pub(crate) fn read_all(log: &PartitionLog) -> Vec<BatchHeader> {
    let mut headers = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1_000, true, i64::MAX).expect("read");
        assert!(
            !read.records.is_empty(),
            "no data at {offset} below the log end offset"
        );
        for item in BatchIter::new(&read.records) {
            let (position, header) = item.expect("whole batch");
            let end = position + header.total_size();
            assert!(
                crate::record_batch::header::crc_is_valid(&read.records[position..end]),
                "CRC at {offset}"
            );
            if header.last_offset() >= offset {
                headers.push(header);
                offset = header.last_offset() + 1;
            }
        }
    }
    headers
}

/// Appends `count` batches of `records` records each; returns their base offsets.
pub(crate) fn append_batches(
    log: &mut PartitionLog,
    count: usize,
    records: usize,
    value_bytes: usize,
) -> Vec<i64> {
    (0..count)
        .map(|n| {
            let bytes = batch(records, 1_000 + n as i64, value_bytes);
            log.append(&bytes, 5, 0, false).expect("append").base_offset
        })
        .collect()
}

/// Base offsets of the `.log` files in `dir`.
pub(crate) fn segment_files(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|entry| {
            let name = entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8");
            name.strip_suffix(".log").and_then(|stem| stem.parse().ok())
        })
        .collect();
    bases.sort_unstable();
    bases
}

/// Every offset-index entry of a file, as (relative offset, position).
pub(crate) fn offset_index_entries(path: &Path) -> Vec<(i32, i32)> {
    let bytes = std::fs::read(path).expect("read index");
    bytes
        .chunks_exact(8)
        .map(|entry| {
            (
                i32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]),
                i32::from_be_bytes([entry[4], entry[5], entry[6], entry[7]]),
            )
        })
        .collect()
}

/// Every time-index entry of a file, as (timestamp, relative offset).
pub(crate) fn time_index_entries(path: &Path) -> Vec<(i64, i32)> {
    let bytes = std::fs::read(path).expect("read time index");
    bytes
        .chunks_exact(12)
        .map(|entry| {
            let mut timestamp = [0u8; 8];
            timestamp.copy_from_slice(&entry[..8]);
            (
                i64::from_be_bytes(timestamp),
                i32::from_be_bytes([entry[8], entry[9], entry[10], entry[11]]),
            )
        })
        .collect()
}

pub(crate) fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}
