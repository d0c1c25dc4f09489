//! Kafka's offset-checkpoint text file, shared by `recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint` and `cleaner-offset-checkpoint`:
//!
//! ```text
//! 0                          version
//! <N>                        entry count
//! <topic> <partition> <offset>   N lines
//! ```
//!
//! `leader-epoch-checkpoint` (`leader_epoch.rs`) is the same file with `<epoch> <start offset>`
//! entries. Writes are atomic: a crash leaves either the old file or the new one, never a mix.
//! This module does not decide when checkpoints are written; the log manager does.

use std::io;
use std::path::Path;

use crate::disk::Disk;

const CHECKPOINT_VERSION: i32 = 0;

/// Reads a checkpoint. A missing file is an empty checkpoint (a new log dir); anything malformed
/// is an `InvalidData` error, and the caller falls back as Kafka does (recovery point 0, log
/// start offset from the first segment).
pub fn read_checkpoint(disk: &Disk, path: &Path) -> io::Result<Vec<(String, i32, i64)>> {
    read_checkpoint_file(disk, path, |line| {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next(), fields.next(), fields.next()) {
            (Some(topic), Some(partition), Some(offset), None) => partition
                .parse::<i32>()
                .ok()
                .zip(offset.parse::<i64>().ok())
                .map(|(p, o)| (topic.to_string(), p, o)),
            _ => None,
        }
    })
}

/// Kafka's checkpoint file with any kind of entry (the offset checkpoints above, and
/// `leader-epoch-checkpoint`): the version line, the entry count, then one entry per line, each
/// parsed by `parse_entry` (None: malformed). Missing file: no entries; malformed: `InvalidData`.
pub(crate) fn read_checkpoint_file<T>(
    disk: &Disk,
    path: &Path,
    parse_entry: impl Fn(&str) -> Option<T>,
) -> io::Result<Vec<T>> {
    let Some(text) = disk.read_to_string_if_exists(path)? else {
        return Ok(Vec::new());
    };
    let corrupt = |reason: &str| invalid_data(format!("{}: {reason}", path.display()));
    let mut lines = text.lines();
    let version = lines
        .next()
        .and_then(|line| line.trim().parse::<i32>().ok());
    if version != Some(CHECKPOINT_VERSION) {
        return Err(corrupt("unsupported version"));
    }
    let count = lines
        .next()
        .and_then(|line| line.trim().parse::<usize>().ok())
        .ok_or_else(|| corrupt("bad entry count"))?;
    // The count is only trusted as far as there are lines to back it.
    let mut entries = Vec::with_capacity(count.min(text.len() / 6));
    for line in lines.by_ref().take(count) {
        entries
            .push(parse_entry(line).ok_or_else(|| corrupt(&format!("bad entry line {line:?}")))?);
    }
    if entries.len() != count || lines.any(|line| !line.trim().is_empty()) {
        return Err(corrupt(&format!(
            "expected {count} entries, found {}",
            entries.len()
        )));
    }
    Ok(entries)
}

/// Writes a checkpoint atomically: `<file>.tmp` is written and fsynced, renamed over `<file>`,
/// and the directory is fsynced so the rename itself survives a crash.
pub fn write_checkpoint(
    disk: &Disk,
    path: &Path,
    entries: &[(String, i32, i64)],
) -> io::Result<()> {
    let mut lines = Vec::with_capacity(entries.len());
    for (topic, partition, offset) in entries {
        if topic.is_empty() || topic.contains(char::is_whitespace) {
            return Err(invalid_data(format!(
                "topic name {topic:?} cannot be checkpointed"
            )));
        }
        lines.push(format!("{topic} {partition} {offset}"));
    }
    write_checkpoint_file(disk, path, &lines)
}

/// Writes Kafka's checkpoint file: the version line, the entry count, then each entry line (which
/// must not contain a newline), every line ending in `\n`; atomically, as `write_checkpoint`.
pub(crate) fn write_checkpoint_file(
    disk: &Disk,
    path: &Path,
    entry_lines: &[String],
) -> io::Result<()> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entry_lines.len());
    for line in entry_lines {
        text.push_str(line);
        text.push('\n');
    }
    disk.write_file_durably(path, text.as_bytes())
}

fn invalid_data(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::temporary_path;
    use std::fs;

    #[test]
    fn round_trip_and_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("recovery-point-offset-checkpoint");
        assert_eq!(
            read_checkpoint(&Disk::real(), &path).expect("missing is empty"),
            Vec::new()
        );
        let entries = vec![
            ("orders".to_string(), 0, 42),
            ("orders".to_string(), 3, 0),
            ("a.b-c_d".to_string(), 12, 7),
        ];
        write_checkpoint(&Disk::real(), &path, &entries).expect("write");
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            "0\n3\norders 0 42\norders 3 0\na.b-c_d 12 7\n"
        );
        assert_eq!(
            read_checkpoint(&Disk::real(), &path).expect("read"),
            entries
        );
        assert!(!temporary_path(&path).exists());
        write_checkpoint(&Disk::real(), &path, &[]).expect("write empty");
        assert_eq!(
            read_checkpoint(&Disk::real(), &path).expect("read"),
            Vec::new()
        );
    }

    #[test]
    fn malformed_files_are_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("checkpoint");
        for text in [
            "1\n0\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt x 1\n",
            "0\n1\nt 0 1 9\n",
            "0\n99999999999\n",
            "",
            "0\n0\nt 0 1\n",
        ] {
            fs::write(&path, text).expect("write");
            let error = read_checkpoint(&Disk::real(), &path).expect_err(text);
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{text:?}");
        }
    }
}
