//! Delete retention (Kafka's `UnifiedLog.deleteOldSegments`) and the log start offset that
//! DeleteRecords moves: which whole segments may go, and how they go.
//!
//! Retention removes whole segments only, from the front of the log, oldest first, and stops at
//! the first segment that may not go. Nothing at or above the high watermark is ever removed, so
//! the log start offset can never pass it. When every segment would go, an empty active segment
//! is rolled first, so the log end offset never moves. A removed segment's files are renamed
//! `*.deleted` at once and removed after file_delete_delay_ms, as Kafka does, so that a reader
//! holding a position in them is not cut off mid-read by an unlink.
//!
//! Deliberately not here: when retention runs (Kafka's log.retention.check.interval.ms), which
//! cleanup policy a topic has (a compact-only topic passes infinite retention, leaving only the
//! log-start-offset pass), and the high watermark itself. All three are the caller's.

use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::config::topic::TopicValues;

use super::segment::{
    segment_file, LogSegment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use super::{LogError, PartitionLog};
use crate::disk::Disk;

// A removed segment's files get the `.deleted` suffix until they are removed (`open` removes
// any it finds). Kafka deletes the producer snapshot named after a deleted segment's base offset
// together with the segment, and so do we; no other snapshot.
use crate::disk::names::{with_suffix, DELETED_SUFFIX, SNAPSHOT_SUFFIX};

/// Delete-retention settings, named after Kafka's topic configs, units last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// `retention.ms`: a segment whose largest record timestamp is older than now minus this is
    /// deleted. -1 means infinite.
    pub retention_ms: i64,
    /// `retention.bytes`: the oldest segments are deleted while the log stays at or above this
    /// size. -1 means no limit.
    pub retention_bytes: i64,
    /// `file.delete.delay.ms`: how long a deleted segment's `*.deleted` files are kept.
    pub file_delete_delay_ms: i64,
}

impl RetentionConfig {
    /// A topic's retention from its config values. Time and size retention apply only where the
    /// cleanup policy includes `delete`; a compact-only topic keeps what the cleaner leaves.
    pub fn from_topic(values: &TopicValues) -> RetentionConfig {
        let delete = values.includes("cleanup.policy", "delete");
        let pick = |name: &str| if delete { values.i64(name) } else { -1 };
        RetentionConfig {
            // A negative time in another unit (`log.retention.hours=-1`) is forever too.
            retention_ms: pick("retention.ms").max(-1),
            retention_bytes: pick("retention.bytes"),
            file_delete_delay_ms: values.i64("file.delete.delay.ms"),
        }
    }
}

/// Files renamed `*.deleted`, to be removed once `due_ms` has come.
pub(super) struct PendingDelete {
    due_ms: i64,
    paths: Vec<PathBuf>,
}

impl PartitionLog {
    /// Kafka's `deleteOldSegments` for a topic whose cleanup policy includes `delete`. Three passes
    /// in Kafka's order, each deleting whole segments from the oldest until one may not go:
    /// 1. segments entirely below the log start offset (the next segment's base offset is <= it);
    /// 2. while the log is at least retention_bytes, the oldest segments whose removal keeps it at
    ///    least retention_bytes;
    /// 3. segments whose largest record timestamp (the `.log`'s mtime when no batch has one) is
    ///    more than retention_ms before `now_ms`.
    ///
    /// A segment may go only when the next segment's base offset (the log end offset for the
    /// active segment) is <= `high_watermark`. An empty active segment never goes; a non-empty one
    /// may, after a new empty active segment is rolled at the log end offset. The log start offset
    /// moves to the first remaining segment's base offset. Returns the number of segments deleted.
    pub fn delete_old_segments(
        &mut self,
        retention: &RetentionConfig,
        high_watermark: i64,
        now_ms: i64,
    ) -> Result<usize, LogError> {
        let delay_ms = retention.file_delete_delay_ms;
        let log_start_offset = self.log_start_offset;
        let mut deleted = self.delete_while(
            "log start offset breach",
            high_watermark,
            now_ms,
            delay_ms,
            |_, next_base_offset| Ok(next_base_offset.is_some_and(|next| next <= log_start_offset)),
        )?;
        let size_bytes = self.size_bytes();
        if let Ok(retention_bytes) = u64::try_from(retention.retention_bytes) {
            if size_bytes >= retention_bytes {
                let mut excess_bytes = size_bytes - retention_bytes;
                deleted += self.delete_while(
                    "retention.bytes breach",
                    high_watermark,
                    now_ms,
                    delay_ms,
                    |segment, _| match excess_bytes.checked_sub(segment.size_bytes()) {
                        Some(rest) => {
                            excess_bytes = rest;
                            Ok(true)
                        }
                        None => Ok(false),
                    },
                )?;
            }
        }
        if retention.retention_ms >= 0 {
            let disk = self.disk.clone();
            deleted += self.delete_while(
                "retention.ms breach",
                high_watermark,
                now_ms,
                delay_ms,
                |segment, _| {
                    let largest_timestamp = largest_timestamp(&disk, segment)?;
                    Ok(now_ms.saturating_sub(largest_timestamp) > retention.retention_ms)
                },
            )?;
        }
        Ok(deleted)
    }

    /// Removes the `*.deleted` files whose file_delete_delay_ms has passed by `now_ms`. Files that
    /// cannot be removed stay scheduled and the first error is returned.
    pub fn remove_deleted_files(&mut self, now_ms: i64) -> Result<(), LogError> {
        let mut first_error = None;
        let mut still_pending = Vec::new();
        for mut pending in std::mem::take(&mut self.pending_deletes) {
            if pending.due_ms <= now_ms {
                pending.paths.retain(|path| match self.disk.remove_file(path) {
                    Ok(()) => false,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => false,
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "cannot remove a deleted segment file");
                        first_error.get_or_insert(error);
                        true
                    }
                });
            }
            if !pending.paths.is_empty() {
                still_pending.push(pending);
            }
        }
        self.pending_deletes = still_pending;
        match first_error {
            Some(error) => Err(error.into()),
            None => Ok(()),
        }
    }

    /// Total bytes of all segments' `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.inactive
            .values()
            .map(LogSegment::size_bytes)
            .sum::<u64>()
            + self.active.size_bytes()
    }

    /// DeleteRecords: raises the log start offset to `new_log_start_offset` when that is higher,
    /// and returns the log start offset. Reads below it fail from now on; the whole segments below
    /// it are deleted by the next `delete_old_segments`. The caller checks the request against the
    /// high watermark; an offset beyond the log end offset is refused here too.
    pub fn advance_log_start_offset(&mut self, new_log_start_offset: i64) -> Result<i64, LogError> {
        if new_log_start_offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                requested: new_log_start_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        self.raise_log_start_offset(new_log_start_offset);
        self.trim_leader_epochs();
        Ok(self.log_start_offset)
    }

    /// Cuts the leader-epoch cache to the log start offset. The log start offset has moved
    /// already, so a failed write of `leader-epoch-checkpoint` is logged, not returned: the stale
    /// file is harmless, since loading cuts it to the log start offset again (and a failed fsync
    /// has taken the log directory offline on its own).
    fn trim_leader_epochs(&mut self) {
        if let Err(error) = self
            .leader_epochs
            .truncate_from_start(self.log_start_offset)
        {
            tracing::warn!(dir = %self.dir.display(), %error, "cannot rewrite leader-epoch-checkpoint");
        }
    }

    /// Kafka's `updateLogStartOffset`: the recovery point follows the log start offset up, since
    /// nothing below the log start offset is ever recovered or read.
    fn raise_log_start_offset(&mut self, new_log_start_offset: i64) {
        if new_log_start_offset > self.log_start_offset {
            self.log_start_offset = new_log_start_offset;
            self.recovery_point = self.recovery_point.max(new_log_start_offset);
        }
    }

    /// One retention pass: finds the deletable prefix of the log and deletes it.
    fn delete_while(
        &mut self,
        reason: &str,
        high_watermark: i64,
        now_ms: i64,
        delay_ms: i64,
        predicate: impl FnMut(&LogSegment, Option<i64>) -> Result<bool, LogError>,
    ) -> Result<usize, LogError> {
        let deletable = self.deletable_segments(high_watermark, predicate)?;
        if !deletable.is_empty() {
            tracing::info!(dir = %self.dir.display(), ?deletable, reason, "deleting segments");
        }
        self.delete_segments(&deletable, now_ms, delay_ms)
    }

    /// Base offsets of the segments, oldest first, for which `predicate(segment, next segment's
    /// base offset)` holds, stopping at the first that fails it or any rule common to all passes.
    fn deletable_segments(
        &self,
        high_watermark: i64,
        mut predicate: impl FnMut(&LogSegment, Option<i64>) -> Result<bool, LogError>,
    ) -> Result<Vec<i64>, LogError> {
        let mut deletable = Vec::new();
        for segment in self.segments_from(i64::MIN) {
            let is_active = segment.base_offset() == self.active.base_offset();
            let upper_bound_offset = self.segment_end_offset(segment);
            // An empty active segment is never deleted: it would be replaced by an identical one.
            if is_active && segment.size_bytes() == 0 {
                break;
            }
            // Nothing at or beyond the high watermark goes, so the log start offset never
            // passes it.
            let next_base_offset = (!is_active).then_some(upper_bound_offset);
            if high_watermark < upper_bound_offset || !predicate(segment, next_base_offset)? {
                break;
            }
            deletable.push(segment.base_offset());
        }
        Ok(deletable)
    }

    /// Kafka's `deleteSegments`: keeps at least one segment by rolling first when all would go,
    /// moves the log start offset to the first remaining segment, forgets the segments and renames
    /// their files `*.deleted` for removal after `delay_ms` (at once when it is <= 0).
    fn delete_segments(
        &mut self,
        base_offsets: &[i64],
        now_ms: i64,
        delay_ms: i64,
    ) -> Result<usize, LogError> {
        let Some(&last) = base_offsets.last() else {
            return Ok(0);
        };
        if base_offsets.len() == self.inactive.len() + 1 {
            assert!(
                self.active.size_bytes() > 0,
                "an empty active segment is never deletable"
            );
            self.roll(now_ms)?;
        }
        let new_log_start_offset = self
            .inactive
            .range(last + 1..)
            .next()
            .map_or(self.active.base_offset(), |(base, _)| *base);
        // The log start offset moves before any file does, so no read is sent to a removed segment.
        self.raise_log_start_offset(new_log_start_offset);
        let mut renamed = Vec::new();
        let mut result = Ok(());
        for base_offset in base_offsets {
            let removed = self.inactive.remove(base_offset);
            assert!(removed.is_some(), "segment {base_offset} is deletable");
            // Closing the segment's files and mappings first; the renames do not need them.
            drop(removed);
            result = rename_for_deletion(&self.disk, &self.dir, *base_offset, &mut renamed);
            if result.is_err() {
                break;
            }
        }
        self.dir_needs_sync = true;
        self.pending_deletes.push(PendingDelete {
            due_ms: now_ms.saturating_add(delay_ms.max(0)),
            paths: renamed,
        });
        result?;
        // The renames are made durable before the caller checkpoints the new log start offset:
        // `log-start-offset-checkpoint` omits a log whose start is its first segment's base
        // offset, so a deleted segment coming back after a crash would bring its records back.
        self.disk.sync_dir(&self.dir)?;
        self.dir_needs_sync = false;
        self.trim_leader_epochs();
        if delay_ms <= 0 {
            self.remove_deleted_files(now_ms)?;
        }
        Ok(base_offsets.len())
    }
}

/// Kafka's `LogSegment.largestTimestamp`: the largest record timestamp in the segment, or the
/// `.log`'s last-modified time when no batch carries a timestamp.
fn largest_timestamp(disk: &Disk, segment: &LogSegment) -> Result<i64, LogError> {
    let (max_timestamp, _) = segment.max_timestamp_and_offset();
    if max_timestamp >= 0 {
        return Ok(max_timestamp);
    }
    let modified = disk.modified(segment.log_path())?;
    Ok(modified.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    }))
}

/// Renames the files of the segment at `base_offset`, and the producer snapshot named after it,
/// to `*.deleted`, the `.log` first: a crash part way leaves orphan indexes, which `open`
/// removes. Files that do not exist are skipped. Renamed paths are pushed onto `renamed`.
fn rename_for_deletion(
    disk: &Disk,
    dir: &Path,
    base_offset: i64,
    renamed: &mut Vec<PathBuf>,
) -> Result<(), LogError> {
    for suffix in [
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
        SNAPSHOT_SUFFIX,
    ] {
        let from = segment_file(dir, base_offset, suffix);
        let to = with_suffix(&from, DELETED_SUFFIX);
        match disk.rename(&from, &to) {
            Ok(()) => renamed.push(to),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}
