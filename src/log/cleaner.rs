//! Compaction, Kafka's log cleaner for one partition: keeps the last record of every key and
//! drops the older ones, so that a compacted topic (and `__consumer_offsets`) stays as large as
//! its set of live keys rather than its history.
//!
//! A round, as Kafka runs it (digest §4.3):
//! 1. The dirty range runs from the first dirty offset (the caller's `cleaner-offset-checkpoint`)
//!    to the first uncleanable offset: the active segment's base, or the first segment holding a
//!    record newer than `min.compaction.lag.ms`. The round runs when the dirty bytes exceed
//!    `min.cleanable.dirty.ratio` of the cleanable log, or when a dirty segment is older than
//!    `max.compaction.lag.ms`.
//! 2. A map from each key to its last offset is built from the dirty range, up to
//!    `log.cleaner.dedupe.buffer.size` bytes; the map's end bounds what this round may remove.
//! 3. Every segment from the start of the log up to the map's end is rewritten, in groups that fit
//!    `segment.bytes`, keeping a record when it has a key and no later record of that key lies
//!    below the map's end. A tombstone (null value) is kept while its segment's `.log` was
//!    modified less than `delete.retention.ms` ago, so that consumers have that long to see it.
//!    A batch keeps its base offset, last offset delta, producer fields and timestamps; a batch
//!    left with no records is dropped, except the group's last, which stays as an empty batch so
//!    that the rewritten segment still ends where the old ones did.
//! 4. A group is written to `<base>.log.cleaned` and fsynced; then, under the partition's lock
//!    again, renamed `.log.swap`, the old segments' files deleted, and the swap renamed
//!    `<base>.log`, with the directory fsynced between steps. After a crash `recovery.rs` deletes
//!    a `.cleaned` file and completes a `.swap`.
//!
//! Only steps 1 and 4 hold the partition's lock (`plan_cleaning`, `finish_cleaning`); the reads
//! and writes of steps 2 and 3 (`CleaningRound::write`) work on the inactive segments' open
//! files, whose bytes never change. If the segments changed meanwhile (retention or
//! DeleteRecords deleted one), the round's output is discarded and the next pass starts again.
//!
//! Not here: when rounds run and where the first dirty offset is remembered (`LogManager`), and
//! transactions (sluice stores no transactional batches; control batches are kept as they are).
//! Unlike Kafka (KIP-534), the tombstone horizon is the segment file's modification time, which a
//! rewrite carries over from the newest source segment, rather than a horizon stamped into the
//! batch on its first cleaning.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::batch::{self, BatchHeader, RECORD_BATCH_OVERHEAD};
use super::compression::compress;
use super::records::{for_each_record, records_of};
use super::scan::{BatchScanner, ScanStep, RECOVERY_CHUNK_BYTES};
use super::segment::{delete_segment_files, segment_file, LogSegment, LOG_SUFFIX};
use super::{LogError, PartitionLog};

const CLEANED_SUFFIX: &str = ".log.cleaned";
const SWAP_SUFFIX: &str = ".log.swap";

/// What a round counts against `log.cleaner.dedupe.buffer.size` for each distinct key, beside
/// the key's bytes: the table slot (key handle, offset, control byte) at the table's load, and
/// the allocator's header of the key's own allocation, which is at least 16 bytes.
const MAP_ENTRY_OVERHEAD_BYTES: u64 = 64;
const MIN_KEY_ALLOCATION_BYTES: u64 = 16;

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
    /// `delete.retention.ms`: how long a tombstone's segment keeps it after its last write.
    pub delete_retention_ms: i64,
    /// `log.cleaner.dedupe.buffer.size`: the most a round's key map may hold.
    pub dedupe_buffer_bytes: u64,
}

impl Default for CleanerConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        CleanerConfig {
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
            dedupe_buffer_bytes: 134_217_728,
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
    file: Arc<File>,
    path: PathBuf,
    modified: SystemTime,
}

/// A round planned under the partition's lock (`PartitionLog::plan_cleaning`), to be written
/// without it (`write`) and swapped in under it again (`PartitionLog::finish_cleaning`).
pub struct CleaningRound {
    dir: PathBuf,
    first_dirty: i64,
    segment_bytes: u64,
    /// Every inactive segment below the first uncleanable offset, in offset order.
    sources: Vec<SourceSegment>,
    config: CleanerConfig,
    now_ms: i64,
    segments_before: usize,
    bytes_before: u64,
}

/// A written round: fsynced `.log.cleaned` files, one per group of old segments. Dropping it
/// deletes whatever was not swapped in.
pub struct CleanedRound {
    groups: Vec<CleanedGroup>,
    next_dirty_offset: i64,
    records_removed: u64,
    segments_before: usize,
    bytes_before: u64,
}

struct CleanedGroup {
    /// (base offset, size) of the segments it replaces, which must still be there unchanged.
    replaced: Vec<(i64, u64)>,
    cleaned_path: PathBuf,
}

impl Drop for CleanedRound {
    fn drop(&mut self) {
        for group in &self.groups {
            // Swapped-in groups were renamed away: NotFound.
            let _ = fs::remove_file(&group.cleaned_path);
        }
    }
}

/// Each key's last offset in the dirty range, and where the map stops.
struct OffsetMap {
    latest: HashMap<Vec<u8>, i64>,
    /// One past the last offset the map covers: records at or above it are always kept.
    end_offset: i64,
}

impl OffsetMap {
    fn keeps(&self, offset: i64, key: &[u8]) -> bool {
        offset >= self.end_offset || self.latest.get(key).is_none_or(|last| offset >= *last)
    }
}

impl PartitionLog {
    /// One whole round at once, holding `&mut self` throughout; see `plan_cleaning` for the
    /// steps and None.
    pub fn clean(
        &mut self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>, LogError> {
        let Some(round) = self.plan_cleaning(first_dirty_offset, config, now_ms)? else {
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
    pub fn plan_cleaning(
        &self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<Option<CleaningRound>, LogError> {
        let first_dirty = first_dirty_offset.max(self.log_start_offset);
        let first_uncleanable = self.first_uncleanable_offset(config, now_ms);
        if first_dirty >= first_uncleanable
            || !self.cleaning_due(first_dirty, first_uncleanable, config, now_ms)
        {
            return Ok(None);
        }
        let mut sources = Vec::new();
        for (base, segment) in self.inactive.range(..first_uncleanable) {
            sources.push(SourceSegment {
                base_offset: *base,
                end_offset: self.segment_end_offset(segment),
                size_bytes: segment.size_bytes(),
                file: segment.log_file().clone(),
                path: segment.log_path().to_path_buf(),
                modified: fs::metadata(segment.log_path())?.modified()?,
            });
        }
        Ok(Some(CleaningRound {
            dir: self.dir.clone(),
            first_dirty,
            segment_bytes: self.config.segment_bytes,
            sources,
            config: *config,
            now_ms,
            segments_before: self.inactive.len() + 1,
            bytes_before: self.size_bytes(),
        }))
    }

    /// Step 4: swaps each written group in, unless a segment it replaces is gone or changed, in
    /// which case nothing is swapped, the output is deleted and the answer is None. Offsets, the
    /// log start and end offsets and the recovery point do not change; reads see every kept
    /// record where it was.
    pub fn finish_cleaning(
        &mut self,
        cleaned: CleanedRound,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>, LogError> {
        let unchanged = cleaned.groups.iter().all(|group| {
            group.replaced.iter().all(|(base, size)| {
                self.inactive
                    .get(base)
                    .is_some_and(|segment| segment.size_bytes() == *size)
            })
        });
        if !unchanged {
            tracing::info!(dir = %self.dir.display(), "segments changed while cleaning; the next pass starts again");
            return Ok(None);
        }
        for group in &cleaned.groups {
            self.swap_in(group, now_ms)?;
        }
        let outcome = CleanOutcome {
            next_dirty_offset: cleaned.next_dirty_offset,
            segments_before: cleaned.segments_before,
            segments_after: self.inactive.len() + 1,
            bytes_before: cleaned.bytes_before,
            bytes_after: self.size_bytes(),
            records_removed: cleaned.records_removed,
        };
        tracing::info!(dir = %self.dir.display(), ?outcome, "cleaned log");
        Ok(Some(outcome))
    }

    /// The active segment's base offset, or the base of the first segment holding a record newer
    /// than `min.compaction.lag.ms` when that comes first.
    fn first_uncleanable_offset(&self, config: &CleanerConfig, now_ms: i64) -> i64 {
        let active_base = self.active.base_offset();
        if config.min_compaction_lag_ms <= 0 {
            return active_base;
        }
        self.inactive
            .iter()
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
        let swap_path = segment_file(&self.dir, first_base, SWAP_SUFFIX);
        fs::rename(&group.cleaned_path, &swap_path)?;
        sync_dir(&self.dir)?;
        for (base, _) in &group.replaced {
            self.inactive.remove(base);
            delete_segment_files(&self.dir, *base)?;
        }
        sync_dir(&self.dir)?;
        fs::rename(&swap_path, segment_file(&self.dir, first_base, LOG_SUFFIX))?;
        sync_dir(&self.dir)?;
        let next_base = self
            .inactive
            .range(first_base + 1..)
            .next()
            .map_or(self.active.base_offset(), |(base, _)| *base);
        let (mut segment, _) = LogSegment::open(&self.dir, first_base, &self.config, now_ms)?;
        segment.recover(&self.config, first_base, next_base)?;
        segment.flush_indexes()?;
        self.inactive.insert(first_base, segment);
        Ok(())
    }
}

impl CleaningRound {
    /// Steps 2 and 3, without the partition's lock: the key map, then each group's
    /// `.log.cleaned` file, fsynced. None when the map covers nothing.
    pub fn write(self) -> Result<Option<CleanedRound>, LogError> {
        let map = self.build_offset_map()?;
        if map.end_offset <= self.first_dirty {
            return Ok(None);
        }
        let mut cleaned = CleanedRound {
            groups: Vec::new(),
            next_dirty_offset: map.end_offset,
            records_removed: 0,
            segments_before: self.segments_before,
            bytes_before: self.bytes_before,
        };
        for group in self.groups_below(map.end_offset) {
            let cleaned_path = segment_file(&self.dir, group[0].base_offset, CLEANED_SUFFIX);
            // Registered before writing, so that a failure deletes the partial file too.
            cleaned.groups.push(CleanedGroup {
                replaced: group
                    .iter()
                    .map(|s| (s.base_offset, s.size_bytes))
                    .collect(),
                cleaned_path: cleaned_path.clone(),
            });
            cleaned.records_removed += self.write_group(&group, &map, &cleaned_path)?;
        }
        Ok(Some(cleaned))
    }

    /// Each key's last offset from the first dirty offset on, stopping after the batch that
    /// takes the map past `dedupe_buffer_bytes`.
    fn build_offset_map(&self) -> Result<OffsetMap, LogError> {
        let first_dirty = self.first_dirty;
        let mut map = OffsetMap {
            latest: HashMap::new(),
            end_offset: first_dirty,
        };
        let mut map_bytes = 0u64;
        for source in self.sources.iter().filter(|s| s.end_offset > first_dirty) {
            let mut full = false;
            for_each_batch(source, |header, bytes| {
                if full || header.last_offset() < first_dirty {
                    return Ok(());
                }
                if !header.is_control() {
                    let records = records_of(header, bytes)?;
                    for_each_record(header, &records, |record| {
                        let Some(key) = record.key.filter(|_| record.offset >= first_dirty) else {
                            return;
                        };
                        match map.latest.get_mut(key) {
                            Some(last) => *last = record.offset,
                            None => {
                                map_bytes += (key.len() as u64).max(MIN_KEY_ALLOCATION_BYTES)
                                    + MAP_ENTRY_OVERHEAD_BYTES;
                                map.latest.insert(key.to_vec(), record.offset);
                            }
                        }
                    })?;
                }
                map.end_offset = header.last_offset() + 1;
                full = map_bytes > self.config.dedupe_buffer_bytes;
                Ok(())
            })?;
            if full {
                tracing::info!(dir = %self.dir.display(), end_offset = map.end_offset, "the cleaner's key map is full; this round cleans up to there");
                break;
            }
        }
        Ok(map)
    }

    /// The segments with base offsets below `end_offset`, from the first, in runs whose sizes
    /// add up to at most `segment.bytes` and whose offsets fit one segment's relative offsets:
    /// each run becomes one segment.
    fn groups_below(&self, end_offset: i64) -> Vec<Vec<&SourceSegment>> {
        let mut groups: Vec<Vec<&SourceSegment>> = Vec::new();
        let mut group_bytes = 0u64;
        for source in self.sources.iter().filter(|s| s.base_offset < end_offset) {
            let fits = groups.last().is_some_and(|group| {
                group_bytes + source.size_bytes <= self.segment_bytes
                    && source.end_offset - 1 - group[0].base_offset <= i64::from(i32::MAX)
            });
            if fits {
                group_bytes += source.size_bytes;
                groups
                    .last_mut()
                    .expect("fits implies a group")
                    .push(source);
            } else {
                group_bytes = source.size_bytes;
                groups.push(vec![source]);
            }
        }
        groups
    }

    /// Writes one group's kept batches to `path` and fsyncs it; returns the records removed.
    fn write_group(
        &self,
        group: &[&SourceSegment],
        map: &OffsetMap,
        path: &Path,
    ) -> Result<u64, LogError> {
        let mut removed = 0u64;
        let mut writer = BufWriter::new(File::create(path)?);
        // The group's last batch when it was dropped: written empty at the end.
        let mut dropped_last: Option<[u8; RECORD_BATCH_OVERHEAD]> = None;
        for source in group {
            let modified_ms = source
                .modified
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let keep_tombstones =
                self.now_ms.saturating_sub(modified_ms) <= self.config.delete_retention_ms;
            for_each_batch(source, |header, bytes| {
                let (kept, dropped_records) = filter_batch(header, bytes, map, keep_tombstones)?;
                removed += dropped_records;
                match kept {
                    Some(batch) => {
                        writer.write_all(&batch)?;
                        dropped_last = None;
                    }
                    None => {
                        let mut head = [0u8; RECORD_BATCH_OVERHEAD];
                        head.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
                        dropped_last = Some(head);
                    }
                }
                Ok(())
            })?;
        }
        if let Some(mut head) = dropped_last {
            batch::set_records_count(&mut head, 0);
            writer.write_all(&batch::with_records(&head, &[], 0))?;
        }
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        // The newest source's time, so cleaning again never extends a tombstone's life.
        let newest = group.iter().map(|s| s.modified).max().unwrap_or(UNIX_EPOCH);
        file.set_modified(newest)?;
        file.sync_all()?;
        Ok(removed)
    }
}

/// The batch with only the records the map keeps (the same bytes when it keeps them all), or
/// None when it keeps none; and how many records were dropped.
fn filter_batch(
    header: &BatchHeader,
    bytes: &[u8],
    map: &OffsetMap,
    keep_tombstones: bool,
) -> Result<(Option<Vec<u8>>, u64), LogError> {
    if header.is_control() {
        return Ok((Some(bytes.to_vec()), 0));
    }
    let records = records_of(header, bytes)?;
    let mut kept = Vec::with_capacity(records.len());
    let (mut kept_count, mut dropped) = (0i32, 0u64);
    for_each_record(header, &records, |record| {
        let keep = record.key.is_some_and(|key| map.keeps(record.offset, key))
            && (keep_tombstones || !record.is_tombstone);
        if keep {
            kept.extend_from_slice(record.bytes);
            kept_count += 1;
        } else {
            dropped += 1;
        }
    })?;
    if dropped == 0 {
        return Ok((Some(bytes.to_vec()), 0));
    }
    if kept_count == 0 {
        return Ok((None, dropped));
    }
    let codec = header.compression();
    let body = compress(codec, &kept, None)?;
    let mut head = [0u8; RECORD_BATCH_OVERHEAD];
    head.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
    batch::set_records_count(&mut head, kept_count);
    Ok((Some(batch::with_records(&head, &body, codec)), dropped))
}

/// Calls `visit(header, batch bytes)` for each whole batch of the segment, in order. A segment
/// that is not whole batches to its size is corrupt: the round stops rather than guess.
fn for_each_batch(
    source: &SourceSegment,
    mut visit: impl FnMut(&BatchHeader, &[u8]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let mut scanner = BatchScanner::new(&source.file, 0, source.size_bytes, RECOVERY_CHUNK_BYTES);
    loop {
        match scanner.next_header()? {
            ScanStep::Batch { position, header } => {
                let bytes = scanner.read_batch(position, &header)?;
                visit(&header, &bytes)?;
            }
            ScanStep::End => return Ok(()),
            ScanStep::Torn { position } | ScanStep::Corrupt { position, .. } => {
                return Err(LogError::Corrupt(format!(
                    "{}: no whole batch at {position}; not cleaning it",
                    source.path.display()
                )))
            }
        }
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
