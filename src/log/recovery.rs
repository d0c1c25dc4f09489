//! Loading a partition directory, Kafka's `LogLoader` in small: temporary files are resolved,
//! orphan indexes removed, segments opened in offset order with their indexes checked, and after
//! an unclean shutdown every segment from the one holding the recovery point onwards is
//! re-validated batch by batch, truncated at the first bad byte, with everything after it deleted.
//!
//! The principle: an index is never trusted blindly. After a clean shutdown indexes are checked
//! and rebuilt when in doubt; after a crash the tail's indexes are always rebuilt, because an
//! untrimmed preallocated index reads as a full file of zero entries.

use std::collections::{BTreeMap, BTreeSet};

use std::path::Path;

use super::scan::{BatchScanner, ScanStep, LOOKUP_CHUNK_BYTES};
use super::segment::{
    delete_segment_files, segment_file, LogSegment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
};
use super::{LogConfig, LogError, OpenOptions};
use crate::disk::Disk;

use crate::disk::names::{offset_of_file, CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX};

pub(super) struct Loaded {
    pub(super) inactive: BTreeMap<i64, LogSegment>,
    pub(super) active: LogSegment,
    pub(super) log_start_offset: i64,
    pub(super) log_end_offset: i64,
    pub(super) recovery_point: i64,
    /// The base offset of the first segment that was recovered (its batches re-validated), whose
    /// transaction index was emptied and must be rebuilt from the markers from there on.
    pub(super) txn_index_rebuild_from: Option<i64>,
}

pub(super) fn load(
    disk: &Disk,
    dir: &Path,
    config: &LogConfig,
    options: &OpenOptions,
    now_ms: i64,
) -> Result<Loaded, LogError> {
    disk.create_dir_all(dir)?;
    clean_temporary_files(disk, dir)?;
    let bases = segment_base_offsets(disk, dir)?;
    let (mut segments, mut log_end_offset, mut txn_index_rebuild_from) =
        load_segments(disk, dir, config, options, &bases, now_ms)?;
    let requested_start = options.log_start_offset.max(0);
    if segments.is_empty() || log_end_offset < requested_start {
        // Nothing on disk, or everything on disk lies below the checkpointed log start offset
        // (e.g. after DeleteRecords): start over at the log start offset, as Kafka does.
        for base in segments.keys() {
            delete_segment_files(disk, dir, *base)?;
        }
        segments.clear();
        segments.insert(
            requested_start,
            LogSegment::create(disk, dir, requested_start, config, now_ms)?,
        );
        log_end_offset = requested_start;
        txn_index_rebuild_from = None;
    }
    let Some((_, mut active)) = segments.pop_last() else {
        return Err(LogError::Corrupt("no segment after loading".to_string()));
    };
    active.ensure_writable(config)?;
    let first_base = segments
        .keys()
        .next()
        .copied()
        .unwrap_or(active.base_offset());
    let recovery_point = if options.clean_shutdown {
        log_end_offset
    } else {
        options.recovery_point.min(log_end_offset)
    };
    Ok(Loaded {
        inactive: segments,
        active,
        log_start_offset: requested_start.max(first_base),
        log_end_offset,
        recovery_point,
        txn_index_rebuild_from,
    })
}

/// The loaded segments by base offset, the log end offset, and the first segment recovered.
type LoadedSegments = (BTreeMap<i64, LogSegment>, i64, Option<i64>);

/// Opens every segment in order; returns them with the log end offset and the first segment
/// recovered, whose transaction index (and every later one's) was emptied: recovery re-reads
/// the segment's batches, and the partition's producer-state replay indexes the aborted
/// transactions again from there.
fn load_segments(
    disk: &Disk,
    dir: &Path,
    config: &LogConfig,
    options: &OpenOptions,
    bases: &[i64],
    now_ms: i64,
) -> Result<LoadedSegments, LogError> {
    // After a crash, recovery starts at the segment holding the recovery point (the first one
    // when the recovery point is below every base offset).
    let recover_from = (!options.clean_shutdown).then(|| {
        bases
            .iter()
            .rev()
            .find(|base| **base <= options.recovery_point)
            .or(bases.first())
            .copied()
            .unwrap_or(0)
    });
    let mut segments = BTreeMap::new();
    let mut next_offset = 0;
    let mut rebuild_from: Option<i64> = None;
    for (n, &base) in bases.iter().enumerate() {
        let next_offset_bound = bases.get(n + 1).copied().unwrap_or(i64::MAX);
        let is_last = n + 1 == bases.len();
        let (mut segment, rebuild_reason) = LogSegment::open(disk, dir, base, config, now_ms)?;
        if recover_from.is_some_and(|from| base >= from) {
            let min_base_offset = if segments.is_empty() {
                base
            } else {
                next_offset
            };
            let recovered = segment.recover(config, min_base_offset, next_offset_bound)?;
            next_offset = recovered.next_offset;
            rebuild_from.get_or_insert(base);
            segments.insert(base, segment);
            if recovered.truncated_bytes > 0 && !is_last {
                // The valid log ends inside this segment; later segments cannot be trusted to
                // continue it.
                for later in &bases[n + 1..] {
                    tracing::warn!(dir = %dir.display(), base_offset = later, "deleting segment after a truncated one");
                    delete_segment_files(disk, dir, *later)?;
                }
                break;
            }
            continue;
        }
        let checked = check_or_rebuild(
            &mut segment,
            config,
            rebuild_reason,
            is_last,
            next_offset_bound,
        )?;
        next_offset = checked.next_offset;
        if checked.recovered {
            rebuild_from.get_or_insert(base);
        }
        segments.insert(base, segment);
    }
    // A recovered segment's transaction index, and every later one's, is rebuilt from the
    // markers: the producer-state replay after loading starts no later than the first.
    if let Some(from) = rebuild_from {
        for segment in segments.range_mut(from..).map(|(_, s)| s) {
            segment.truncate_txn_index(segment.base_offset())?;
        }
    }
    Ok((segments, next_offset, rebuild_from))
}

/// What `check_or_rebuild` did to a segment.
struct Checked {
    /// The segment's next offset when it is the last (its base offset otherwise).
    next_offset: i64,
    /// Its indexes had to be rebuilt from its batches.
    recovered: bool,
}

/// Outside the recovery range: trusts a segment's indexes only if they pass the sanity checks
/// (and, for the last segment, if the batches after the last index entry end exactly at the end
/// of the file); otherwise rebuilds them.
fn check_or_rebuild(
    segment: &mut LogSegment,
    config: &LogConfig,
    rebuild_reason: Option<String>,
    is_last: bool,
    next_offset_bound: i64,
) -> Result<Checked, LogError> {
    let mut reason = rebuild_reason.or_else(|| segment.sanity_check(next_offset_bound).err());
    let trusted = |next_offset| Checked {
        next_offset,
        recovered: false,
    };
    if reason.is_none() {
        match segment.load_state(is_last)? {
            Some(tail) if tail.reached_end => return Ok(trusted(tail.next_offset)),
            Some(_) => reason = Some("the log does not end on a whole batch".to_string()),
            None => return Ok(trusted(segment.base_offset())),
        }
    }
    let reason = reason.unwrap_or_default();
    tracing::warn!(path = %segment.log_path().display(), %reason, "rebuilding indexes");
    // Kafka keeps later segments when a segment outside the recovery range had to be repaired;
    // so do we, leaving at worst an offset gap that reads step over.
    let recovered = segment.recover(config, segment.base_offset(), next_offset_bound)?;
    Ok(Checked {
        next_offset: recovered.next_offset,
        recovered: true,
    })
}

/// Base offsets of the `.log` files, ascending. Index files without a `.log` are deleted.
fn segment_base_offsets(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = BTreeSet::new();
    let mut indexes = Vec::new();
    for entry in disk.list_dir(dir)? {
        let path = entry.path;
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        if let Some(base) = offset_of_file(name, LOG_SUFFIX) {
            logs.insert(base);
        } else if [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
            .iter()
            .any(|s| offset_of_file(name, s).is_some())
        {
            indexes.push(path);
        }
    }
    for path in indexes {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        let base = name
            .split('.')
            .next()
            .and_then(|stem| stem.parse::<i64>().ok());
        if base.is_some_and(|base| !logs.contains(&base)) {
            tracing::warn!(path = %path.display(), "deleting orphan index");
            disk.remove_file(&path)?;
        }
    }
    Ok(logs.into_iter().collect())
}

/// Kafka's temporary files: `*.deleted` (segments awaiting async deletion) and `*.cleaned`
/// (unfinished compaction output) are deleted. A `.swap` file is finished compaction or split
/// output whose swap-in was interrupted: swaps at or above the smallest `.cleaned` offset belong
/// to an interrupted split and are deleted; for the others the regular segments the swap replaces
/// are deleted and the swapped `.log` renamed into place (its indexes are rebuilt on load).
fn clean_temporary_files(disk: &Disk, dir: &Path) -> Result<(), LogError> {
    let mut swaps = Vec::new();
    let mut min_cleaned_base = i64::MAX;
    for entry in disk.list_dir(dir)? {
        let path = entry.path;
        let Some(name) = path
            .file_name()
            .and_then(|name| name.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if name.ends_with(DELETED_SUFFIX) {
            disk.remove_file(&path)?;
        } else if name.ends_with(CLEANED_SUFFIX) {
            if let Some(base) = name
                .split('.')
                .next()
                .and_then(|stem| stem.parse::<i64>().ok())
            {
                min_cleaned_base = min_cleaned_base.min(base);
            }
            disk.remove_file(&path)?;
        } else if name.ends_with(SWAP_SUFFIX) {
            swaps.push(path);
        }
    }
    for path in &swaps {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        let log_base = name
            .strip_suffix(SWAP_SUFFIX)
            .and_then(|inner| offset_of_file(inner, LOG_SUFFIX));
        match log_base {
            Some(base) if base < min_cleaned_base => swap_in(disk, dir, path, base)?,
            _ => {}
        }
    }
    // Index swaps, and log swaps of an interrupted split: indexes are rebuilt from the log.
    for path in swaps.iter().filter(|path| disk.exists(path)) {
        disk.remove_file(path)?;
    }
    Ok(())
}

/// Completes an interrupted swap: deletes the regular segments whose base offsets fall within
/// the swap segment's offsets, then renames `X.log.swap` to `X.log`.
fn swap_in(disk: &Disk, dir: &Path, swap_path: &Path, base: i64) -> Result<(), LogError> {
    let end = next_offset_of(disk, swap_path, base)?;
    for regular in segment_base_offsets(disk, dir)? {
        if regular >= base && regular < end.max(base + 1) {
            delete_segment_files(disk, dir, regular)?;
        }
    }
    tracing::warn!(path = %swap_path.display(), "completing an interrupted segment swap");
    disk.rename(swap_path, &segment_file(dir, base, LOG_SUFFIX))?;
    Ok(())
}

/// One past the last offset of the whole batches in a `.log`-format file.
fn next_offset_of(disk: &Disk, path: &Path, base: i64) -> Result<i64, LogError> {
    let file = disk.open_read(path)?;
    let len = crate::disk::file_len(&file)?;
    let mut scanner = BatchScanner::new(&file, 0, len, LOOKUP_CHUNK_BYTES);
    let mut next_offset = base;
    while let ScanStep::Batch { header, .. } = scanner.next_header().map_err(LogError::from)? {
        next_offset = header.last_offset() + 1;
    }
    Ok(next_offset)
}
