//! When a log's bytes reach the disk: `flush` (every segment from the recovery point on, then
//! the directory, and only then the recovery point moves), `flush_if_due` (`flush.ms`), the
//! clean `close`, and the one background thread that fsyncs rolled segments in roll order so
//! that a roll never waits for a 1 GiB fsync under the partition's lock.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::{LogError, PartitionLog};
use crate::disk::{Disk, File};

/// Marks a log whose background flush failed; below every real offset, so `max` ignores it.
pub(super) const FLUSH_FAILED: i64 = i64::MIN;

/// A rolled segment's files to fsync, and the recovery point to publish once they are durable.
pub(super) struct FlushJob {
    pub(super) disk: Disk,
    /// The segment's `.log` and its indexes, with their paths.
    pub(super) files: Vec<(File, PathBuf)>,
    /// Synced last, so the new files' entries are durable too.
    pub(super) dir: PathBuf,
    pub(super) flushed_through: Arc<AtomicI64>,
    pub(super) segment_fsyncs: Arc<AtomicU64>,
    pub(super) new_base_offset: i64,
}

/// One thread fsyncs rolled segments for every log, first in first out. A single queue keeps a
/// log's flushes in roll order, so a later roll can never publish its recovery point before an
/// earlier segment is durable.
pub(super) fn background_flusher() -> &'static std::sync::mpsc::Sender<FlushJob> {
    static FLUSHER: std::sync::OnceLock<std::sync::mpsc::Sender<FlushJob>> =
        std::sync::OnceLock::new();
    FLUSHER.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel::<FlushJob>();
        let spawned = std::thread::Builder::new()
            .name("segment-flush".into())
            .spawn(move || {
                for job in receiver {
                    // The directory handle comes last, so the new files' entries are durable too.
                    // After one failure a log publishes nothing more from here: its later segments
                    // may be durable, but an earlier one is not. `flush` then syncs them all inline.
                    if job.flushed_through.load(Ordering::SeqCst) == FLUSH_FAILED {
                        continue;
                    }
                    let synced = job
                        .files
                        .iter()
                        .try_for_each(|(file, path)| job.disk.sync_all(file, path))
                        .and_then(|()| job.disk.sync_dir_if_exists(&job.dir));
                    match synced {
                        Ok(()) => {
                            job.segment_fsyncs.fetch_add(1, Ordering::Relaxed);
                            job.flushed_through
                                .fetch_max(job.new_base_offset, Ordering::SeqCst);
                        }
                        Err(e) => {
                            tracing::error!("background segment flush failed: {e}");
                            job.flushed_through.store(FLUSH_FAILED, Ordering::SeqCst);
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the segment flusher, rolls will flush inline: {e}");
        }
        sender
    })
}

impl PartitionLog {
    /// fsyncs the data and indexes of every segment that may hold offsets at or above the
    /// recovery point, then the directory when files came or went, and only then moves the
    /// recovery point to the log end offset. A caller persists the recovery point (checkpoint)
    /// only after this returns.
    pub fn flush(&mut self) -> Result<(), LogError> {
        let started = std::time::Instant::now();
        let flushed = self.flush_unflushed();
        if flushed.is_ok() {
            self.disk.log_flush_time().record(started.elapsed());
        }
        flushed
    }

    fn flush_unflushed(&mut self) -> Result<(), LogError> {
        self.recovery_point = self.recovery_point();
        let first_unflushed = self
            .inactive
            .range(..=self.recovery_point)
            .next_back()
            .map(|(base, _)| *base);
        let unflushed = match first_unflushed {
            Some(base) => self.inactive.range(base..),
            None => self.inactive.range(..),
        };
        if self.recovery_point < self.active.base_offset() {
            for segment in unflushed.map(|(_, segment)| segment) {
                segment.flush(&self.segment_fsyncs)?;
                self.index_flushes += 1;
            }
        }
        if self.recovery_point < self.log_end_offset {
            // Only the `.log`: after a crash, recovery re-validates the segment holding the
            // recovery point and everything after it, and rebuilds their indexes, so the
            // active segment's indexes need not be durable. That saves two of the three fsyncs
            // of every flush (with log.flush.interval.messages=1, of every produce). A segment
            // whose indexes were skipped gets them fsynced when it rolls (`roll`), before the
            // recovery point can pass it.
            self.active.flush_log(&self.segment_fsyncs)?;
        }
        if self.dir_needs_sync {
            // New segment files are only reachable after a crash once their directory entries
            // are durable.
            self.disk.sync_dir(&self.dir)?;
            self.dir_needs_sync = false;
        }
        self.recovery_point = self.log_end_offset;
        self.last_flush_ms = self.latest_now_ms;
        Ok(())
    }

    /// Flushes when there is unflushed data and flush_interval_ms has passed since the last flush.
    pub fn flush_if_due(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.latest_now_ms = now_ms;
        let due = now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_interval_ms;
        if due && self.recovery_point < self.log_end_offset {
            self.flush()?;
        }
        Ok(())
    }

    /// Clean close: writes the active segment's final time-index entry, trims both indexes to
    /// their valid size (so a reopen, or Kafka's tools, read the entry count from the length) and
    /// fsyncs everything. The log stays usable: a later append grows the indexes again.
    pub fn close(&mut self) -> Result<(), LogError> {
        self.active.on_become_inactive()?;
        // The indexes here; `flush` fsyncs the `.log` (once) and moves the recovery point.
        self.active.flush_indexes()?;
        self.index_flushes += 1;
        self.flush()
    }
}
