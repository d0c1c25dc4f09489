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
//! Only steps 1 and 4 hold the partition's lock (`plan_cleaning`, `finish_cleaning`); the reads
//! and writes of steps 2 and 3 (`CleaningRound::write`) work on the inactive segments' open
//! files, whose bytes never change. If the segments changed meanwhile (retention or
//! DeleteRecords deleted one), the round's output is discarded and the next pass starts again.
//!
//! Every source batch's CRC is checked before it is used, and the written file is checked whole
//! before it replaces anything: a round never turns one bad batch into a truncated group.
//!
//! Not here: when rounds run and where the first dirty offset is remembered (`LogManager`), and
//! transactions (sluice stores no transactional batches; control batches are kept as they are).

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{self, BatchHeader, RECORD_BATCH_OVERHEAD};
use super::compression::compress;
use super::records::{for_each_record, records_of};
use super::scan::{BatchScanner, ScanStep, RECOVERY_CHUNK_BYTES};
use super::segment::{delete_segment_files, segment_file, LogSegment, LOG_SUFFIX};
use super::{LogError, PartitionLog};

const CLEANED_SUFFIX: &str = ".log.cleaned";
const SWAP_SUFFIX: &str = ".log.swap";

/// What a round counts against `log.cleaner.dedupe.buffer.size` for each distinct key, beside
/// the key's bytes: the table slot (key handle, offset, control byte) at the table's lowest
/// load, and the allocator's share of the key's own allocation, which is at least 32 bytes.
const MAP_ENTRY_OVERHEAD_BYTES: u64 = 96;
const MIN_KEY_ALLOCATION_BYTES: u64 = 32;

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
    /// The last offsets of the live idempotent producers' last batches, which stay even when
    /// emptied.
    producer_last_offsets: HashSet<i64>,
    now_ms: i64,
    segments_before: usize,
    bytes_before: u64,
}

/// A written round: fsynced and checked `.log.cleaned` files, one per group of old segments.
/// Dropping it deletes whatever was not swapped in.
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
    records_removed: u64,
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

/// What filtering did to one batch.
enum Filtered {
    /// Every record kept and nothing to stamp: the batch is copied as it is.
    Unchanged,
    /// The batch rebuilt with the records kept.
    Rebuilt(Vec<u8>),
    /// No record kept: the header, to write as an empty batch where one must stay.
    Emptied([u8; RECORD_BATCH_OVERHEAD]),
}

impl PartitionLog {
    /// One whole round at once, holding `&mut self` throughout (with no idempotent producer to
    /// keep); see `plan_cleaning` for the steps and None.
    pub fn clean(
        &mut self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>, LogError> {
        let Some(round) = self.plan_cleaning(first_dirty_offset, config, HashSet::new(), now_ms)?
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
    /// batches (the producer state's), which stay in the log even when emptied.
    pub fn plan_cleaning(
        &self,
        first_dirty_offset: i64,
        config: &CleanerConfig,
        producer_last_offsets: HashSet<i64>,
        now_ms: i64,
    ) -> Result<Option<CleaningRound>, LogError> {
        let first_dirty = first_dirty_offset.max(self.log_start_offset);
        let first_uncleanable = self.first_uncleanable_offset(first_dirty, config, now_ms);
        if first_dirty >= first_uncleanable
            || !self.cleaning_due(first_dirty, first_uncleanable, config, now_ms)
        {
            return Ok(None);
        }
        let sources = self
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
        Ok(Some(CleaningRound {
            dir: self.dir.clone(),
            first_dirty,
            segment_bytes: self.config.segment_bytes,
            sources,
            config: *config,
            producer_last_offsets,
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
        let recovered = segment.recover(&self.config, first_base, next_base)?;
        if recovered.truncated_bytes > 0 {
            // `write` checked every batch of the file, so this is a disk fault after the check.
            tracing::error!(dir = %self.dir.display(), first_base, truncated_bytes = recovered.truncated_bytes, "cleaned segment truncated on load");
        }
        segment.flush_indexes()?;
        self.inactive.insert(first_base, segment);
        Ok(())
    }
}

impl CleaningRound {
    /// Steps 2 and 3, without the partition's lock: the key map, then each group's
    /// `.log.cleaned` file, fsynced and checked. None when the map covers nothing.
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
            // Created new (a leftover means another round is writing), and registered before
            // it is written, so that a failure deletes the partial file too.
            let file = File::options()
                .write(true)
                .create_new(true)
                .open(&cleaned_path)?;
            cleaned.groups.push(CleanedGroup {
                replaced: group
                    .iter()
                    .map(|s| (s.base_offset, s.size_bytes))
                    .collect(),
                cleaned_path: cleaned_path.clone(),
                records_removed: 0,
            });
            let removed = self.write_group(&group, &map, file)?;
            check_written(
                &cleaned_path,
                group[0].base_offset,
                group_end_offset(&group),
            )?;
            cleaned.records_removed += removed;
            if let Some(last) = cleaned.groups.last_mut() {
                last.records_removed = removed;
            }
        }
        Ok(Some(cleaned))
    }

    /// Each key's last offset from the first dirty offset on. A batch whose new keys would take
    /// the map past `dedupe_buffer_bytes` ends it (unless the map is still empty), so the map
    /// never holds more than that.
    fn build_offset_map(&self) -> Result<OffsetMap, LogError> {
        let first_dirty = self.first_dirty;
        let mut map = OffsetMap {
            latest: HashMap::new(),
            end_offset: first_dirty,
        };
        let mut map_bytes = 0u64;
        let cost = |key: &[u8]| {
            (key.len() as u64).max(MIN_KEY_ALLOCATION_BYTES) + MAP_ENTRY_OVERHEAD_BYTES
        };
        let mut full = false;
        for source in self.sources.iter().filter(|s| s.end_offset > first_dirty) {
            for_each_batch(
                &source.file,
                source.size_bytes,
                &source.path,
                |header, bytes| {
                    if full || header.last_offset() < first_dirty {
                        return Ok(());
                    }
                    if !header.is_control() {
                        let records = records_of(header, bytes)?;
                        // What the batch would add, before adding any of it.
                        let mut added_bytes = 0u64;
                        for_each_record(header, &records, |record| {
                            if let Some(key) = record.key.filter(|_| record.offset >= first_dirty) {
                                if !map.latest.contains_key(key) {
                                    added_bytes += cost(key);
                                }
                            }
                        })?;
                        if map_bytes + added_bytes > self.config.dedupe_buffer_bytes
                            && !map.latest.is_empty()
                        {
                            full = true;
                            return Ok(());
                        }
                        for_each_record(header, &records, |record| {
                            if let Some(key) = record.key.filter(|_| record.offset >= first_dirty) {
                                match map.latest.get_mut(key) {
                                    Some(last) => *last = record.offset,
                                    None => {
                                        map_bytes += cost(key);
                                        map.latest.insert(key.to_vec(), record.offset);
                                    }
                                }
                            }
                        })?;
                    }
                    map.end_offset = header.last_offset() + 1;
                    Ok(())
                },
            )?;
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

    /// Writes one group's kept batches to `file` and fsyncs it; returns the records removed.
    fn write_group(
        &self,
        group: &[&SourceSegment],
        map: &OffsetMap,
        file: File,
    ) -> Result<u64, LogError> {
        let mut removed = 0u64;
        let mut writer = BufWriter::new(file);
        // The group's last batch when it was dropped: written empty at the end.
        let mut dropped_last: Option<[u8; RECORD_BATCH_OVERHEAD]> = None;
        for source in group {
            for_each_batch(
                &source.file,
                source.size_bytes,
                &source.path,
                |header, bytes| {
                    let (filtered, dropped_records) = self.filter_batch(header, bytes, map)?;
                    removed += dropped_records;
                    dropped_last = None;
                    match filtered {
                        Filtered::Unchanged => writer.write_all(bytes)?,
                        Filtered::Rebuilt(batch) => writer.write_all(&batch)?,
                        Filtered::Emptied(head) => {
                            let producer_last = header.producer_id >= 0
                                && self.producer_last_offsets.contains(&header.last_offset());
                            if producer_last {
                                writer.write_all(&empty_batch(head))?;
                            } else {
                                dropped_last = Some(head);
                            }
                        }
                    }
                    Ok(())
                },
            )?;
        }
        if let Some(head) = dropped_last {
            writer.write_all(&empty_batch(head))?;
        }
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(removed)
    }

    /// The batch with only the records the map keeps, and how many records were dropped. A
    /// record at or past the map's end is always kept; below it, a record is kept when it has a
    /// key, no later record of that key lies below the map's end, and it is not a tombstone
    /// past its batch's delete horizon. A kept tombstone in a batch without a horizon gets one.
    fn filter_batch(
        &self,
        header: &BatchHeader,
        bytes: &[u8],
        map: &OffsetMap,
    ) -> Result<(Filtered, u64), LogError> {
        if header.is_control() {
            return Ok((Filtered::Unchanged, 0));
        }
        let horizon = header.delete_horizon_ms();
        let tombstones_expire = horizon.is_some_and(|h| self.now_ms >= h);
        let records = records_of(header, bytes)?;
        let mut kept = Vec::new();
        let (mut dropped, mut kept_tombstone) = (0u64, false);
        for_each_record(header, &records, |record| {
            let keep = record.offset >= map.end_offset
                || record.key.is_some_and(|key| {
                    map.latest
                        .get(key)
                        .is_none_or(|last| record.offset >= *last)
                        && !(record.is_tombstone && tombstones_expire)
                });
            if keep {
                kept_tombstone |= record.is_tombstone;
                kept.push((record.offset, record.timestamp_delta, record.bytes.len()));
            } else {
                dropped += 1;
            }
        })?;
        let stamp_horizon = kept_tombstone && horizon.is_none();
        if dropped == 0 && !stamp_horizon {
            return Ok((Filtered::Unchanged, 0));
        }
        let mut head = [0u8; RECORD_BATCH_OVERHEAD];
        head.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
        if kept.is_empty() {
            return Ok((Filtered::Emptied(head), dropped));
        }
        // The kept records, their bytes as they were or, under a new horizon, with each
        // timestamp delta re-encoded so that every record keeps its timestamp.
        let new_base = if stamp_horizon {
            self.now_ms.saturating_add(self.config.delete_retention_ms)
        } else {
            header.base_timestamp
        };
        let kept_offsets: HashSet<i64> = kept.iter().map(|(offset, _, _)| *offset).collect();
        let mut body = Vec::with_capacity(kept.iter().map(|(_, _, len)| len + 10).sum());
        let mut max_timestamp = i64::MIN;
        for_each_record(header, &records, |record| {
            if !kept_offsets.contains(&record.offset) {
                return;
            }
            let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
            max_timestamp = max_timestamp.max(timestamp);
            if stamp_horizon {
                record.write_with_timestamp_delta(&mut body, timestamp.wrapping_sub(new_base));
            } else {
                body.extend_from_slice(record.bytes);
            }
        })?;
        batch::set_records_count(&mut head, kept.len() as i32);
        if stamp_horizon {
            batch::set_delete_horizon(&mut head, new_base);
        }
        if !header.timestamp_type_is_log_append() {
            // Kafka's rebuilt batches carry the largest timestamp of the records they keep.
            batch::set_max_timestamp(&mut head, max_timestamp);
        }
        let codec = header.compression();
        let compressed = compress(codec, &body, None)?;
        Ok((
            Filtered::Rebuilt(batch::with_records(&head, &compressed, codec)),
            dropped,
        ))
    }
}

/// One past the greatest offset a group's segments can hold.
fn group_end_offset(group: &[&SourceSegment]) -> i64 {
    group.last().map_or(0, |s| s.end_offset)
}

/// A batch with the header `head` and no records (codec none): what a cleaned log keeps of an
/// emptied batch whose offsets or producer sequence must stay.
fn empty_batch(mut head: [u8; RECORD_BATCH_OVERHEAD]) -> Vec<u8> {
    batch::set_records_count(&mut head, 0);
    batch::with_records(&head, &[], 0)
}

/// Reads the written file back: whole batches, valid CRCs, offsets increasing from `base` and
/// below `end`. A round never swaps in a file that recovery would truncate.
fn check_written(path: &Path, base: i64, end: i64) -> Result<(), LogError> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut next = base;
    for_each_batch(&file, size, path, |header, _| {
        if header.base_offset < next || header.last_offset() >= end {
            return Err(LogError::Corrupt(format!(
                "{}: batch at offset {} out of place in [{next}, {end})",
                path.display(),
                header.base_offset
            )));
        }
        next = header.last_offset() + 1;
        Ok(())
    })
}

/// Calls `visit(header, batch bytes)` for each whole batch of the first `size` bytes of `file`,
/// in order, after checking its CRC-32C. Anything else stops the round: a round never copies a
/// bad batch, or re-encodes one under a fresh, valid CRC.
fn for_each_batch(
    file: &File,
    size: u64,
    path: &Path,
    mut visit: impl FnMut(&BatchHeader, &[u8]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let mut scanner = BatchScanner::new(file, 0, size, RECOVERY_CHUNK_BYTES);
    loop {
        match scanner.next_header()? {
            ScanStep::Batch { position, header } => {
                let bytes = scanner.read_batch(position, &header)?;
                if !batch::crc_is_valid(&bytes) {
                    return Err(LogError::Corrupt(format!(
                        "{}: CRC mismatch at {position}; not cleaning it",
                        path.display()
                    )));
                }
                visit(&header, &bytes)?;
            }
            ScanStep::End => return Ok(()),
            ScanStep::Torn { position } | ScanStep::Corrupt { position, .. } => {
                return Err(LogError::Corrupt(format!(
                    "{}: no whole batch at {position}; not cleaning it",
                    path.display()
                )))
            }
        }
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
