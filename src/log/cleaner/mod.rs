//! Compaction, Kafka's log cleaner for one partition: keeps the last record of every key and
//! drops the older ones, so that a compacted topic (and `__consumer_offsets`) stays as large as
//! its set of live keys rather than its history.
//!
//! A round, in the steps Kafka's `LogCleaner` takes (the files it writes: `docs/log-format.md` §14):
//! 1. The dirty range runs from the first dirty offset (the caller's `cleaner-offset-checkpoint`)
//!    to the first uncleanable offset: the active segment's base, or the first segment holding a
//!    record newer than `min.compaction.lag.ms`. The round runs when the dirty bytes exceed
//!    `min.cleanable.dirty.ratio` of the cleanable log, or when a dirty segment is older than
//!    `max.compaction.lag.ms`.
//! 2. A map from each key to its last offset is built from the dirty range, up to
//!    `log.cleaner.dedupe.buffer.size` bytes; the map's end bounds what this round may remove.
//! 3. Every segment from the start of the log up to the map's end is rewritten, in groups that fit
//!    `segment.bytes`, keeping a record when it lies at or past the map's end, or when it has a
//!    key and no later record of that key lies below the map's end. A batch keeps its base
//!    offset, last offset delta and producer fields. A batch left with no records is dropped,
//!    except a live idempotent producer's last batch and the group's last batch, which stay as
//!    empty batches: the producer's sequence survives a rebuild of its state from the log, and
//!    the rewritten segment still ends where the old ones did.
//!    Tombstones (null values) follow KIP-534: the first time a batch holding one is rewritten,
//!    its base timestamp becomes a delete horizon, `delete.retention.ms` from then (attribute bit
//!    6; each record's timestamp delta is re-encoded against it, so no timestamp changes), and a
//!    later round drops the tombstones once the horizon has passed. Consumers always have
//!    `delete.retention.ms` after a cleaning to see a delete.
//! 4. A group is written to `<base>.log.cleaned` and fsynced; then, under the partition's lock
//!    again, renamed `.log.swap`, the old segments' files deleted, and the swap renamed
//!    `<base>.log`, with the directory fsynced between steps. After a crash `recovery.rs` deletes
//!    a `.cleaned` file and completes a `.swap`.
//!
//! Only steps 1 and 4 hold the partition's lock (`plan_cleaning`, `finish_cleaning`, here); the
//! reads and writes of steps 2 and 3 (`CleaningRound::write`, in `rewrite.rs`) work on the
//! inactive segments' open files, whose bytes never change. A group one of whose segments
//! retention or DeleteRecords removed meanwhile is not swapped in; a later round cleans what is
//! left.
//!
//! Every source batch's CRC is checked before it is used, and the written file is checked whole
//! before it replaces anything: a round never turns one bad batch into a truncated group.
//!
//! Transactions (`txn.rs`, Kafka's rules): nothing at or past the last stable offset is cleaned
//! (it bounds the first uncleanable offset), a batch of an aborted transaction goes whole, and a
//! marker goes once its transaction's batches are gone and the delete horizon its first
//! cleaning stamped has passed; the aborted transactions come from the `.txnindex` files, and a
//! rewritten segment's `.txnindex` keeps the entries of the ABORT markers it keeps because their
//! batches go in this round.
//!
//! Not here: when rounds run and where the first dirty offset is remembered (`LogManager`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::topic::TopicValues;

use super::segment::{delete_segment_files, segment_file, LogSegment, LOG_SUFFIX};
use super::txn_index::AbortedTxn;
use super::{LogError, PartitionLog};
use crate::disk::names::{with_suffix, SWAP_SUFFIX};
use crate::disk::Disk;

mod rewrite;
mod txn;

/// A compacted topic's cleaner settings, named after Kafka's configs, units last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    /// `min.cleanable.dirty.ratio`: clean once dirty bytes / cleanable bytes exceeds this.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records newer than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment whose records are all older than this is cleaned
    /// whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long after a cleaning its tombstones stay readable.
    pub delete_retention_ms: i64,
    /// `log.cleaner.dedupe.buffer.size`: the most a round's key map may hold.
    pub dedupe_buffer_bytes: u64,
}

impl CleanerConfig {
    /// A compacted topic's cleaner settings from its config values and the broker's
    /// `log.cleaner.dedupe.buffer.size`.
    pub fn from_topic(values: &TopicValues, dedupe_buffer_bytes: u64) -> CleanerConfig {
        CleanerConfig {
            min_cleanable_dirty_ratio: values.f64("min.cleanable.dirty.ratio"),
            min_compaction_lag_ms: values.i64("min.compaction.lag.ms"),
            max_compaction_lag_ms: values.i64("max.compaction.lag.ms"),
            delete_retention_ms: values.i64("delete.retention.ms"),
            dedupe_buffer_bytes,
        }
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanOutcome {
    /// Where the next round's dirty range starts: the caller's new cleaner checkpoint.
    pub next_dirty_offset: i64,
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
}

/// An inactive segment as a round reads it without the partition's lock.
struct SourceSegment {
    base_offset: i64,
    /// One past the greatest offset it can hold: the next segment's base offset.
    end_offset: i64,
    size_bytes: u64,
    file: Arc<crate::disk::File>,
    path: PathBuf,
}

/// A round planned under the partition's lock (`PartitionLog::plan_cleaning`), to be written
/// without it (`write`) and swapped in under it again (`PartitionLog::finish_cleaning`).
pub struct CleaningRound {
    disk: Disk,
    dir: PathBuf,
    first_dirty: i64,
    segment_bytes: u64,
    /// Every inactive segment below the first uncleanable offset, in offset order.
    sources: Vec<SourceSegment>,
    config: CleanerConfig,
    /// The last offsets of the live idempotent producers' last batches, which stay even when
    /// emptied.
    producer_last_offsets: HashSet<i64>,
    /// The aborted transactions overlapping the sources, from the `.txnindex` files.
    aborted: Vec<AbortedTxn>,
    now_ms: i64,
    segments_before: usize,
    bytes_before: u64,
}

/// A written round: fsynced and checked `.log.cleaned` files, one per group of old segments.
/// Dropping it deletes whatever was not swapped in.
pub struct CleanedRound {
    disk: Disk,
    groups: Vec<CleanedGroup>,
    next_dirty_offset: i64,
    segments_before: usize,
    bytes_before: u64,
}

struct CleanedGroup {
    /// (base offset, size) of the segments it replaces, which must still be there unchanged.
    replaced: Vec<(i64, u64)>,
    cleaned_path: PathBuf,
    records_removed: u64,
    /// The `.txnindex` entries of the new segment.
    aborted_index: Vec<AbortedTxn>,
}

impl Drop for CleanedRound {
    fn drop(&mut self) {
        for group in &self.groups {
            // Swapped-in groups were renamed away: NotFound.
            let _ = self.disk.remove_file(&group.cleaned_path);
        }
    }
}

impl PartitionLog {
    /// One whole round at once, holding `&mut self` throughout (with no idempotent producer to
    /// keep), for tests; see `plan_cleaning` for the steps and None.
    #[cfg(test)]
    pub(crate) fn clean(
        &mut self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>, LogError> {
        let last_stable_offset = self.log_end_offset;
        let Some(round) = self.plan_cleaning(
            first_dirty_offset,
            config,
            HashSet::new(),
            last_stable_offset,
            now_ms,
        )?
        else {
            return Ok(None);
        };
        match round.write()? {
            Some(cleaned) => self.finish_cleaning(cleaned, now_ms),
            None => Ok(None),
        }
    }

    /// Step 1 of a round (see the module comment): None when the log is not due, that is
    /// nothing dirty below the first uncleanable offset, or a dirty ratio at or below the
    /// setting with no segment past `max.compaction.lag.ms`. Otherwise the round, which reads
    /// and writes files only in `CleaningRound::write`, without the partition's lock.
    /// `producer_last_offsets` are the last offsets of the live idempotent producers' last
    /// batches (the producer state's), which stay in the log even when emptied; nothing at or
    /// past `last_stable_offset` (the caller's) is cleaned.
    pub fn plan_cleaning(
        &self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        producer_last_offsets: HashSet<i64>,
        last_stable_offset: i64,
        now_ms: i64,
    ) -> Result<Option<CleaningRound>, LogError> {
        let first_dirty = first_dirty_offset.max(self.log_start_offset);
        let first_uncleanable = self
            .first_uncleanable_offset(first_dirty, config, now_ms)
            .min(last_stable_offset);
        if first_dirty >= first_uncleanable
            || !self.cleaning_due(first_dirty, first_uncleanable, config, now_ms)
        {
            return Ok(None);
        }
        let sources: Vec<SourceSegment> = self
            .inactive
            .range(..first_uncleanable)
            .map(|(base, segment)| SourceSegment {
                base_offset: *base,
                end_offset: self.segment_end_offset(segment),
                size_bytes: segment.size_bytes(),
                file: segment.log_file().clone(),
                path: segment.log_path().to_path_buf(),
            })
            .collect();
        // Every aborted transaction overlapping the segments a round may rewrite, whole: a
        // segment holding the last stable offset is rewritten up to its end.
        let aborted = match (sources.first(), sources.last()) {
            (Some(first), Some(last)) => {
                self.collect_aborted_txns(first.base_offset, last.end_offset)?
            }
            _ => Vec::new(),
        };
        Ok(Some(CleaningRound {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            first_dirty,
            segment_bytes: self.config.segment_bytes,
            sources,
            config: *config,
            producer_last_offsets,
            aborted,
            now_ms,
            segments_before: self.inactive.len() + 1,
            bytes_before: self.size_bytes(),
        }))
    }

    /// Step 4: swaps in each written group whose old segments are all still there unchanged;
    /// a group one of whose segments retention or DeleteRecords removed meanwhile is discarded
    /// (its records are gone anyway, or a later round cleans what is left). None when no group
    /// could be swapped in. Offsets, the log start and end offsets and the recovery point do not
    /// change; reads see every kept record where it was.
    pub fn finish_cleaning(
        &mut self,
        cleaned: CleanedRound,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>, LogError> {
        let mut records_removed = 0;
        let mut swapped = 0;
        for group in &cleaned.groups {
            let unchanged = group.replaced.iter().all(|(base, size)| {
                self.inactive
                    .get(base)
                    .is_some_and(|segment| segment.size_bytes() == *size)
            });
            if !unchanged {
                tracing::info!(dir = %self.dir.display(), base_offset = group.replaced[0].0, "segments changed while cleaning; not swapping this group in");
                continue;
            }
            self.swap_in(group, now_ms)?;
            records_removed += group.records_removed;
            swapped += 1;
        }
        if swapped == 0 {
            return Ok(None);
        }
        let outcome = CleanOutcome {
            next_dirty_offset: cleaned.next_dirty_offset,
            segments_before: cleaned.segments_before,
            segments_after: self.inactive.len() + 1,
            bytes_before: cleaned.bytes_before,
            bytes_after: self.size_bytes(),
            records_removed,
        };
        tracing::info!(dir = %self.dir.display(), ?outcome, "cleaned log");
        Ok(Some(outcome))
    }

    /// The active segment's base offset, or the base of the first dirty segment holding a record
    /// newer than `min.compaction.lag.ms` when that comes first.
    fn first_uncleanable_offset(
        &self,
        first_dirty: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> i64 {
        let active_base = self.active.base_offset();
        if config.min_compaction_lag_ms <= 0 {
            return active_base;
        }
        self.inactive
            .iter()
            .filter(|(_, segment)| self.segment_end_offset(segment) > first_dirty)
            .find(|(_, segment)| {
                let (largest_timestamp, _) = segment.max_timestamp_and_offset();
                now_ms.saturating_sub(largest_timestamp) < config.min_compaction_lag_ms
            })
            .map_or(active_base, |(base, _)| *base)
    }

    fn cleaning_due(
        &self,
        first_dirty: i64,
        first_uncleanable: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> bool {
        let (mut clean_bytes, mut dirty_bytes, mut overdue) = (0u64, 0u64, false);
        for segment in self.inactive.range(..first_uncleanable).map(|(_, s)| s) {
            if self.segment_end_offset(segment) <= first_dirty {
                clean_bytes += segment.size_bytes();
            } else {
                dirty_bytes += segment.size_bytes();
                let (largest_timestamp, _) = segment.max_timestamp_and_offset();
                overdue |= now_ms.saturating_sub(largest_timestamp) > config.max_compaction_lag_ms;
            }
        }
        let ratio = dirty_bytes as f64 / (clean_bytes + dirty_bytes).max(1) as f64;
        dirty_bytes > 0 && (overdue || ratio > config.min_cleanable_dirty_ratio)
    }

    /// Replaces the group's old segments with its written file (the module comment's step 4).
    fn swap_in(&mut self, group: &CleanedGroup, now_ms: i64) -> Result<(), LogError> {
        let first_base = group.replaced[0].0;
        let swap_path = with_suffix(
            &segment_file(&self.dir, first_base, LOG_SUFFIX),
            SWAP_SUFFIX,
        );
        self.disk.rename(&group.cleaned_path, &swap_path)?;
        // From here the old segments go away: a failure cannot be undone, so the log directory
        // goes offline and a restart completes the swap from the `.swap` file (`recovery.rs`).
        let swapped = self.swap_in_renamed(group, &swap_path, now_ms);
        if let Err(error) = &swapped {
            let error = std::io::Error::other(error.to_string());
            self.disk.mark_offline(&swap_path, &error);
        }
        swapped
    }

    fn swap_in_renamed(
        &mut self,
        group: &CleanedGroup,
        swap_path: &Path,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let first_base = group.replaced[0].0;
        self.disk.sync_dir(&self.dir)?;
        for (base, _) in &group.replaced {
            self.inactive.remove(base);
            delete_segment_files(&self.disk, &self.dir, *base)?;
        }
        self.disk.sync_dir(&self.dir)?;
        self.disk
            .rename(swap_path, &segment_file(&self.dir, first_base, LOG_SUFFIX))?;
        self.disk.sync_dir(&self.dir)?;
        let next_base = self
            .inactive
            .range(first_base + 1..)
            .next()
            .map_or(self.active.base_offset(), |(base, _)| *base);
        let (mut segment, _) =
            LogSegment::open(&self.disk, &self.dir, first_base, &self.config, now_ms)?;
        let recovered = segment.recover(&self.config, first_base, next_base)?;
        if recovered.truncated_bytes > 0 {
            // `write` checked every batch of the file, so this is a disk fault after the check.
            tracing::error!(dir = %self.dir.display(), first_base, truncated_bytes = recovered.truncated_bytes, "cleaned segment truncated on load");
        }
        // The new segment's aborted transactions: the ABORT markers it keeps whose batches went
        // in this round. (A crash before these are written loses nothing a reader needs: those
        // batches are gone.)
        segment.truncate_txn_index(first_base)?;
        for txn in &group.aborted_index {
            segment.append_aborted_txn(txn)?;
        }
        segment.flush_indexes()?;
        self.inactive.insert(first_base, segment);
        Ok(())
    }
}
