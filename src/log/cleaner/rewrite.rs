//! Steps 2 and 3 of a cleaning round, without the partition's lock: the key map over the dirty
//! range, the groups of old segments, each group's kept batches written to `<base>.log.cleaned`
//! and read back whole. Which records a batch keeps, and how a batch is rebuilt (fewer records,
//! a KIP-534 delete horizon, an empty batch where one must stay), are decided here.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::txn::TxnTracker;
use super::{CleanedGroup, CleanedRound, CleaningRound, SourceSegment};
use crate::disk::names::{with_suffix, CLEANED_SUFFIX, LOG_SUFFIX};
use crate::disk::{Disk, File, SequentialWriter};
use crate::log::scan::{BatchScanner, ScanStep, RECOVERY_CHUNK_BYTES};
use crate::log::segment::segment_file;
use crate::log::LogError;
use crate::record_batch::compression::compress;
use crate::record_batch::control::parse_marker;
use crate::record_batch::header::{self, BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::record_batch::records::{for_each_record, records_of};

/// What a round counts against `log.cleaner.dedupe.buffer.size` for each distinct key, beside
/// the key's bytes: the table slot (key handle, offset, control byte) at the table's lowest
/// load, and the allocator's share of the key's own allocation, which is at least 32 bytes.
const MAP_ENTRY_OVERHEAD_BYTES: u64 = 96;
const MIN_KEY_ALLOCATION_BYTES: u64 = 32;

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

impl CleaningRound {
    /// Steps 2 and 3, without the partition's lock: the key map, then each group's
    /// `.log.cleaned` file, fsynced and checked. None when the map covers nothing.
    pub fn write(self) -> Result<Option<CleanedRound>, LogError> {
        let map = self.build_offset_map()?;
        if map.end_offset <= self.first_dirty {
            return Ok(None);
        }
        let mut cleaned = CleanedRound {
            disk: self.disk.clone(),
            groups: Vec::new(),
            next_dirty_offset: map.end_offset,
            segments_before: self.segments_before,
            bytes_before: self.bytes_before,
        };
        // One view of the transactions for the whole round, its groups in offset order: a
        // marker goes only when no batch of its transaction is left before it in the log.
        let start = self.sources.first().map_or(0, |s| s.base_offset);
        let end = self.sources.last().map_or(0, |s| s.end_offset);
        let mut txns = TxnTracker::new(&self.aborted, start, end);
        for group in self.groups_below(map.end_offset) {
            let cleaned_path = with_suffix(
                &segment_file(&self.dir, group[0].base_offset, LOG_SUFFIX),
                CLEANED_SUFFIX,
            );
            // Created new (a leftover means another round is writing), and registered before
            // it is written, so that a failure deletes the partial file too.
            let file = self.disk.create_new(&cleaned_path)?;
            cleaned.groups.push(CleanedGroup {
                replaced: group
                    .iter()
                    .map(|s| (s.base_offset, s.size_bytes))
                    .collect(),
                cleaned_path: cleaned_path.clone(),
                records_removed: 0,
                aborted_index: Vec::new(),
            });
            let removed = self.write_group(
                &group,
                &map,
                &mut txns,
                self.disk.sequential_writer(file, &cleaned_path),
            )?;
            check_written(
                &self.disk,
                &cleaned_path,
                group[0].base_offset,
                group_end_offset(&group),
            )?;
            if let Some(written) = cleaned.groups.last_mut() {
                written.records_removed = removed;
                written.aborted_index = std::mem::take(&mut txns.kept_index);
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
        let end = self.sources.last().map_or(first_dirty, |s| s.end_offset);
        let mut txns = TxnTracker::new(&self.aborted, first_dirty, end);
        for source in self.sources.iter().filter(|s| s.end_offset > first_dirty) {
            for_each_batch(
                &source.file,
                source.size_bytes,
                &source.path,
                |header, bytes| {
                    if full || header.last_offset() < first_dirty {
                        return Ok(());
                    }
                    // Markers and aborted transactions' records never enter the map.
                    let aborted = if header.is_control() {
                        txns.on_control(header, parse_marker(header, bytes)?);
                        true
                    } else {
                        txns.on_batch(header)
                    };
                    if !aborted {
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
        txns: &mut TxnTracker,
        file: SequentialWriter,
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
                    let (filtered, dropped_records) =
                        self.filter_batch(header, bytes, map, txns)?;
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
        txns: &mut TxnTracker,
    ) -> Result<(Filtered, u64), LogError> {
        let mut head = [0u8; RECORD_BATCH_OVERHEAD];
        head.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
        if header.is_control() {
            let may_go = txns.on_control(header, parse_marker(header, bytes)?);
            return self.filter_marker(header, bytes, head, may_go);
        }
        if txns.on_batch(header) {
            return Ok((Filtered::Emptied(head), header.records_count.max(0) as u64));
        }
        let horizon = header.delete_horizon_ms();
        let tombstones_expire = horizon.is_some_and(|h| self.now_ms >= h);
        let records = records_of(header, bytes)?;
        // Whether each record, in order, stays.
        let mut keeps = Vec::with_capacity(header.records_count.max(0) as usize);
        let mut kept_tombstone = false;
        for_each_record(header, &records, |record| {
            let keep = record.offset >= map.end_offset
                || record.key.is_some_and(|key| {
                    map.latest
                        .get(key)
                        .is_none_or(|last| record.offset >= *last)
                        && !(record.is_tombstone && tombstones_expire)
                });
            kept_tombstone |= keep && record.is_tombstone;
            keeps.push(keep);
        })?;
        let kept = keeps.iter().filter(|keep| **keep).count();
        let dropped = (keeps.len() - kept) as u64;
        let stamp_horizon = kept_tombstone && horizon.is_none();
        if dropped == 0 && !stamp_horizon {
            return Ok((Filtered::Unchanged, 0));
        }
        if kept == 0 {
            return Ok((Filtered::Emptied(head), dropped));
        }
        // The kept records, their bytes as they were or, under a new horizon, with each
        // timestamp delta re-encoded so that every record keeps its timestamp.
        let new_base = if stamp_horizon {
            self.now_ms.saturating_add(self.config.delete_retention_ms)
        } else {
            header.base_timestamp
        };
        let mut body = Vec::with_capacity(records.len());
        let mut max_timestamp = i64::MIN;
        let mut keeps = keeps.into_iter();
        for_each_record(header, &records, |record| {
            if keeps.next() != Some(true) {
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
        header::set_records_count(&mut head, kept as i32);
        if stamp_horizon {
            header::set_delete_horizon(&mut head, new_base);
        }
        if !header.timestamp_type_is_log_append() {
            // Kafka's rebuilt batches carry the largest timestamp of the records they keep.
            header::set_max_timestamp(&mut head, max_timestamp);
        }
        let codec = header.compression();
        let compressed = compress(codec, &body, None)?;
        Ok((
            Filtered::Rebuilt(header::with_records(&head, &compressed, codec)),
            dropped,
        ))
    }
}

impl CleaningRound {
    /// A marker that may go (`may_go`) goes once its batch's delete horizon has passed; before
    /// its first cleaning stamps one (KIP-534), it stays with the horizon stamped. Any other
    /// marker stays as it is.
    fn filter_marker(
        &self,
        header: &BatchHeader,
        bytes: &[u8],
        mut head: [u8; RECORD_BATCH_OVERHEAD],
        may_go: bool,
    ) -> Result<(Filtered, u64), LogError> {
        match header.delete_horizon_ms() {
            _ if !may_go || header.records_count <= 0 => Ok((Filtered::Unchanged, 0)),
            Some(horizon) if self.now_ms >= horizon => {
                Ok((Filtered::Emptied(head), header.records_count as u64))
            }
            Some(_) => Ok((Filtered::Unchanged, 0)),
            None => {
                let records = records_of(header, bytes)?;
                let horizon = self.now_ms.saturating_add(self.config.delete_retention_ms);
                let mut body = Vec::with_capacity(records.len());
                for_each_record(header, &records, |record| {
                    let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
                    record.write_with_timestamp_delta(&mut body, timestamp.wrapping_sub(horizon));
                })?;
                header::set_delete_horizon(&mut head, horizon);
                Ok((Filtered::Rebuilt(header::with_records(&head, &body, 0)), 0))
            }
        }
    }
}

/// One past the greatest offset a group's segments can hold.
fn group_end_offset(group: &[&SourceSegment]) -> i64 {
    group.last().map_or(0, |s| s.end_offset)
}

/// A batch with the header `head` and no records (codec none): what a cleaned log keeps of an
/// emptied batch whose offsets or producer sequence must stay.
fn empty_batch(mut head: [u8; RECORD_BATCH_OVERHEAD]) -> Vec<u8> {
    header::set_records_count(&mut head, 0);
    header::with_records(&head, &[], 0)
}

/// Reads the written file back: whole batches, valid CRCs, offsets increasing from `base` and
/// below `end`. A round never swaps in a file that recovery would truncate.
fn check_written(disk: &Disk, path: &Path, base: i64, end: i64) -> Result<(), LogError> {
    let file = disk.open_read(path)?;
    let size = crate::disk::file_len(&file)?;
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
                if !header::crc_is_valid(&bytes) {
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
