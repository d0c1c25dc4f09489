//! One partition's append-only log, stored in Apache Kafka's own on-disk format so that Kafka's
//! tools (`kafka-dump-log`) can read and verify our files: `.log` segments of v2 RecordBatches
//! kept byte for byte as produced (only base offset and leader epoch are stamped), with sparse
//! memory-mapped `.index` and `.timeindex` files beside them. `docs/log-format.md` has the byte
//! diagrams and the assumptions about the disk.
//!
//! This module owns segments, indexes, rolling, flushing, crash recovery, delete retention and
//! compaction rounds for one partition directory, and the offsets that describe it: log start
//! offset, log end offset, recovery point, and the leader-epoch cache that follows them
//! (`leader_epoch.rs`: `leader-epoch-checkpoint`), and each segment's `.txnindex` of aborted
//! transactions (`txn_index.rs`, `transactions.rs`). It deliberately does not own the high
//! watermark or the last stable offset (callers pass them in), producer state, which
//! transactions are aborted (the caller appends them to the index), which leader epoch is
//! current (callers pass it in), or when retention and compaction run, and never parses
//! requests: it sees batch bytes and offsets only. It is not internally synchronised; callers wrap a `PartitionLog` in a lock
//! (reads take `&self`).

pub mod checkpoint;
mod cleaner;
mod flush;
mod index;
pub mod leader_epoch;
mod offset_index;
mod read;
mod recovery;
mod retention;
mod scan;
mod segment;
mod time_index;
mod transactions;
pub mod txn_index;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::topic::TopicValues;
use crate::record_batch::header::{
    crc_is_valid, set_base_offset, set_log_append_time, set_partition_leader_epoch, BatchHeader,
    RECORD_BATCH_OVERHEAD,
};
use crate::record_batch::BatchError;
use leader_epoch::{EpochEntry, LeaderEpochCache};
use segment::LogSegment;

use crate::disk::Disk;
use flush::{background_flusher, FlushJob};

pub use cleaner::{CleanOutcome, CleanedRound, CleanerConfig, CleaningRound};
pub use retention::RetentionConfig;
pub use segment::SegmentSlice;
pub use transactions::FetchRead;
pub use txn_index::AbortedTxn;

/// Per-log settings, named after Kafka's broker properties, units last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `log.segment.bytes`: roll before a segment would grow past this.
    pub segment_bytes: u64,
    /// `log.roll.ms`: roll when record timestamps (or wall clock) moved this far past the
    /// segment's first batch.
    pub segment_ms: i64,
    /// `log.index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u64,
    /// `log.index.size.max.bytes`: preallocated size of each index file.
    pub max_index_size_bytes: u64,
    /// `log.flush.interval.messages`: fsync once this many messages are unflushed (1 = every
    /// append is durable before `append` returns).
    pub flush_interval_messages: u64,
    /// `log.flush.interval.ms`: fsync from `flush_if_due` when the last flush is this old.
    pub flush_interval_ms: i64,
}

impl LogConfig {
    /// A topic's log settings from its config values (`config::topic`, the one place their
    /// defaults are written).
    pub fn from_topic(values: &TopicValues) -> LogConfig {
        // The table's checks keep these at or above 0.
        let bytes = |name: &str| values.i64(name).max(0) as u64;
        LogConfig {
            segment_bytes: bytes("segment.bytes"),
            segment_ms: values.i64("segment.ms"),
            index_interval_bytes: bytes("index.interval.bytes"),
            max_index_size_bytes: bytes("segment.index.bytes"),
            flush_interval_messages: bytes("flush.messages"),
            flush_interval_ms: values.i64("flush.ms"),
        }
    }
}

/// Two time-index slots: one for entries, one reserved for the final entry. Anything smaller
/// would make every segment "full" and roll on every append.
const MIN_INDEX_SIZE_BYTES: u64 = 24;

impl LogConfig {
    /// Clamps settings the file format cannot honour: index positions are i32, so a segment
    /// cannot exceed i32::MAX bytes (Kafka's segment.bytes is an int for the same reason).
    fn normalized(mut self) -> LogConfig {
        self.segment_bytes = self
            .segment_bytes
            .clamp(RECORD_BATCH_OVERHEAD as u64, i32::MAX as u64);
        self.max_index_size_bytes = self.max_index_size_bytes.max(MIN_INDEX_SIZE_BYTES);
        self
    }
}

#[derive(Debug)]
pub enum LogError {
    /// Fetch offset below the log start offset or above the log end offset.
    OffsetOutOfRange {
        requested: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// A batch larger than segment_bytes can never be stored.
    RecordTooLarge,
    /// Bytes on disk (or handed to `append`) that are not what the format requires.
    Corrupt(String),
    Io(io::Error),
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::OffsetOutOfRange {
                requested,
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset {requested} is outside the log [{log_start_offset}, {log_end_offset}]"
            ),
            LogError::RecordTooLarge => write!(f, "batch is larger than the segment size"),
            LogError::Corrupt(reason) => write!(f, "corrupt log data: {reason}"),
            LogError::Io(error) => write!(f, "log I/O error: {error}"),
        }
    }
}

/// Records of a stored batch that cannot be read are corrupt log data; the reason is kept.
impl From<BatchError> for LogError {
    fn from(error: BatchError) -> Self {
        LogError::Corrupt(error.into_message())
    }
}

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LogError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> Self {
        LogError::Io(error)
    }
}

/// What the caller remembers about this log from the checkpoint files and the shutdown marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// From `recovery-point-offset-checkpoint`: everything below is known to be on disk.
    pub recovery_point: i64,
    /// From `log-start-offset-checkpoint`.
    pub log_start_offset: i64,
    /// True when `.kafka_cleanshutdown` was present: skip recovery (indexes are still checked).
    pub clean_shutdown: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp as stored: the append time for LogAppendTime.
    pub max_timestamp: i64,
    /// The append time stamped into a LogAppendTime batch, -1 otherwise: what Produce answers in
    /// `log_append_time_ms`.
    pub log_append_time_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInfo {
    /// Whole batches from one segment, possibly ending in a partial batch; may be empty.
    pub records: bytes::Bytes,
}

pub struct PartitionLog {
    /// Every file operation of this log goes through it; shared with the log directory.
    disk: Disk,
    dir: PathBuf,
    config: LogConfig,
    /// Segments before the active one, by base offset.
    inactive: BTreeMap<i64, LogSegment>,
    /// The segment appends go to; its base offset is above every inactive one.
    active: LogSegment,
    log_start_offset: i64,
    /// Next offset to assign. Invariant: one past the last offset in the active segment (its
    /// base offset when empty).
    log_end_offset: i64,
    /// Every offset below it is fsynced. Only `flush` advances it, and only after the fsyncs.
    recovery_point: i64,
    /// Raised by the background fsync of a rolled segment to that roll's new base offset;
    /// `recovery_point()` is the larger of the two.
    flushed_through: Arc<AtomicI64>,
    /// How many times one of this log's `.log` files was fsynced, inline by `flush` or by the
    /// background flusher. The durability guarantee of `log.flush.interval.messages=1` is
    /// invisible to a kill -9 test (the page cache survives it), so tests read this instead.
    segment_fsyncs: Arc<AtomicU64>,
    /// How many times a segment's indexes were fsynced inline (by `flush`, `roll` or `close`),
    /// so a test can see which flushes skip them.
    index_flushes: u64,
    last_flush_ms: i64,
    /// The latest time a caller told us; flushes triggered without a clock are stamped with it.
    latest_now_ms: i64,
    /// A segment file was created, deleted or renamed since the directory was last fsynced.
    dir_needs_sync: bool,
    /// Files renamed to `*.deleted` by retention, waiting for file_delete_delay_ms to pass.
    /// In memory only: `open` removes every `*.deleted` file it finds.
    pending_deletes: Vec<retention::PendingDelete>,
    /// Where each leader epoch starts; kept within [log start offset, log end offset].
    leader_epochs: LeaderEpochCache,
    /// Set by loading when a segment was recovered: the transaction indexes from this segment on
    /// were emptied, for the caller's producer-state replay to rebuild (`transactions.rs`).
    txn_index_rebuild_from: Option<i64>,
}

impl fmt::Debug for PartitionLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionLog")
            .field("dir", &self.dir)
            .field("segments", &(self.inactive.len() + 1))
            .field("log_start_offset", &self.log_start_offset)
            .field("log_end_offset", &self.log_end_offset)
            .field("recovery_point", &self.recovery_point())
            .finish()
    }
}

impl PartitionLog {
    /// Opens the partition directory `dir`, creating it and an empty segment at the log start
    /// offset when it has none. Removes temporary files and orphan indexes, checks every
    /// segment's indexes (rebuilding any that are missing or fail a check) and, after an unclean
    /// shutdown, recovers every segment from the one holding the recovery point to the end:
    /// see `recovery.rs`.
    pub fn open(
        disk: &Disk,
        dir: &Path,
        config: LogConfig,
        options: OpenOptions,
        now_ms: i64,
    ) -> Result<PartitionLog, LogError> {
        let config = config.normalized();
        let loaded = recovery::load(disk, dir, &config, &options, now_ms)?;
        let leader_epochs = load_leader_epochs(disk, dir, &loaded)?;
        Ok(PartitionLog {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            config,
            inactive: loaded.inactive,
            active: loaded.active,
            log_start_offset: loaded.log_start_offset,
            log_end_offset: loaded.log_end_offset,
            recovery_point: loaded.recovery_point,
            flushed_through: Arc::new(AtomicI64::new(loaded.recovery_point)),
            segment_fsyncs: Arc::new(AtomicU64::new(0)),
            index_flushes: 0,
            last_flush_ms: now_ms,
            latest_now_ms: now_ms,
            // Loading may have created, deleted or renamed files.
            dir_needs_sync: true,
            pending_deletes: Vec::new(),
            leader_epochs,
            txn_index_rebuild_from: loaded.txn_index_rebuild_from,
        })
    }

    /// Appends exactly one v2 batch, already validated by the caller. Rolls first if needed,
    /// stamps base offset := log end offset and the partition leader epoch into the stored copy
    /// (neither is covered by the CRC; `batch` itself is left as it is), writes, maintains the
    /// indexes and fsyncs when flush_interval_messages is reached. The first batch of a new
    /// leader epoch first records the epoch in `leader-epoch-checkpoint`; later ones write
    /// nothing more. A batch larger than segment_bytes is refused with nothing written.
    /// With `log_append_time` (a topic with `message.timestamp.type=LogAppendTime`) the batch is
    /// also marked LogAppendTime with max timestamp := `now_ms` and its CRC recomputed, as Kafka's
    /// validator does; rolling and the time index then see `now_ms`.
    /// If the fsync fails the batch stays appended; the error means it is not known durable.
    pub fn append(
        &mut self,
        batch: &[u8],
        leader_epoch: i32,
        now_ms: i64,
        log_append_time: bool,
    ) -> Result<AppendInfo, LogError> {
        self.latest_now_ms = now_ms;
        let header = BatchHeader::parse(batch)
            .map_err(|error| LogError::Corrupt(format!("append: {error}")))?;
        if header.total_size() != batch.len() || header.last_offset_delta < 0 {
            return Err(LogError::Corrupt(format!(
                "append: {} bytes with batch length {} and last offset delta {}",
                batch.len(),
                header.batch_length,
                header.last_offset_delta
            )));
        }
        if batch.len() as u64 > self.config.segment_bytes {
            return Err(LogError::RecordTooLarge);
        }
        debug_assert!(crc_is_valid(batch), "append takes validated batches");
        let base_offset = self.log_end_offset;
        let last_offset = base_offset + i64::from(header.last_offset_delta);
        let max_timestamp = if log_append_time {
            now_ms
        } else {
            header.max_timestamp
        };
        self.active.ensure_writable(&self.config)?;
        // An empty active segment is never rolled: the new one would have the same base offset.
        if self.active.size_bytes() > 0
            && self.active.should_roll(
                &self.config,
                batch.len() as u64,
                max_timestamp,
                last_offset,
                now_ms,
            )
        {
            self.roll(now_ms)?;
        }
        // The first batch of a new epoch starts it (no I/O otherwise). Before the write, so a
        // batch on disk is always covered by the epoch file.
        self.leader_epochs.assign(leader_epoch, base_offset)?;
        // Everything stamped lies in the header: stamp a copy of it and write it before the
        // untouched records, so the batch itself is never copied.
        let (head, records) = batch.split_at(RECORD_BATCH_OVERHEAD);
        let mut head: [u8; RECORD_BATCH_OVERHEAD] =
            head.try_into().expect("split at the header size");
        set_base_offset(&mut head, base_offset);
        set_partition_leader_epoch(&mut head, leader_epoch);
        if log_append_time {
            set_log_append_time(&mut head, records, now_ms);
        }
        self.active
            .append(&head, records, last_offset, max_timestamp, &self.config)?;
        self.log_end_offset = last_offset + 1;
        let unflushed_messages = (self.log_end_offset - self.recovery_point()).max(0) as u64;
        if unflushed_messages >= self.config.flush_interval_messages {
            self.flush()?;
        }
        Ok(AppendInfo {
            base_offset,
            last_offset,
            max_timestamp,
            log_append_time_ms: if log_append_time { now_ms } else { -1 },
        })
    }

    /// True when every append is fsynced before it returns (`flush.messages=1`), so a caller
    /// on an async runtime should move the append off its worker.
    pub fn flushes_every_append(&self) -> bool {
        self.config.flush_interval_messages == 1
    }

    /// Starts a new active segment at the log end offset. The old one gets its final time-index
    /// entry and trimmed indexes, and is fsynced in the background as Kafka does: a 1 GiB fsync
    /// under the partition's lock would stall every producer of the partition. The recovery
    /// point moves to the new base offset only once that fsync has completed.
    fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        let new_base_offset = self.log_end_offset;
        self.active.on_become_inactive()?;
        if self.recovery_point() >= new_base_offset {
            // `flush` made all of this segment durable without its indexes, so the recovery
            // point already stands at its end. Once it is not the active segment, a checkpoint
            // of that recovery point would make recovery trust its indexes: make them durable
            // now. Two small fsyncs, at most once per roll. (A recovery point inside the
            // segment cannot pass it before `flush` or the background flush has fsynced all of
            // it, indexes included.)
            self.active.flush_indexes()?;
            self.index_flushes += 1;
        }
        let segment =
            LogSegment::create(&self.disk, &self.dir, new_base_offset, &self.config, now_ms)?;
        let old = std::mem::replace(&mut self.active, segment);
        tracing::debug!(path = %old.log_path().display(), new_base_offset, "rolled segment");
        // The old segment joins the inactive ones before anything else can fail, so it is
        // never lost from the log; without handles, `flush` syncs it inline later.
        let files = old.sync_handles();
        self.inactive.insert(old.base_offset(), old);
        self.dir_needs_sync = true;
        let files = files?;
        let job = FlushJob {
            disk: self.disk.clone(),
            files,
            dir: self.dir.clone(),
            flushed_through: self.flushed_through.clone(),
            segment_fsyncs: self.segment_fsyncs.clone(),
            new_base_offset,
        };
        if background_flusher().send(job).is_err() {
            // No flusher thread could be started: flush here, as correctness beats latency.
            self.flush()?;
        }
        Ok(())
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The storage handle this log writes through (and whose offline state it shares).
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// This broker leads the partition in `epoch` from now on (Kafka's `makeLeader`): the epoch
    /// starts at the log end offset unless the cache already has it. Kafka does this when a
    /// partition is created or loaded, so `leader-epoch-checkpoint` exists before any append.
    pub fn become_leader(&mut self, epoch: i32) -> Result<(), LogError> {
        self.leader_epochs.assign(epoch, self.log_end_offset)?;
        Ok(())
    }

    /// Each leader epoch with the offset of its first batch, oldest first.
    pub fn leader_epochs(&self) -> &[EpochEntry] {
        self.leader_epochs.entries()
    }

    /// The base offset of the first segment: `log-start-offset-checkpoint` lists a log only when
    /// its log start offset lies above this, as Kafka's does.
    pub fn first_segment_base_offset(&self) -> i64 {
        self.inactive
            .keys()
            .next()
            .copied()
            .unwrap_or(self.active.base_offset())
    }

    /// The base offset of the segment appends go to; it changes exactly when a roll happens.
    pub fn active_segment_base_offset(&self) -> i64 {
        self.active.base_offset()
    }

    /// Applies changed topic configs at once. Size and time limits govern the next roll and
    /// flush; index sizes apply to segments created from now on.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config.normalized();
    }

    /// Everything below this offset is on stable storage.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
            .max(self.flushed_through.load(Ordering::SeqCst))
    }

    /// How many times a `.log` file of this log has been fsynced since it was opened. Only
    /// fsyncs that returned success count.
    pub fn segment_fsyncs(&self) -> u64 {
        self.segment_fsyncs.load(Ordering::Relaxed)
    }

    /// How many times a segment's indexes were fsynced inline since the log was opened.
    pub fn index_flushes(&self) -> u64 {
        self.index_flushes
    }

    /// Segments in offset order starting with the one that holds `offset` (the first one when
    /// `offset` is below every base offset).
    fn segments_from(&self, offset: i64) -> impl Iterator<Item = &LogSegment> {
        let inactive = if offset >= self.active.base_offset() {
            self.inactive.range(self.active.base_offset()..)
        } else {
            match self.inactive.range(..=offset).next_back() {
                Some((base, _)) => self.inactive.range(*base..),
                None => self.inactive.range(..),
            }
        };
        inactive
            .map(|(_, segment)| segment)
            .chain(std::iter::once(&self.active))
    }

    /// One past the greatest offset `segment` can hold: the next segment's base offset, or the
    /// log end offset for the active segment.
    fn segment_end_offset(&self, segment: &LogSegment) -> i64 {
        if segment.base_offset() >= self.active.base_offset() {
            return self.log_end_offset;
        }
        self.inactive
            .range(segment.base_offset() + 1..)
            .next()
            .map_or(self.active.base_offset(), |(base, _)| *base)
    }
}

/// The leader-epoch cache of a freshly loaded log, cut to the log's offsets as Kafka's loader
/// does: entries below the log start offset move up to it, and entries starting past the log
/// end offset (recovery truncated the log below them) go. An unreadable file is replaced: the
/// partition's next `become_leader` writes it again.
fn load_leader_epochs(
    disk: &Disk,
    dir: &Path,
    loaded: &recovery::Loaded,
) -> Result<LeaderEpochCache, LogError> {
    let mut cache = LeaderEpochCache::open(disk, dir).unwrap_or_else(|error| {
        tracing::warn!(dir = %dir.display(), %error, "unreadable leader-epoch-checkpoint, starting it over");
        LeaderEpochCache::empty(disk, dir)
    });
    if cache
        .latest()
        .is_some_and(|latest| latest.start_offset > loaded.log_end_offset)
    {
        cache.truncate_from_end(loaded.log_end_offset)?;
    }
    cache.truncate_from_start(loaded.log_start_offset)?;
    Ok(cache)
}
