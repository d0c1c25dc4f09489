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
//! 4. A group is written to `<base>.log.cleaned`, fsynced, renamed `.log.swap`, the old segments'
//!    files deleted, and the swap renamed `<base>.log`; the directory is fsynced between steps.
//!    After a crash `recovery.rs` deletes a `.cleaned` file and completes a `.swap`.
//!
//! Not here: when rounds run and where the first dirty offset is remembered (`LogManager`), and
//! transactions (sluice stores no transactional batches; control batches are kept as they are).
//! Unlike Kafka (KIP-534), the tombstone horizon is the segment file's modification time, which a
//! rewrite carries over from the newest source segment, rather than a horizon stamped into the
//! batch on its first cleaning.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::time::UNIX_EPOCH;

use super::batch::{self, BatchHeader, RECORD_BATCH_OVERHEAD};
use super::compression::compress;
use super::records::{for_each_record, records_of};
use super::scan::{ScanStep, RECOVERY_CHUNK_BYTES};
use super::segment::{delete_segment_files, segment_file, LogSegment, LOG_SUFFIX};
use super::{LogError, PartitionLog};

const CLEANED_SUFFIX: &str = ".log.cleaned";
const SWAP_SUFFIX: &str = ".log.swap";

/// What a round counts against `log.cleaner.dedupe.buffer.size` for each distinct key, beside
/// the key's bytes: the map entry, the offset and the key's heap allocation.
const MAP_ENTRY_OVERHEAD_BYTES: u64 = 48;

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
    /// One cleaning round (see the module comment), or None when the log is not due: nothing
    /// dirty below the first uncleanable offset, or a dirty ratio at or below the setting with no
    /// segment past `max.compaction.lag.ms`. Offsets, the log start and end offsets and the
    /// recovery point do not change; reads during and after see every kept record where it was.
    pub fn clean(
        &mut self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>, LogError> {
        let first_dirty = first_dirty_offset.max(self.log_start_offset);
        let first_uncleanable = self.first_uncleanable_offset(config, now_ms)?;
        if first_dirty >= first_uncleanable
            || !self.cleaning_due(first_dirty, first_uncleanable, config, now_ms)?
        {
            return Ok(None);
        }
        let map = self.build_offset_map(first_dirty, first_uncleanable, config)?;
        if map.end_offset <= first_dirty {
            return Ok(None);
        }
        let segments_before = self.inactive.len() + 1;
        let bytes_before = self.size_bytes();
        let mut records_removed = 0;
        for group in self.groups_below(map.end_offset) {
            records_removed += self.clean_group(&group, &map, config, now_ms)?;
        }
        let outcome = CleanOutcome {
            next_dirty_offset: map.end_offset,
            segments_before,
            segments_after: self.inactive.len() + 1,
            bytes_before,
            bytes_after: self.size_bytes(),
            records_removed,
        };
        tracing::info!(dir = %self.dir.display(), ?outcome, "cleaned log");
        Ok(Some(outcome))
    }

    /// The active segment's base offset, or the base of the first segment holding a record newer
    /// than `min.compaction.lag.ms` when that comes first.
    fn first_uncleanable_offset(
        &self,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        let active_base = self.active.base_offset();
        if config.min_compaction_lag_ms <= 0 {
            return Ok(active_base);
        }
        for (base, segment) in &self.inactive {
            let (largest_timestamp, _) = segment.max_timestamp_and_offset();
            if now_ms.saturating_sub(largest_timestamp) < config.min_compaction_lag_ms {
                return Ok(*base);
            }
        }
        Ok(active_base)
    }

    fn cleaning_due(
        &self,
        first_dirty: i64,
        first_uncleanable: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<bool, LogError> {
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
        let total_bytes = clean_bytes + dirty_bytes;
        let ratio = if total_bytes == 0 {
            0.0
        } else {
            dirty_bytes as f64 / total_bytes as f64
        };
        Ok(dirty_bytes > 0 && (overdue || ratio > config.min_cleanable_dirty_ratio))
    }

    /// Each key's last offset in [first_dirty, first_uncleanable), stopping after the batch that
    /// takes the map past `dedupe_buffer_bytes`.
    fn build_offset_map(
        &self,
        first_dirty: i64,
        first_uncleanable: i64,
        config: &CleanerConfig,
    ) -> Result<OffsetMap, LogError> {
        let mut map = OffsetMap {
            latest: HashMap::new(),
            end_offset: first_dirty,
        };
        let mut map_bytes = 0u64;
        let dirty: Vec<&LogSegment> = self
            .segments_from(first_dirty)
            .filter(|segment| segment.base_offset() < first_uncleanable)
            .collect();
        for segment in dirty {
            let mut full = false;
            for_each_batch(segment, |header, bytes| {
                if full || header.last_offset() < first_dirty {
                    return Ok(());
                }
                if !header.is_control() {
                    let records = records_of(header, bytes)?;
                    for_each_record(header, &records, |record| {
                        let Some(key) = record.key else { return };
                        if record.offset < first_dirty {
                            return;
                        }
                        match map.latest.get_mut(key) {
                            Some(last) => *last = record.offset,
                            None => {
                                map_bytes += key.len() as u64 + MAP_ENTRY_OVERHEAD_BYTES;
                                map.latest.insert(key.to_vec(), record.offset);
                            }
                        }
                    })?;
                }
                map.end_offset = header.last_offset() + 1;
                full = map_bytes > config.dedupe_buffer_bytes;
                Ok(())
            })?;
            if full {
                tracing::info!(dir = %self.dir.display(), end_offset = map.end_offset, "the cleaner's key map is full; this round cleans up to there");
                break;
            }
        }
        Ok(map)
    }

    /// The inactive segments with base offsets below `end_offset`, from the first, in runs whose
    /// sizes add up to at most `segment.bytes` and whose offsets fit one segment's relative
    /// offsets: each run becomes one segment.
    fn groups_below(&self, end_offset: i64) -> Vec<Vec<i64>> {
        let mut groups: Vec<Vec<i64>> = Vec::new();
        let mut group_bytes = 0u64;
        for (base, segment) in self.inactive.range(..end_offset) {
            let last_offset = self.segment_end_offset(segment) - 1;
            let fits = groups.last().is_some_and(|group| {
                group_bytes + segment.size_bytes() <= self.config.segment_bytes
                    && last_offset - group[0] <= i64::from(i32::MAX)
            });
            if fits {
                group_bytes += segment.size_bytes();
                groups.last_mut().expect("fits implies a group").push(*base);
            } else {
                group_bytes = segment.size_bytes();
                groups.push(vec![*base]);
            }
        }
        groups
    }

    /// Rewrites the segments at `bases` (consecutive, inactive) into one and swaps it in.
    /// Returns the records removed.
    fn clean_group(
        &mut self,
        bases: &[i64],
        map: &OffsetMap,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<u64, LogError> {
        let first_base = bases[0];
        let cleaned_path = segment_file(&self.dir, first_base, CLEANED_SUFFIX);
        let swap_path = segment_file(&self.dir, first_base, SWAP_SUFFIX);
        let mut newest_modified = UNIX_EPOCH;
        let mut removed = 0u64;
        let mut writer = BufWriter::new(File::create(&cleaned_path)?);
        // The group's last batch when it was dropped: written empty at the end.
        let mut dropped_last: Option<[u8; RECORD_BATCH_OVERHEAD]> = None;
        for base in bases {
            let segment = &self.inactive[base];
            let modified = fs::metadata(segment.log_path())?.modified()?;
            newest_modified = newest_modified.max(modified);
            let modified_ms = modified
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let keep_tombstones = now_ms.saturating_sub(modified_ms) <= config.delete_retention_ms;
            for_each_batch(segment, |header, bytes| {
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
        file.set_modified(newest_modified.max(UNIX_EPOCH))?;
        file.sync_all()?;
        drop(file);
        fs::rename(&cleaned_path, &swap_path)?;
        sync_dir(&self.dir)?;
        for base in bases {
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
    segment: &LogSegment,
    mut visit: impl FnMut(&BatchHeader, &[u8]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let mut scanner = segment.scanner(0, RECOVERY_CHUNK_BYTES);
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
                    segment.log_path().display()
                )))
            }
        }
    }
}

fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
