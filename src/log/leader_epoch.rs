//! The leader-epoch cache of one partition and its `leader-epoch-checkpoint` file: for each
//! leader epoch, the offset of the first batch appended in it (Kafka's `LeaderEpochFileCache`).
//! Replication needs it to answer OffsetForLeaderEpoch and to truncate a follower's diverging
//! log; a single broker keeps it so that its partition directories are what Kafka writes.
//!
//! The file is Kafka's checkpoint format (`checkpoint.rs`) with `<epoch> <start offset>` entries:
//!
//! ```text
//! 0                        version
//! <N>                      entry count
//! <epoch> <start offset>   N lines, epochs and start offsets both increasing
//! ```
//!
//! The entries follow the log: a new epoch is added when the partition becomes leader in it or
//! its first batch is appended ("assign"); when the log start offset rises (DeleteRecords,
//! retention) the entries below it go and the last of them moves up to start there ("truncate
//! from start"); when the log loses its tail (recovery truncation) the entries starting at or
//! beyond the new log end offset go ("truncate from end"). Every change rewrites the file at
//! once, atomically; nothing is written when nothing changed.

use std::io;
use std::path::{Path, PathBuf};

use super::checkpoint::{read_checkpoint_file, write_checkpoint_file};
use crate::disk::Disk;

/// The file's name in the partition directory.
pub use crate::disk::names::LEADER_EPOCH_CHECKPOINT;

/// One leader epoch and the offset of its first batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The epochs of one partition, oldest first, mirrored in its `leader-epoch-checkpoint`.
#[derive(Debug)]
pub struct LeaderEpochCache {
    disk: Disk,
    path: PathBuf,
    /// Epochs strictly increasing, start offsets strictly increasing.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Reads `dir`'s `leader-epoch-checkpoint`; a missing file is an empty cache. Entries that
    /// break the order (a later epoch starting no later than an earlier one) are dropped as
    /// Kafka drops them, by assigning the entries one after another. A file that cannot be
    /// parsed is an `InvalidData` error.
    pub fn open(disk: &Disk, dir: &Path) -> io::Result<LeaderEpochCache> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let read = read_checkpoint_file(disk, &path, parse_entry)?;
        let mut cache = LeaderEpochCache {
            disk: disk.clone(),
            path,
            entries: Vec::with_capacity(read.len()),
        };
        for entry in read {
            cache.assign_in_memory(entry);
        }
        Ok(cache)
    }

    /// An empty cache for `dir` that ignores whatever file is there; the next change rewrites it.
    pub fn empty(disk: &Disk, dir: &Path) -> LeaderEpochCache {
        LeaderEpochCache {
            disk: disk.clone(),
            path: dir.join(LEADER_EPOCH_CHECKPOINT),
            entries: Vec::new(),
        }
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `start_offset` and writes the file, unless the cache
    /// already knows it (the latest epoch is `epoch`, starting at or before `start_offset`): the
    /// common case of an append in the current epoch does no I/O. Entries for `epoch` or a later
    /// one, and entries starting at or after `start_offset`, are replaced. Negative epochs (a
    /// batch from before leader epochs) are ignored. Returns whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<bool> {
        let changed = self.assign_in_memory(EpochEntry {
            epoch,
            start_offset,
        });
        if changed {
            self.write()?;
        }
        Ok(changed)
    }

    /// The log start offset rose to `log_start_offset`: entries starting below it go, except the
    /// last of them, which now starts at `log_start_offset` (its epoch still covers the first
    /// offset left in the log).
    pub fn truncate_from_start(&mut self, log_start_offset: i64) -> io::Result<()> {
        let Some(first) = self.entries.first() else {
            return Ok(());
        };
        if first.start_offset >= log_start_offset {
            return Ok(());
        }
        let below = self
            .entries
            .partition_point(|entry| entry.start_offset <= log_start_offset);
        let covering = self.entries[below - 1];
        self.entries.drain(..below);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: covering.epoch,
                start_offset: log_start_offset,
            },
        );
        self.write()
    }

    /// The log now ends at `log_end_offset`: entries starting at or after it go.
    pub fn truncate_from_end(&mut self, log_end_offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|entry| entry.start_offset < log_end_offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.write()
    }

    fn assign_in_memory(&mut self, entry: EpochEntry) -> bool {
        if entry.epoch < 0 || entry.start_offset < 0 {
            return false;
        }
        let known = self.latest().is_some_and(|latest| {
            latest.epoch == entry.epoch && latest.start_offset <= entry.start_offset
        });
        if known {
            return false;
        }
        self.entries.retain(|existing| {
            existing.epoch < entry.epoch && existing.start_offset < entry.start_offset
        });
        self.entries.push(entry);
        true
    }

    fn write(&self) -> io::Result<()> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|entry| format!("{} {}", entry.epoch, entry.start_offset))
            .collect();
        write_checkpoint_file(&self.disk, &self.path, &lines)
    }
}

/// `<epoch> <start offset>`, separated by one space as Kafka writes them (any whitespace read).
fn parse_entry(line: &str) -> Option<EpochEntry> {
    let mut fields = line.split_whitespace();
    match (fields.next(), fields.next(), fields.next()) {
        (Some(epoch), Some(start_offset), None) => Some(EpochEntry {
            epoch: epoch.parse().ok()?,
            start_offset: start_offset.parse().ok()?,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    fn file_text(dir: &Path) -> String {
        std::fs::read_to_string(dir.join(LEADER_EPOCH_CHECKPOINT)).expect("read file")
    }

    #[test]
    fn assign_writes_kafkas_format_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::open(&Disk::default(), dir.path()).unwrap();
        assert!(cache.entries().is_empty());
        assert!(!dir.path().join(LEADER_EPOCH_CHECKPOINT).exists());
        assert!(cache.assign(0, 0).unwrap());
        assert_eq!(file_text(dir.path()), "0\n1\n0 0\n");
        // Appends in the current epoch change nothing and write nothing.
        std::fs::remove_file(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert!(!cache.assign(0, 57).unwrap());
        assert!(!dir.path().join(LEADER_EPOCH_CHECKPOINT).exists());
        assert!(cache.assign(3, 120).unwrap());
        assert_eq!(file_text(dir.path()), "0\n2\n0 0\n3 120\n");
        let reopened = LeaderEpochCache::open(&Disk::default(), dir.path()).unwrap();
        assert_eq!(reopened.entries(), &[entry(0, 0), entry(3, 120)]);
        assert_eq!(reopened.latest(), Some(entry(3, 120)));
    }

    #[test]
    fn assign_replaces_entries_it_contradicts() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::empty(&Disk::default(), dir.path());
        cache.assign(1, 10).unwrap();
        cache.assign(2, 20).unwrap();
        cache.assign(4, 40).unwrap();
        // A lower start offset for the latest epoch moves it down.
        assert!(cache.assign(4, 30).unwrap());
        assert_eq!(cache.entries(), &[entry(1, 10), entry(2, 20), entry(4, 30)]);
        // An epoch below the latest one drops every entry at or after it.
        assert!(cache.assign(2, 25).unwrap());
        assert_eq!(cache.entries(), &[entry(1, 10), entry(2, 25)]);
        // A new epoch starting no later than older ones drops them.
        assert!(cache.assign(5, 10).unwrap());
        assert_eq!(cache.entries(), &[entry(5, 10)]);
        assert!(!cache.assign(-1, 50).unwrap(), "batches without an epoch");
        assert_eq!(file_text(dir.path()), "0\n1\n5 10\n");
    }

    #[test]
    fn truncate_from_start_moves_the_covering_epoch_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::empty(&Disk::default(), dir.path());
        cache.assign(0, 0).unwrap();
        cache.truncate_from_start(20).unwrap();
        assert_eq!(file_text(dir.path()), "0\n1\n0 20\n");
        cache.assign(1, 30).unwrap();
        cache.assign(2, 50).unwrap();
        cache.truncate_from_start(30).unwrap();
        assert_eq!(cache.entries(), &[entry(1, 30), entry(2, 50)]);
        cache.truncate_from_start(45).unwrap();
        assert_eq!(cache.entries(), &[entry(1, 45), entry(2, 50)]);
        cache.truncate_from_start(70).unwrap();
        assert_eq!(cache.entries(), &[entry(2, 70)]);
        assert_eq!(file_text(dir.path()), "0\n1\n2 70\n");
        // Below the first entry nothing changes, and nothing is written.
        std::fs::remove_file(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        cache.truncate_from_start(60).unwrap();
        assert_eq!(cache.entries(), &[entry(2, 70)]);
        assert!(!dir.path().join(LEADER_EPOCH_CHECKPOINT).exists());
    }

    #[test]
    fn truncate_from_end_drops_epochs_at_or_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::empty(&Disk::default(), dir.path());
        for (epoch, start) in [(0, 0), (1, 10), (2, 20)] {
            cache.assign(epoch, start).unwrap();
        }
        cache.truncate_from_end(25).unwrap();
        assert_eq!(cache.entries().len(), 3);
        cache.truncate_from_end(20).unwrap();
        assert_eq!(cache.entries(), &[entry(0, 0), entry(1, 10)]);
        assert_eq!(file_text(dir.path()), "0\n2\n0 0\n1 10\n");
        cache.truncate_from_end(0).unwrap();
        assert!(cache.entries().is_empty());
        assert_eq!(file_text(dir.path()), "0\n0\n");
    }

    #[test]
    fn reads_a_file_kafka_wrote() {
        // Kafka 4.1 after CreateTopics, then after DeleteRecords to offset 20, and with a
        // history of leader changes.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        for (text, expected) in [
            ("0\n1\n0 0\n", vec![entry(0, 0)]),
            ("0\n1\n0 20\n", vec![entry(0, 20)]),
            (
                "0\n3\n0 0\n2 1200\n5 1877\n",
                vec![entry(0, 0), entry(2, 1200), entry(5, 1877)],
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let cache = LeaderEpochCache::open(&Disk::default(), dir.path()).unwrap();
            assert_eq!(cache.entries(), expected.as_slice(), "{text:?}");
        }
        // Out-of-order entries are dropped as assigning them in turn would.
        std::fs::write(&path, "0\n3\n0 0\n3 50\n2 60\n").unwrap();
        let cache = LeaderEpochCache::open(&Disk::default(), dir.path()).unwrap();
        assert_eq!(cache.entries(), &[entry(0, 0), entry(2, 60)]);
    }

    #[test]
    fn malformed_files_are_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        for text in [
            "1\n0\n",
            "0\n2\n0 0\n",
            "0\n1\n0\n",
            "0\n1\n0 0 0\n",
            "0\n1\nx 0\n",
        ] {
            std::fs::write(&path, text).unwrap();
            let error = LeaderEpochCache::open(&Disk::default(), dir.path()).expect_err(text);
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{text:?}");
        }
    }
}
