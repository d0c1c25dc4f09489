//! The memory-mapped, fixed-width entry file shared by the offset index and the time index.
//!
//! It owns the file's length, the mapping and the count of valid entries, and nothing about what an
//! entry means. Kafka's rules for these files are kept here: a new index is preallocated to the
//! maximum size rounded down to whole entries; an existing one holds `file length / entry size`
//! entries, which is why every index is trimmed to its valid length when its segment stops being
//! active and on close. This is the only module with `unsafe`: mapping a file.

use std::io;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use crate::disk::{self, Disk, File};

pub(super) struct IndexFile {
    disk: Disk,
    path: PathBuf,
    file: File,
    /// Maps the whole file. Invariant: `mmap.len()` equals the file length, a multiple of
    /// `entry_bytes`, so every slot we address lies inside the file.
    mmap: MmapMut,
    entry_bytes: usize,
    /// Valid entries, all at the front. Slots past this are garbage (often zeros).
    entries: usize,
}

impl IndexFile {
    /// Creates (or truncates) the file and preallocates `max_index_size_bytes` rounded down to a
    /// whole number of entries, the way Kafka sizes a fresh index.
    pub(super) fn create(
        disk: &Disk,
        path: &Path,
        entry_bytes: usize,
        max_index_size_bytes: u64,
    ) -> io::Result<IndexFile> {
        let file = disk.create_file(path)?;
        let length = round_down(max_index_size_bytes, entry_bytes);
        disk.set_len(&file, path, length)?;
        let mmap = map(&file, length)?;
        Ok(IndexFile {
            disk: disk.clone(),
            path: path.to_path_buf(),
            file,
            mmap,
            entry_bytes,
            entries: 0,
        })
    }

    /// Opens an existing index and trusts its length for the entry count, as Kafka does; callers
    /// must sanity-check the entries. Fails with `InvalidData` when the length is not a whole
    /// number of entries, and with `NotFound` when the file is missing.
    pub(super) fn open(disk: &Disk, path: &Path, entry_bytes: usize) -> io::Result<IndexFile> {
        let file = disk.open_rw(path)?;
        let length = disk::file_len(&file)?;
        if length % entry_bytes as u64 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("index length {length} is not a multiple of {entry_bytes}"),
            ));
        }
        let mmap = map(&file, length)?;
        let entries = mmap.len() / entry_bytes;
        Ok(IndexFile {
            disk: disk.clone(),
            path: path.to_path_buf(),
            file,
            mmap,
            entry_bytes,
            entries,
        })
    }

    pub(super) fn entries(&self) -> usize {
        self.entries
    }

    /// Slots the file currently has room for.
    pub(super) fn max_entries(&self) -> usize {
        self.mmap.len() / self.entry_bytes
    }

    pub(super) fn entry(&self, n: usize) -> &[u8] {
        debug_assert!(n < self.entries, "index entry {n} of {}", self.entries);
        let at = n * self.entry_bytes;
        &self.mmap[at..at + self.entry_bytes]
    }

    /// Writes the next entry. The caller checks fullness first (a full index rolls the segment);
    /// the error here only protects the mapping.
    pub(super) fn push(&mut self, entry: &[u8]) -> io::Result<()> {
        debug_assert_eq!(entry.len(), self.entry_bytes);
        if self.entries >= self.max_entries() {
            return Err(io::Error::other(format!(
                "index {} is full",
                self.path.display()
            )));
        }
        let at = self.entries * self.entry_bytes;
        self.mmap[at..at + self.entry_bytes].copy_from_slice(entry);
        self.entries += 1;
        Ok(())
    }

    /// Forgets every entry and makes room for `max_index_size_bytes` again: the start of a rebuild.
    pub(super) fn reset(&mut self, max_index_size_bytes: u64) -> io::Result<()> {
        self.entries = 0;
        self.resize(max_index_size_bytes)
    }

    /// Sets the file length to `size_bytes` rounded down to whole entries, keeping the valid
    /// entries that still fit. The mapping is dropped before the length changes: touching a mapped
    /// page past the end of a shrunk file would raise SIGBUS.
    pub(super) fn resize(&mut self, size_bytes: u64) -> io::Result<()> {
        let length = round_down(size_bytes, self.entry_bytes);
        if length == self.mmap.len() as u64 {
            return Ok(());
        }
        let old_length = self.mmap.len() as u64;
        self.mmap = MmapMut::map_anon(0)?;
        // When the length cannot change, the file keeps its old one: map that again, so the
        // entries stay readable and the mapping never disagrees with the file.
        let resized = self.disk.set_len(&self.file, &self.path, length);
        let mapped_length = if resized.is_ok() { length } else { old_length };
        match map(&self.file, mapped_length) {
            Ok(mmap) => self.mmap = mmap,
            Err(error) => {
                // An empty mapping and no entries: lookups scan the segment from its start.
                self.entries = 0;
                return Err(error);
            }
        }
        self.entries = self.entries.min(self.max_entries());
        resized
    }

    /// Shrinks the file to exactly its valid entries, so that a later open (ours or Kafka's tools)
    /// reads the right entry count from the file length.
    pub(super) fn trim_to_valid_size(&mut self) -> io::Result<()> {
        self.resize((self.entries * self.entry_bytes) as u64)
    }

    /// A second handle on the file. On Linux, fsync through it also writes pages dirtied
    /// through the shared mapping, since both go through the same page cache.
    pub(super) fn try_clone_file(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes dirty pages and the file length to stable storage.
    pub(super) fn flush(&self) -> io::Result<()> {
        self.mmap.flush()?;
        self.disk.sync_all(&self.file, &self.path)
    }
}

fn round_down(size_bytes: u64, entry_bytes: usize) -> u64 {
    size_bytes - size_bytes % entry_bytes as u64
}

fn map(file: &File, length: u64) -> io::Result<MmapMut> {
    let length = usize::try_from(length)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "index too large to map"))?;
    // SAFETY: the mapping is shared and the file belongs to this partition's log, which alone
    // changes its length, and only after dropping the mapping (see `resize`). Other processes are
    // not expected to truncate files inside a running broker's log directory.
    unsafe { MmapOptions::new().len(length).map_mut(file) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_preallocates_trim_shrinks_and_open_counts_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.timeindex");
        let mut index = IndexFile::create(&Disk::real(), &path, 12, 100).expect("create");
        assert_eq!(std::fs::metadata(&path).expect("metadata").len(), 96);
        assert_eq!(index.max_entries(), 8);
        index.push(&[1u8; 12]).expect("push");
        index.push(&[2u8; 12]).expect("push");
        index.trim_to_valid_size().expect("trim");
        assert_eq!(index.max_entries(), 2);
        assert!(index.push(&[3u8; 12]).is_err());
        drop(index);
        assert_eq!(std::fs::metadata(&path).expect("metadata").len(), 24);
        let mut index = IndexFile::open(&Disk::real(), &path, 12).expect("open");
        assert_eq!(index.entries(), 2);
        assert_eq!(index.entry(1), &[2u8; 12]);
        index.resize(100).expect("resize");
        assert_eq!((index.entries(), index.max_entries()), (2, 8));
        index.reset(100).expect("reset");
        assert_eq!(index.entries(), 0);
    }

    #[test]
    fn open_rejects_partial_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.index");
        std::fs::write(&path, [0u8; 9]).expect("write");
        let error = IndexFile::open(&Disk::real(), &path, 8)
            .err()
            .expect("must fail");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }
}
