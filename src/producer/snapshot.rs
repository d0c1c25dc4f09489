//! Producer-state snapshot files `%020d.snapshot` in Kafka's format (version 1), so Kafka's
//! `kafka-dump-log` can read them:
//!
//! ```text
//! i16 version = 1 | u32 crc32c of every byte from offset 6 | i32 entry count |
//! entries of 46 bytes: i64 producer id | i16 epoch | i32 last sequence | i64 last offset |
//!                      i32 offset delta | i64 timestamp | i32 coordinator epoch | i64 txn first offset
//! ```
//!
//! Only the newest batch of each producer is stored, as in Kafka: after a restart the duplicate
//! cache holds one batch per producer until new writes arrive. The coordinator epoch of the
//! producer's last marker and the first offset of its open transaction (-1: none) are stored
//! with it, so recovery knows which transactions are still open.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::{BatchMetadata, ProducerEntry};
use crate::disk::{names, Disk};

const VERSION: i16 = 1;
const HEADER_BYTES: usize = 10;
const ENTRY_BYTES: usize = 46;
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    names::offset_file(dir, offset, names::SNAPSHOT_SUFFIX)
}

/// Snapshot files of a partition directory as (offset, path), oldest first.
pub fn list_snapshots(disk: &Disk, dir: &Path) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in disk.list_dir(dir)? {
        if let Some(offset) = names::offset_of_file(entry.name(), names::SNAPSHOT_SUFFIX) {
            found.push((offset, entry.path));
        }
    }
    found.sort();
    Ok(found)
}

pub fn encode(entries: &[&ProducerEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + entries.len() * ENTRY_BYTES);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for entry in entries {
        // A producer known only from a marker has no batch: Kafka writes sequence and offset
        // -1 then.
        let (last_sequence, last_offset, offset_delta) =
            entry.batches.back().map_or((-1, -1, 0), |b| {
                (b.last_sequence, b.last_offset, b.offset_delta)
            });
        out.extend_from_slice(&entry.producer_id.to_be_bytes());
        out.extend_from_slice(&entry.epoch.to_be_bytes());
        out.extend_from_slice(&last_sequence.to_be_bytes());
        out.extend_from_slice(&last_offset.to_be_bytes());
        out.extend_from_slice(&offset_delta.to_be_bytes());
        out.extend_from_slice(&entry.last_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
        let txn_first_offset = entry.current_txn_first_offset.unwrap_or(-1);
        out.extend_from_slice(&txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[6..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Result<Vec<ProducerEntry>, String> {
    if bytes.len() < HEADER_BYTES {
        return Err("snapshot shorter than its header".into());
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version != VERSION {
        return Err(format!("snapshot version {version}"));
    }
    let crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    if crc32c::crc32c(&bytes[6..]) != crc {
        return Err("snapshot CRC mismatch".into());
    }
    let count = i32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    let count = usize::try_from(count).map_err(|_| "negative entry count".to_string())?;
    if bytes.len() != HEADER_BYTES + count * ENTRY_BYTES {
        return Err("snapshot length does not match its entry count".into());
    }
    Ok(bytes[HEADER_BYTES..]
        .chunks_exact(ENTRY_BYTES)
        .map(decode_entry)
        .collect())
}

fn decode_entry(e: &[u8]) -> ProducerEntry {
    let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().unwrap_or([0; 8]));
    let i32_at = |at: usize| i32::from_be_bytes(e[at..at + 4].try_into().unwrap_or([0; 4]));
    let last_sequence = i32_at(10);
    let last_offset = i64_at(14);
    let offset_delta = i32_at(22);
    let timestamp_ms = i64_at(26);
    // The first sequence is not stored; it is the last one minus the delta, wrapping below 0.
    let first = i64::from(last_sequence) - i64::from(offset_delta);
    let first_sequence = if first < 0 && last_sequence >= 0 {
        first + i64::from(i32::MAX) + 1
    } else {
        first
    };
    let batch = BatchMetadata {
        first_sequence: first_sequence as i32,
        last_sequence,
        last_offset,
        offset_delta,
        timestamp_ms,
    };
    let txn_first_offset = i64_at(38);
    ProducerEntry {
        producer_id: i64_at(0),
        epoch: i16::from_be_bytes([e[8], e[9]]),
        // An entry without a batch (written from a marker alone) has offset -1.
        batches: if last_offset >= 0 {
            VecDeque::from([batch])
        } else {
            VecDeque::new()
        },
        coordinator_epoch: i32_at(34),
        current_txn_first_offset: (txn_first_offset >= 0).then_some(txn_first_offset),
        last_timestamp_ms: timestamp_ms,
    }
}

pub fn write(
    disk: &Disk,
    dir: &Path,
    offset: i64,
    entries: &[&ProducerEntry],
) -> std::io::Result<()> {
    disk.write_file_durably(&snapshot_path(dir, offset), &encode(entries))
}

/// The newest readable snapshot at or below `max_offset`; unreadable ones are deleted, as Kafka does.
pub fn load_latest(disk: &Disk, dir: &Path, max_offset: i64) -> (i64, Vec<ProducerEntry>) {
    let snapshots = list_snapshots(disk, dir).unwrap_or_default();
    for (offset, path) in snapshots.into_iter().rev() {
        if offset > max_offset {
            let _ = disk.remove_file(&path);
            continue;
        }
        match disk
            .read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| decode(&b))
        {
            Ok(entries) => return (offset, entries),
            Err(e) => {
                tracing::warn!(path = %path.display(), "deleting unreadable producer snapshot: {e}");
                let _ = disk.remove_file(&path);
            }
        }
    }
    (0, Vec::new())
}

/// Keeps the newest `keep` snapshots.
pub fn prune(disk: &Disk, dir: &Path, keep: usize) {
    let snapshots = list_snapshots(disk, dir).unwrap_or_default();
    let excess = snapshots.len().saturating_sub(keep);
    for (_, path) in snapshots.into_iter().take(excess) {
        let _ = disk.remove_file(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_the_newest_batch() {
        let entry = ProducerEntry {
            producer_id: 42,
            epoch: 3,
            coordinator_epoch: 5,
            current_txn_first_offset: Some(11),
            last_timestamp_ms: 2,
            batches: VecDeque::from([
                BatchMetadata {
                    first_sequence: 0,
                    last_sequence: 4,
                    last_offset: 9,
                    offset_delta: 4,
                    timestamp_ms: 1,
                },
                BatchMetadata {
                    first_sequence: 5,
                    last_sequence: 9,
                    last_offset: 19,
                    offset_delta: 4,
                    timestamp_ms: 2,
                },
            ]),
        };
        let bytes = encode(&[&entry]);
        assert_eq!(bytes.len(), 10 + 46);
        let decoded = decode(&bytes).unwrap();
        assert_eq!(decoded[0].producer_id, 42);
        assert_eq!(decoded[0].epoch, 3);
        assert_eq!(decoded[0].batches.len(), 1);
        assert_eq!(decoded[0].batches[0], entry.batches[1]);
        assert_eq!(decoded[0].coordinator_epoch, 5);
        assert_eq!(decoded[0].current_txn_first_offset, Some(11));
        // Kafka's layout: coordinator epoch at 34, transaction first offset at 38 of the entry.
        assert_eq!(&bytes[10 + 34..10 + 38], &5i32.to_be_bytes());
        assert_eq!(&bytes[10 + 38..10 + 46], &11i64.to_be_bytes());
        let marker_only = ProducerEntry {
            batches: VecDeque::new(),
            current_txn_first_offset: None,
            ..entry.clone()
        };
        let decoded = decode(&encode(&[&marker_only])).unwrap();
        assert_eq!(decoded[0], marker_only);
        let mut corrupt = bytes.clone();
        corrupt[20] ^= 1;
        assert!(decode(&corrupt).is_err());
    }
}
