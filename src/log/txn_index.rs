//! A segment's `.txnindex`, Kafka's aborted-transaction index: one 34-byte entry per transaction
//! aborted by a marker in this segment, in marker order (`docs/log-format.md` §4a):
//!
//! ```text
//! i16 version (0) | i64 producer id | i64 first offset | i64 last offset | i64 last stable offset
//! ```
//!
//! The first offset is the transaction's first batch (possibly in an earlier segment), the last
//! offset its ABORT marker's, and the last stable offset the partition's when it was aborted,
//! which lets a reader stop scanning once it passes the end of what it fetched. Last offsets
//! strictly increase within a file. The file is created with its first entry, as Kafka creates
//! it lazily; a segment without aborted transactions has none.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::disk::{self, Disk, File};

/// Bytes per entry.
pub const ENTRY_BYTES: u64 = 34;
const VERSION: i16 = 0;

/// An aborted transaction, as the transaction index and Fetch's `aborted_transactions` know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ENTRY_BYTES as usize] {
        let mut out = [0u8; ENTRY_BYTES as usize];
        out[0..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// One entry; an unknown version is corrupt.
    pub fn decode(bytes: &[u8]) -> io::Result<AbortedTxn> {
        let field = |at: usize| {
            bytes
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_be_bytes)
        };
        let version = bytes.get(0..2).map(|b| i16::from_be_bytes([b[0], b[1]]));
        match (version, field(2), field(10), field(18), field(26)) {
            (Some(VERSION), Some(producer_id), Some(first), Some(last), Some(lso)) => {
                Ok(AbortedTxn {
                    producer_id,
                    first_offset: first,
                    last_offset: last,
                    last_stable_offset: lso,
                })
            }
            (version, ..) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("transaction index entry of version {version:?}"),
            )),
        }
    }
}

/// One segment's transaction index.
pub(super) struct TransactionIndex {
    disk: Disk,
    path: PathBuf,
    /// None until the first entry is written (or while the file does not exist).
    file: Option<File>,
    len_bytes: u64,
    /// The last offset of the last entry.
    last_offset: Option<i64>,
}

impl TransactionIndex {
    /// The index at `path`, empty when the file does not exist. A tail shorter than an entry
    /// (a torn write) is cut off.
    pub(super) fn open(disk: &Disk, path: &Path) -> io::Result<TransactionIndex> {
        let mut index = TransactionIndex {
            disk: disk.clone(),
            path: path.to_path_buf(),
            file: None,
            len_bytes: 0,
            last_offset: None,
        };
        if !disk.exists(path) {
            return Ok(index);
        }
        let file = disk.open_rw(path)?;
        let len = disk::file_len(&file)?;
        let whole = len - len % ENTRY_BYTES;
        if whole != len {
            tracing::warn!(path = %path.display(), len, "cutting a partial entry off a transaction index");
            disk.set_len(&file, path, whole)?;
        }
        index.file = Some(file);
        index.len_bytes = whole;
        index.last_offset = index.entries()?.last().map(|e| e.last_offset);
        Ok(index)
    }

    /// Every entry, in order.
    pub(super) fn entries(&self) -> io::Result<Vec<AbortedTxn>> {
        let Some(file) = &self.file else {
            return Ok(Vec::new());
        };
        let mut bytes = vec![0u8; self.len_bytes as usize];
        file.read_exact_at(&mut bytes, 0)?;
        bytes
            .chunks_exact(ENTRY_BYTES as usize)
            .map(AbortedTxn::decode)
            .collect()
    }

    /// The last offset of the last entry, if any.
    pub(super) fn last_offset(&self) -> Option<i64> {
        self.last_offset
    }

    /// Appends an entry, creating the file with the first. Its last offset must lie past the
    /// last entry's (`Corrupt`-worthy otherwise: the caller skips entries already present).
    pub(super) fn append(&mut self, txn: &AbortedTxn) -> io::Result<()> {
        if self.last_offset.is_some_and(|last| txn.last_offset <= last) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "aborted transaction ending at {} is not after the index's last, {:?}",
                    txn.last_offset, self.last_offset
                ),
            ));
        }
        if self.file.is_none() {
            self.file = Some(if self.disk.exists(&self.path) {
                self.disk.open_rw(&self.path)?
            } else {
                self.disk.create_file(&self.path)?
            });
        }
        let Some(file) = &self.file else {
            return Err(io::Error::other("transaction index not open"));
        };
        self.disk
            .write_all_at(file, &self.path, &txn.encode(), self.len_bytes)
            .inspect_err(|_| {
                // A partial entry is cut off again; if that fails, the directory goes offline.
                if let Err(undo) = self.disk.set_len(file, &self.path, self.len_bytes) {
                    self.disk.mark_offline(&self.path, &undo);
                }
            })?;
        self.len_bytes += ENTRY_BYTES;
        self.last_offset = Some(txn.last_offset);
        Ok(())
    }

    /// Kafka's `collectAbortedTxns`: the entries whose transaction overlaps
    /// [`fetch_offset`, `upper_bound_offset`), and whether the search is complete (an entry's
    /// last stable offset reached the upper bound, so no later segment can hold more).
    pub(super) fn collect(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> io::Result<(Vec<AbortedTxn>, bool)> {
        let mut found = Vec::new();
        for txn in self.entries()? {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                found.push(txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                return Ok((found, true));
            }
        }
        Ok((found, false))
    }

    /// Drops the entries whose marker lies at or past `offset` (recovery cut the log there).
    pub(super) fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let entries = self.entries()?;
        let keep = entries
            .iter()
            .take_while(|e| e.last_offset < offset)
            .count();
        if keep == entries.len() {
            return Ok(());
        }
        if let Some(file) = &self.file {
            self.disk
                .set_len(file, &self.path, keep as u64 * ENTRY_BYTES)?;
        }
        self.len_bytes = keep as u64 * ENTRY_BYTES;
        self.last_offset = entries[..keep].last().map(|e| e.last_offset);
        Ok(())
    }

    /// fsyncs the file, if it exists.
    pub(super) fn flush(&self) -> io::Result<()> {
        match &self.file {
            Some(file) => self.disk.sync_all(file, &self.path),
            None => Ok(()),
        }
    }

    /// An independent handle for the background fsync of a rolled segment, if the file exists.
    pub(super) fn sync_handle(&self) -> io::Result<Option<(File, PathBuf)>> {
        self.file
            .as_ref()
            .map(|file| Ok((file.try_clone()?, self.path.clone())))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entries_have_kafkas_34_byte_layout() {
        let bytes = txn(0x0102, 5, 9, 10).encode();
        let mut expected = vec![0u8, 0];
        expected.extend_from_slice(&0x0102i64.to_be_bytes());
        expected.extend_from_slice(&5i64.to_be_bytes());
        expected.extend_from_slice(&9i64.to_be_bytes());
        expected.extend_from_slice(&10i64.to_be_bytes());
        assert_eq!(bytes.to_vec(), expected);
        assert_eq!(AbortedTxn::decode(&bytes).unwrap(), txn(0x0102, 5, 9, 10));
        let mut other_version = bytes;
        other_version[1] = 1;
        assert!(AbortedTxn::decode(&other_version).is_err());
    }

    #[test]
    fn append_collect_truncate_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let disk = Disk::real();
        let mut index = TransactionIndex::open(&disk, &path).unwrap();
        assert!(!disk.exists(&path), "created lazily");
        index.append(&txn(1, 0, 4, 5)).unwrap();
        index.append(&txn(2, 3, 8, 9)).unwrap();
        index.append(&txn(1, 10, 12, 13)).unwrap();
        assert!(
            index.append(&txn(3, 0, 12, 13)).is_err(),
            "last offsets increase"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * ENTRY_BYTES);
        // A fetch from 5 to 9: the transaction that began at 3 before it is listed.
        let (found, complete) = index.collect(5, 9).unwrap();
        assert_eq!(found, vec![txn(2, 3, 8, 9)]);
        assert!(complete);
        let (found, complete) = index.collect(0, 100).unwrap();
        assert_eq!(found.len(), 3);
        assert!(!complete);
        index.truncate_to(8).unwrap();
        assert_eq!(index.last_offset(), Some(4));
        // A torn tail is cut off on open.
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut &file, &[0u8; 7]).unwrap();
        let reopened = TransactionIndex::open(&disk, &path).unwrap();
        assert_eq!(reopened.entries().unwrap(), vec![txn(1, 0, 4, 5)]);
    }
}
