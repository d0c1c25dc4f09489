//! The sparse time index (`.timeindex`): 12-byte entries of i64 timestamp and i32 relative offset.
//!
//! An entry (timestamp, offset) says that no record before the batch holding `offset` has a
//! timestamp above `timestamp`, so a search for a timestamp can start there. Entries are strictly
//! increasing in timestamp and never decreasing in offset; the last one is the segment's max
//! timestamp so far once the segment has been rolled or closed. One slot is always kept free for
//! that final entry, which is why the index counts as full one entry early.

use std::io;
use std::path::Path;

use super::index::IndexFile;
use super::offset_index::partition_point;
use super::LogError;
use crate::disk::Disk;

pub(super) const TIME_INDEX_ENTRY_BYTES: usize = 12;
/// Kafka's NO_TIMESTAMP: the timestamp of an empty index's pseudo last entry.
pub(super) const NO_TIMESTAMP: i64 = -1;

pub(super) struct TimeIndex {
    file: IndexFile,
    base_offset: i64,
}

impl TimeIndex {
    pub(super) fn create(
        disk: &Disk,
        path: &Path,
        base_offset: i64,
        max_index_size_bytes: u64,
    ) -> io::Result<Self> {
        let file = IndexFile::create(disk, path, TIME_INDEX_ENTRY_BYTES, max_index_size_bytes)?;
        Ok(TimeIndex { file, base_offset })
    }

    pub(super) fn open(disk: &Disk, path: &Path, base_offset: i64) -> io::Result<Self> {
        let file = IndexFile::open(disk, path, TIME_INDEX_ENTRY_BYTES)?;
        Ok(TimeIndex { file, base_offset })
    }

    pub(super) fn file(&self) -> &IndexFile {
        &self.file
    }

    pub(super) fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }

    pub(super) fn entries(&self) -> usize {
        self.file.entries()
    }

    /// Full one slot early, reserving room for the entry forced at roll or close.
    pub(super) fn is_full(&self) -> bool {
        self.file.entries() >= self.file.max_entries().saturating_sub(1)
    }

    /// Entry `n` as (timestamp, absolute offset).
    pub(super) fn entry(&self, n: usize) -> (i64, i64) {
        let bytes = self.file.entry(n);
        let mut timestamp = [0u8; 8];
        timestamp.copy_from_slice(&bytes[..8]);
        let relative = i32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        (
            i64::from_be_bytes(timestamp),
            self.base_offset + i64::from(relative),
        )
    }

    /// The last entry, or (NO_TIMESTAMP, base offset) for an empty index, as in Kafka.
    pub(super) fn last_entry(&self) -> (i64, i64) {
        match self.entries().checked_sub(1) {
            Some(n) => self.entry(n),
            None => (NO_TIMESTAMP, self.base_offset),
        }
    }

    /// Appends (timestamp, offset) only when the timestamp is strictly greater than the last
    /// entry's. `skip_full_check` is for the final entry at roll or close, which uses the slot
    /// that `is_full` keeps free.
    pub(super) fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<(), LogError> {
        if !skip_full_check && self.is_full() {
            return Err(LogError::Corrupt("time index is full".to_string()));
        }
        let (last_timestamp, last_offset) = self.last_entry();
        if self.entries() > 0 && (offset < last_offset || timestamp < last_timestamp) {
            return Err(LogError::Corrupt(format!(
                "time index entry ({timestamp}, {offset}) is below the last ({last_timestamp}, {last_offset})"
            )));
        }
        if timestamp <= last_timestamp {
            return Ok(());
        }
        let relative = i32::try_from(offset - self.base_offset)
            .ok()
            .filter(|relative| *relative >= 0)
            .ok_or_else(|| {
                LogError::Corrupt(format!("offset {offset} does not fit the time index"))
            })?;
        let mut entry = [0u8; TIME_INDEX_ENTRY_BYTES];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative.to_be_bytes());
        self.file.push(&entry)?;
        Ok(())
    }

    /// The greatest entry whose timestamp is <= `target`, or (NO_TIMESTAMP, base offset).
    pub(super) fn lookup(&self, target: i64) -> (i64, i64) {
        let below = partition_point(self.entries(), |n| self.entry(n).0 <= target);
        match below.checked_sub(1) {
            Some(n) => self.entry(n),
            None => (NO_TIMESTAMP, self.base_offset),
        }
    }

    /// Structural checks: timestamps strictly increasing (the only way entries are written),
    /// relative offsets non-negative and never decreasing, offsets below `next_offset_bound`.
    /// A zero-filled preallocated file with more than one slot fails here.
    pub(super) fn sanity_check(&self, next_offset_bound: i64) -> Result<(), String> {
        let mut previous: Option<(i64, i64)> = None;
        for n in 0..self.entries() {
            let (timestamp, offset) = self.entry(n);
            if offset < self.base_offset || offset >= next_offset_bound {
                return Err(format!(
                    "entry {n} offset {offset} lies outside the segment"
                ));
            }
            if let Some((last_timestamp, last_offset)) = previous {
                if timestamp <= last_timestamp || offset < last_offset {
                    return Err(format!("entry {n} does not increase"));
                }
            }
            previous = Some((timestamp, offset));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maybe_append_keeps_only_rising_timestamps_and_reserves_a_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000050.timeindex");
        let mut index = TimeIndex::create(&Disk::real(), &path, 50, 40).expect("create");
        assert_eq!(index.file().max_entries(), 3);
        assert_eq!(index.last_entry(), (NO_TIMESTAMP, 50));
        index.maybe_append(1_000, 55, false).expect("append");
        index
            .maybe_append(1_000, 56, false)
            .expect("duplicate timestamp is skipped");
        assert_eq!(index.entries(), 1);
        assert!(index.maybe_append(900, 57, false).is_err());
        index.maybe_append(2_000, 60, false).expect("append");
        assert!(index.is_full());
        assert!(index.maybe_append(3_000, 70, false).is_err());
        index
            .maybe_append(3_000, 70, true)
            .expect("forced final entry");
        assert_eq!(index.lookup(999), (NO_TIMESTAMP, 50));
        assert_eq!(index.lookup(1_999), (1_000, 55));
        assert_eq!(index.lookup(5_000), (3_000, 70));
        assert_eq!(index.sanity_check(i64::MAX), Ok(()));
        assert!(index.sanity_check(70).is_err());
    }
}
