//! One segment: a `.log` file of batches starting at the segment's base offset, with its sparse
//! `.index` and `.timeindex`, and the in-memory facts Kafka keeps beside them (size, max timestamp
//! so far, the timestamp that drives time-based rolling, bytes since the last index entry).
//!
//! The segment owns Kafka's per-segment rules: when an index entry is due, when the segment should
//! roll, what becoming inactive means (final time-index entry, trimmed indexes), how to rebuild
//! the indexes from the log while validating every batch, and the sanity checks that decide
//! whether existing indexes can be trusted. Which segments exist, and offsets across segments, are
//! the partition log's business.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::offset_index::OffsetIndex;
use super::scan::{BatchScanner, ScanStep, LOOKUP_CHUNK_BYTES};
use super::time_index::{TimeIndex, NO_TIMESTAMP};
use super::txn_index::TransactionIndex;
use super::{LogConfig, LogError};
use crate::disk::{self, Disk, File};
use crate::record_batch::header::BatchHeader;

mod recovery;
mod txn;

pub(super) use crate::disk::names::{
    offset_file as segment_file, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};

/// Removes every file of the segment at `base_offset`; missing files are fine.
pub(super) fn delete_segment_files(disk: &Disk, dir: &Path, base_offset: i64) -> io::Result<()> {
    for suffix in [
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
        LOG_SUFFIX,
    ] {
        disk.remove_file_if_exists(&segment_file(dir, base_offset, suffix))?;
    }
    Ok(())
}

/// A byte range of a segment's `.log`, fixed under the partition's lock: only whole appended
/// bytes, never beyond the segment's size at that moment. A segment's bytes never change once
/// appended (recovery truncates only before the log is served), so the range can be read or
/// sent later without the lock. The handle keeps the file open, so a segment that retention or
/// topic deletion removes meanwhile stays readable until the slice is dropped.
#[derive(Clone, Debug)]
pub struct SegmentSlice {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl SegmentSlice {
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Where the range starts in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the range into memory.
    pub fn read_to_vec(&self) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.len];
        self.file.read_exact_at(&mut bytes, self.position)?;
        Ok(bytes)
    }
}

/// What a rebuild found.
pub(super) struct Recovered {
    pub(super) truncated_bytes: u64,
    pub(super) next_offset: i64,
}

/// What the batches after the last offset-index entry say about a segment opened after a clean
/// shutdown.
pub(super) struct Tail {
    pub(super) next_offset: i64,
    /// False when the scan stopped at a torn or corrupt batch instead of the end of the file.
    pub(super) reached_end: bool,
}

pub(super) struct LogSegment {
    disk: Disk,
    base_offset: i64,
    log_path: PathBuf,
    /// Shared with fetch responses (`SegmentSlice`), which send their byte ranges after the
    /// partition's lock is released, possibly after the segment was deleted.
    log: Arc<File>,
    /// Valid bytes in the `.log`. Invariant: equals the file length, and ends on a batch boundary.
    size_bytes: u64,
    pub(super) offset_index: OffsetIndex,
    pub(super) time_index: TimeIndex,
    /// The aborted transactions whose markers lie in this segment (`segment/txn.rs`).
    txn_index: TransactionIndex,
    /// Bytes appended since the last index entry was written; an entry is due when it exceeds
    /// index_interval_bytes.
    bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp in the segment, NO_TIMESTAMP when none.
    max_timestamp_so_far: i64,
    /// Last offset of the batch holding `max_timestamp_so_far`, -1 when unknown.
    offset_of_max_timestamp_so_far: i64,
    /// Max timestamp of the first batch: what time-based rolling measures from.
    rolling_based_timestamp: Option<i64>,
    /// Wall-clock creation (or load) time, used for rolling when the first batch has no timestamp.
    created_ms: i64,
}

impl LogSegment {
    /// Creates an empty segment with preallocated indexes.
    pub(super) fn create(
        disk: &Disk,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let log_path = segment_file(dir, base_offset, LOG_SUFFIX);
        let log = disk.create_file(&log_path)?;
        let max = config.max_index_size_bytes;
        let offset_index = OffsetIndex::create(
            disk,
            &segment_file(dir, base_offset, INDEX_SUFFIX),
            base_offset,
            max,
        )?;
        let time_index = TimeIndex::create(
            disk,
            &segment_file(dir, base_offset, TIME_INDEX_SUFFIX),
            base_offset,
            max,
        )?;
        // A new segment has no aborted transactions, whatever a leftover file says.
        let txn_path = segment_file(dir, base_offset, TXN_INDEX_SUFFIX);
        disk.remove_file_if_exists(&txn_path)?;
        let txn_index = TransactionIndex::open(disk, &txn_path)?;
        Ok(Self::assemble(
            disk,
            base_offset,
            log_path,
            log,
            0,
            (offset_index, time_index, txn_index),
            now_ms,
        ))
    }

    /// Opens an existing segment. A missing index, or one whose length is not a whole number of
    /// entries, is replaced by a fresh empty one and the reason is returned: the caller must then
    /// rebuild. The in-memory state is not loaded yet (see `load_state` and `recover`).
    pub(super) fn open(
        disk: &Disk,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<(Self, Option<String>), LogError> {
        let log_path = segment_file(dir, base_offset, LOG_SUFFIX);
        let log = disk.open_rw(&log_path)?;
        let size_bytes = disk::file_len(&log)?;
        let max = config.max_index_size_bytes;
        let mut rebuild_reason = None;
        let index_path = segment_file(dir, base_offset, INDEX_SUFFIX);
        let offset_index = match OffsetIndex::open(disk, &index_path, base_offset) {
            Ok(index) => index,
            Err(error) if is_unusable_index(&error) => {
                rebuild_reason = Some(format!("offset index: {error}"));
                OffsetIndex::create(disk, &index_path, base_offset, max)?
            }
            Err(error) => return Err(error.into()),
        };
        let time_path = segment_file(dir, base_offset, TIME_INDEX_SUFFIX);
        let time_index = match TimeIndex::open(disk, &time_path, base_offset) {
            Ok(index) => index,
            Err(error) if is_unusable_index(&error) => {
                rebuild_reason = Some(format!("time index: {error}"));
                TimeIndex::create(disk, &time_path, base_offset, max)?
            }
            Err(error) => return Err(error.into()),
        };
        let txn_index =
            TransactionIndex::open(disk, &segment_file(dir, base_offset, TXN_INDEX_SUFFIX))?;
        let segment = Self::assemble(
            disk,
            base_offset,
            log_path,
            log,
            size_bytes,
            (offset_index, time_index, txn_index),
            now_ms,
        );
        Ok((segment, rebuild_reason))
    }

    fn assemble(
        disk: &Disk,
        base_offset: i64,
        log_path: PathBuf,
        log: File,
        size_bytes: u64,
        (offset_index, time_index, txn_index): (OffsetIndex, TimeIndex, TransactionIndex),
        now_ms: i64,
    ) -> Self {
        LogSegment {
            disk: disk.clone(),
            base_offset,
            log_path,
            log: Arc::new(log),
            size_bytes,
            offset_index,
            time_index,
            txn_index,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: NO_TIMESTAMP,
            offset_of_max_timestamp_so_far: -1,
            rolling_based_timestamp: None,
            created_ms: now_ms,
        }
    }

    pub(super) fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub(super) fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub(super) fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// (max timestamp so far, last offset of the batch holding it); offset -1 when unknown.
    pub(super) fn max_timestamp_and_offset(&self) -> (i64, i64) {
        (
            self.max_timestamp_so_far,
            self.offset_of_max_timestamp_so_far,
        )
    }

    /// Kafka's `shouldRoll`, checked before each append (§2.5). Jitter is zero.
    pub(super) fn should_roll(
        &self,
        config: &LogConfig,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        incoming_last_offset: i64,
        now_ms: i64,
    ) -> bool {
        let waited_ms = match self.rolling_based_timestamp {
            Some(first) if first >= 0 => incoming_max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        let relative = incoming_last_offset - self.base_offset;
        self.size_bytes + incoming_bytes > config.segment_bytes
            || (self.size_bytes > 0 && waited_ms > config.segment_ms)
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || !(0..=i64::from(i32::MAX)).contains(&relative)
    }

    /// Appends one batch at the end of the `.log` and maintains the sparse indexes as Kafka's
    /// `LogSegment.append` does: the entry check runs before this batch's bytes are counted, so the
    /// first batch never gets an entry and an entry maps this batch's last offset to its start.
    /// The batch comes as its stamped header and its untouched records, written with one
    /// `pwritev`, so the caller never copies a batch to stamp it.
    pub(super) fn append(
        &mut self,
        head: &[u8],
        records: &[u8],
        last_offset: i64,
        max_timestamp: i64,
        config: &LogConfig,
    ) -> Result<(), LogError> {
        let position = self.size_bytes;
        let entry_due = self.bytes_since_last_index_entry > config.index_interval_bytes;
        // Every index precondition is checked before the write, so the write and the index
        // update succeed or fail together.
        if entry_due && (self.offset_index.is_full() || self.time_index.is_full()) {
            return Err(LogError::Corrupt(
                "append to a segment with a full index".to_string(),
            ));
        }
        let batch_bytes = (head.len() + records.len()) as u64;
        // A partial write is cut off so the file still ends on a batch boundary; when that
        // fails too, the log directory goes offline (see `disk`).
        self.disk
            .write_vectored_at_or_undo(&self.log, &self.log_path, head, records, position)?;
        self.size_bytes += batch_bytes;
        if position == 0 {
            self.rolling_based_timestamp = Some(max_timestamp);
        }
        if max_timestamp > self.max_timestamp_so_far {
            self.max_timestamp_so_far = max_timestamp;
            self.offset_of_max_timestamp_so_far = last_offset;
        }
        if entry_due {
            self.offset_index.append(last_offset, position)?;
            let (timestamp, offset) = self.max_timestamp_and_offset();
            self.time_index.maybe_append(timestamp, offset, false)?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += batch_bytes;
        Ok(())
    }

    /// Makes room in trimmed indexes again: after load, or when a closed log is appended to.
    pub(super) fn ensure_writable(&mut self, config: &LogConfig) -> Result<(), LogError> {
        self.offset_index
            .file_mut()
            .resize(config.max_index_size_bytes)?;
        self.time_index
            .file_mut()
            .resize(config.max_index_size_bytes)?;
        Ok(())
    }

    /// Kafka's `onBecomeInactiveSegment`, also run on close: writes the final time-index entry
    /// (the segment's max timestamp, so a reopen learns it from the last entry), then trims both
    /// indexes so their length gives their entry count.
    pub(super) fn on_become_inactive(&mut self) -> Result<(), LogError> {
        let (timestamp, offset) = self.max_timestamp_and_offset();
        self.time_index.maybe_append(timestamp, offset, true)?;
        self.offset_index.file_mut().trim_to_valid_size()?;
        self.time_index.file_mut().trim_to_valid_size()?;
        Ok(())
    }

    /// Independent handles on the segment's three files, so a rolled segment can be fsynced
    /// on another thread without holding the partition's lock.
    pub(super) fn sync_handles(&self) -> io::Result<Vec<(File, PathBuf)>> {
        let offset_index = self.offset_index.file();
        let time_index = self.time_index.file();
        let mut handles = vec![
            (self.log.try_clone()?, self.log_path.clone()),
            (
                offset_index.try_clone_file()?,
                offset_index.path().to_path_buf(),
            ),
            (
                time_index.try_clone_file()?,
                time_index.path().to_path_buf(),
            ),
        ];
        handles.extend(self.txn_index.sync_handle()?);
        Ok(handles)
    }

    /// fsyncs the `.log`, then both indexes. `log_fsyncs` counts the `.log`'s fsync, next to the
    /// call itself, so a test can see that an acknowledged append was made durable.
    pub(super) fn flush(&self, log_fsyncs: &AtomicU64) -> io::Result<()> {
        self.flush_log(log_fsyncs)?;
        self.flush_indexes()
    }

    /// fsyncs the `.log` only: enough for the active segment, whose indexes recovery rebuilds
    /// after a crash whatever they hold (see `PartitionLog::flush`).
    pub(super) fn flush_log(&self, log_fsyncs: &AtomicU64) -> io::Result<()> {
        self.disk.sync_data(&self.log, &self.log_path)?;
        log_fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the indexes' dirty pages and lengths to stable storage.
    pub(super) fn flush_indexes(&self) -> io::Result<()> {
        self.offset_index.file().flush()?;
        self.time_index.file().flush()?;
        self.txn_index.flush()
    }

    /// The `len` bytes at `position`, as a handle on the file rather than a copy; the range must
    /// lie within the segment.
    pub(super) fn slice(&self, position: u64, len: usize) -> SegmentSlice {
        debug_assert!(position + len as u64 <= self.size_bytes);
        SegmentSlice {
            file: self.log.clone(),
            position,
            len,
        }
    }

    /// Reads `len` bytes at `position`; the range must lie within the segment.
    pub(super) fn read_bytes(&self, position: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        self.log.read_exact_at(&mut bytes, position)?;
        Ok(bytes)
    }

    /// The open `.log`, for a reader that outlives the partition's lock (the log cleaner): an
    /// inactive segment's bytes never change, and the handle keeps them even once deleted.
    pub(super) fn log_file(&self) -> &Arc<File> {
        &self.log
    }

    pub(super) fn scanner(&self, start: u64, chunk_bytes: usize) -> BatchScanner<'_> {
        BatchScanner::new(&self.log, start, self.size_bytes, chunk_bytes)
    }

    /// The first batch at or after `start` for which `wanted` holds. A torn or corrupt batch inside
    /// the valid size means the file changed under us: an error, never a silent stop.
    pub(super) fn first_batch_from(
        &self,
        start: u64,
        mut wanted: impl FnMut(&BatchHeader) -> bool,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let mut scanner = self.scanner(start, LOOKUP_CHUNK_BYTES);
        loop {
            match scanner.next_header()? {
                ScanStep::Batch { position, header } if wanted(&header) => {
                    return Ok(Some((position, header)))
                }
                ScanStep::Batch { .. } => {}
                ScanStep::End => return Ok(None),
                ScanStep::Torn { position } => {
                    return Err(LogError::Corrupt(format!(
                        "{}: partial batch at {position}",
                        self.log_path.display()
                    )))
                }
                ScanStep::Corrupt { position, reason } => {
                    return Err(LogError::Corrupt(format!(
                        "{}: at {position}: {reason}",
                        self.log_path.display()
                    )))
                }
            }
        }
    }

    /// Kafka's `translateOffset`: the first batch whose last offset is >= `target`, found by an
    /// index lookup and a forward scan. It may start below `target`.
    pub(super) fn find_batch(&self, target: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let (_, start) = self.offset_index.lookup(target);
        self.first_batch_from(start, |header| header.last_offset() >= target)
    }

    /// The file position where batches with base offset >= `max_offset` begin (the segment size
    /// when there are none), so a read can stop there.
    pub(super) fn position_bound(&self, max_offset: i64) -> Result<u64, LogError> {
        Ok(match self.find_batch(max_offset)? {
            Some((position, header)) if header.base_offset >= max_offset => position,
            Some((position, header)) => position + header.total_size() as u64,
            None => self.size_bytes,
        })
    }

    /// After a clean shutdown, restores the in-memory state Kafka derives from the indexes: max
    /// timestamp so far from the last time-index entry and the index interval counter from the
    /// last offset-index entry. For the active segment it also reads the first batch (time-based
    /// rolling) and scans from the last offset-index entry to the end of the file, which yields the
    /// log end offset, refines the max timestamp and proves that the tail is whole.
    pub(super) fn load_state(&mut self, is_active: bool) -> Result<Option<Tail>, LogError> {
        if self.time_index.entries() > 0 {
            (
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
            ) = self.time_index.last_entry();
        }
        let last_entry_position = self
            .offset_index
            .last_entry()
            .map_or(0, |(_, position)| position);
        self.bytes_since_last_index_entry = self.size_bytes - last_entry_position;
        if !is_active {
            return Ok(None);
        }
        let mut tail = Tail {
            next_offset: self.base_offset,
            reached_end: false,
        };
        match self.first_batch_from(0, |_| true) {
            Ok(first) => {
                self.rolling_based_timestamp = first.map(|(_, header)| header.max_timestamp)
            }
            Err(LogError::Corrupt(_)) => return Ok(Some(tail)),
            Err(error) => return Err(error),
        }
        let mut scanner = BatchScanner::new(
            &self.log,
            last_entry_position,
            self.size_bytes,
            LOOKUP_CHUNK_BYTES,
        );
        loop {
            match scanner.next_header()? {
                ScanStep::Batch { header, .. } => {
                    tail.next_offset = header.last_offset() + 1;
                    if header.max_timestamp > self.max_timestamp_so_far {
                        self.max_timestamp_so_far = header.max_timestamp;
                        self.offset_of_max_timestamp_so_far = header.last_offset();
                    }
                }
                ScanStep::End => {
                    tail.reached_end = true;
                    return Ok(Some(tail));
                }
                ScanStep::Torn { .. } | ScanStep::Corrupt { .. } => return Ok(Some(tail)),
            }
        }
    }

    /// Checks indexes opened after a clean shutdown before trusting them. Beyond Kafka's checks
    /// (whole entries, last offset >= base, last timestamp >= first) it requires every entry to
    /// increase and probes the log at the last entry of each index, so a zero-filled or stale
    /// index is rebuilt instead of silently misdirecting lookups.
    pub(super) fn sanity_check(&self, next_offset_bound: i64) -> Result<(), String> {
        self.offset_index
            .sanity_check(self.size_bytes, next_offset_bound)?;
        self.time_index.sanity_check(next_offset_bound)?;
        if let Some((offset, position)) = self.offset_index.last_entry() {
            match self.first_batch_from(position, |_| true) {
                Ok(Some((_, header))) if header.base_offset <= offset => {}
                Ok(_) => {
                    return Err(format!(
                        "no batch holding offset {offset} at position {position}"
                    ))
                }
                Err(error) => return Err(format!("probing offset index entry: {error}")),
            }
        }
        if self.time_index.entries() > 0 {
            let (timestamp, offset) = self.time_index.last_entry();
            match self.find_batch(offset) {
                Ok(Some((_, header)))
                    if header.base_offset <= offset && header.max_timestamp == timestamp => {}
                Ok(_) => {
                    return Err(format!(
                        "time index entry ({timestamp}, {offset}) matches no batch"
                    ))
                }
                Err(error) => return Err(format!("probing time index entry: {error}")),
            }
        }
        Ok(())
    }
}

fn is_unusable_index(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::InvalidData
    )
}
