//! The sparse offset index (`.index`): 8-byte entries of i32 relative offset and i32 file position.
//!
//! An entry (offset, position) promises that the batch starting at `position` is the first one that
//! can hold `offset` or any later offset: a reader looks up the greatest entry at or below its
//! target and scans forward from there. Entries are strictly increasing in both fields. This
//! module decides nothing about *when* entries are added; the segment does.

use std::io;
use std::path::Path;

use super::index::IndexFile;
use super::LogError;
use crate::disk::Disk;

pub(super) const OFFSET_INDEX_ENTRY_BYTES: usize = 8;

pub(super) struct OffsetIndex {
    file: IndexFile,
    base_offset: i64,
}

impl OffsetIndex {
    pub(super) fn create(
        disk: &Disk,
        path: &Path,
        base_offset: i64,
        max_index_size_bytes: u64,
    ) -> io::Result<Self> {
        let file = IndexFile::create(disk, path, OFFSET_INDEX_ENTRY_BYTES, max_index_size_bytes)?;
        Ok(OffsetIndex { file, base_offset })
    }

    pub(super) fn open(disk: &Disk, path: &Path, base_offset: i64) -> io::Result<Self> {
        let file = IndexFile::open(disk, path, OFFSET_INDEX_ENTRY_BYTES)?;
        Ok(OffsetIndex { file, base_offset })
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

    pub(super) fn is_full(&self) -> bool {
        self.file.entries() >= self.file.max_entries()
    }

    /// Entry `n` as (absolute offset, file position).
    pub(super) fn entry(&self, n: usize) -> (i64, u64) {
        let bytes = self.file.entry(n);
        let relative = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let position = i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        // Sanity checks reject negative fields before anything is looked up; clamping keeps a
        // garbage entry from wrapping around if one slips through.
        (
            self.base_offset + i64::from(relative),
            position.max(0) as u64,
        )
    }

    pub(super) fn last_entry(&self) -> Option<(i64, u64)> {
        self.entries().checked_sub(1).map(|n| self.entry(n))
    }

    /// Adds (offset, position). Offsets must be strictly increasing and fit as i32 relative to the
    /// base offset; positions must fit in an i32 because that is the on-disk width.
    pub(super) fn append(&mut self, offset: i64, position: u64) -> Result<(), LogError> {
        if let Some((last_offset, _)) = self.last_entry() {
            if offset <= last_offset {
                return Err(LogError::Corrupt(format!(
                    "offset index entry {offset} is not above the last entry {last_offset}"
                )));
            }
        }
        let relative = i32::try_from(offset - self.base_offset)
            .ok()
            .filter(|relative| *relative >= 0)
            .ok_or_else(|| LogError::Corrupt(format!("offset {offset} does not fit the index")))?;
        let position = i32::try_from(position).map_err(|_| {
            LogError::Corrupt(format!("position {position} does not fit the index"))
        })?;
        let mut entry = [0u8; OFFSET_INDEX_ENTRY_BYTES];
        entry[..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&entry)?;
        Ok(())
    }

    /// The greatest entry whose offset is <= `target`, or (base offset, 0) when there is none.
    pub(super) fn lookup(&self, target: i64) -> (i64, u64) {
        let count = self.entries();
        let below = partition_point(count, |n| self.entry(n).0 <= target);
        match below.checked_sub(1) {
            Some(n) => self.entry(n),
            None => (self.base_offset, 0),
        }
    }

    /// The position of the greatest entry whose position is <= `position`, or 0: where a scan
    /// for the batch at a file position may start.
    pub(super) fn position_at_or_below(&self, position: u64) -> u64 {
        let below = partition_point(self.entries(), |n| self.entry(n).1 <= position);
        below.checked_sub(1).map_or(0, |n| self.entry(n).1)
    }

    /// Structural checks that need nothing but the index: relative offsets and positions
    /// non-negative and strictly increasing, positions inside the log, offsets below
    /// `next_offset_bound` (the next segment's base offset, or i64::MAX for the last segment).
    /// A zero-filled preallocated file with more than one slot fails here.
    pub(super) fn sanity_check(
        &self,
        log_size_bytes: u64,
        next_offset_bound: i64,
    ) -> Result<(), String> {
        let mut previous: Option<(i64, u64)> = None;
        for n in 0..self.entries() {
            let bytes = self.file.entry(n);
            let relative = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let position = i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
            if relative < 0 || position < 0 {
                return Err(format!("entry {n} has a negative field"));
            }
            let (offset, position) = (self.base_offset + i64::from(relative), position as u64);
            if let Some((last_offset, last_position)) = previous {
                if offset <= last_offset || position <= last_position {
                    return Err(format!("entry {n} does not increase"));
                }
            }
            if position >= log_size_bytes || offset >= next_offset_bound {
                return Err(format!(
                    "entry {n} ({offset} at {position}) lies beyond the segment"
                ));
            }
            previous = Some((offset, position));
        }
        Ok(())
    }
}

/// First n in 0..count for which `is_below(n)` is false, given it is true for a prefix.
pub(super) fn partition_point(count: usize, is_below: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0usize, count);
    while low < high {
        let middle = low + (high - low) / 2;
        if is_below(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_greatest_entry_at_or_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000100.index");
        let mut index = OffsetIndex::create(&Disk::real(), &path, 100, 80).expect("create");
        assert_eq!(index.lookup(150), (100, 0));
        index.append(110, 4_200).expect("append");
        index.append(120, 8_400).expect("append");
        assert!(index.append(120, 9_000).is_err());
        assert!(index.append(99, 9_000).is_err());
        assert_eq!(index.lookup(99), (100, 0));
        assert_eq!(index.lookup(109), (100, 0));
        assert_eq!(index.lookup(110), (110, 4_200));
        assert_eq!(index.lookup(119), (110, 4_200));
        assert_eq!(index.lookup(1_000), (120, 8_400));
        assert_eq!(index.sanity_check(10_000, i64::MAX), Ok(()));
        assert!(index.sanity_check(8_400, i64::MAX).is_err());
        assert!(index.sanity_check(10_000, 120).is_err());
    }

    #[test]
    fn zero_filled_preallocation_fails_the_sanity_check() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000000.index");
        std::fs::write(&path, vec![0u8; 64]).expect("write");
        let index = OffsetIndex::open(&Disk::real(), &path, 0).expect("open");
        assert_eq!(index.entries(), 8);
        assert!(index.sanity_check(1_000, i64::MAX).is_err());
    }
}
