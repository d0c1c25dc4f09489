//! A partition: one `PartitionLog` and the idempotent-producer state that must change with it,
//! behind one mutex, offered to the rest of the broker as operations rather than as a lock
//! handle. The mutex serialises appends, which is what keeps offsets dense and batches in
//! arrival order; reads take it only to cut a byte range.
//!
//! This file is the one place that decides a partition's offsets: the high watermark (the end
//! of what consumers may read; with one replica, every appended record is committed at once,
//! so it is the log end offset) and the last stable offset (the end of what read_committed
//! consumers may read: the first offset of the oldest transaction still open here, or the high
//! watermark when none is). Replication changes `PartitionState::high_watermark`, nothing else.
//!
//! Every append goes through `append_locked`: the leader epoch stamped into the batch, the
//! producer snapshot at a roll, and the wake-up of parked fetches are decided there once, for
//! produced batches, transaction markers (`partition/txn.rs`) and the broker's own
//! (`__consumer_offsets`) alike. Loading rebuilds producer state, open transactions and the
//! aborted-transaction indexes of recovered segments from the newest snapshot and the batches
//! after it (`partition/replay.rs`).

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

use super::errors::PartitionError;
use crate::disk::Disk;
use crate::log::{AbortedTxn, LogConfig, LogError, PartitionLog, RetentionConfig, SegmentSlice};
use crate::producer::{snapshot, ProducerStateManager, SequenceCheck, SequenceError};
use crate::record_batch::header::BatchHeader;

mod replay;
mod txn;

pub use txn::TxnVerification;

/// The leader epoch of every partition: a single node leads each partition from its creation
/// and never hands it over, so it stays Kafka's first epoch. Stamped into every stored batch and
/// recorded in each partition's `leader-epoch-checkpoint`.
const LEADER_EPOCH: i32 = 0;

/// Producer snapshots kept per partition (the newest two, as Kafka keeps).
const SNAPSHOTS_RETAINED: usize = 2;

/// Which records a reader may see (a Fetch's or ListOffsets' `isolation_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark.
    ReadUncommitted,
    /// Up to the last stable offset.
    ReadCommitted,
}

impl Isolation {
    /// Kafka's wire value: 0 read_uncommitted, 1 read_committed.
    pub fn from_wire(isolation_level: i8) -> Isolation {
        if isolation_level == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

/// A partition's offsets at one moment, read together under its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_end_offset: i64,
}

/// What a produced batch became.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducedBatch {
    pub base_offset: i64,
    /// The append time stamped into a LogAppendTime batch, -1 otherwise (and for a duplicate,
    /// whose append time sluice does not keep).
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

/// A fetch's read of one partition: the offsets at the moment of the read, and the records or
/// why there are none.
pub struct PartitionRead {
    pub offsets: PartitionOffsets,
    pub records: Result<Option<SegmentSlice>, PartitionError>,
    /// For a read_committed read, the aborted transactions the records overlap (Fetch's
    /// `aborted_transactions`); None for read_uncommitted.
    pub aborted: Option<Vec<AbortedTxn>>,
}

/// A producer as DescribeProducers reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    /// The epoch of the coordinator that wrote its last marker here, -1 before any.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction here, -1 when none is open.
    pub current_txn_start_offset: i64,
}

/// Figures about a partition's log that operators and tests look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogStats {
    pub size_bytes: u64,
    pub active_segment_base_offset: i64,
    pub log_end_offset: i64,
    pub recovery_point: i64,
    /// `.log` fsyncs so far (the flush-per-message durability test counts them).
    pub segment_fsyncs: u64,
}

/// What the checkpoint files record of a partition: `recovery-point-offset-checkpoint`,
/// `replication-offset-checkpoint` (the high watermark), and `log-start-offset-checkpoint`
/// (only when the log start is past the first segment's base offset, as Kafka writes it).
pub(super) struct CheckpointOffsets {
    pub(super) recovery_point: i64,
    pub(super) high_watermark: i64,
    pub(super) log_start_offset: i64,
    pub(super) first_segment_base_offset: i64,
}

/// A partition's log and the producer state that must change atomically with it.
pub(super) struct PartitionState {
    pub(super) log: PartitionLog,
    pub(super) producers: ProducerStateManager,
}

impl PartitionState {
    /// The high watermark: the offset below which records are committed and visible. One
    /// replica commits every appended record at once.
    fn high_watermark(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// The last stable offset: below it no transaction is still open. It is the first offset
    /// of the oldest open transaction (never below the log start offset), or the high
    /// watermark when none is open; with one replica a marker is replicated as soon as it is
    /// appended, so a completed transaction never holds it back.
    pub(super) fn last_stable_offset(&self) -> i64 {
        let high_watermark = self.high_watermark();
        match self.producers.first_unstable_offset() {
            Some(first) => first.max(self.log.log_start_offset()).min(high_watermark),
            None => high_watermark,
        }
    }

    /// The end of what a reader with `isolation` may read.
    fn visible_end(&self, isolation: Isolation) -> i64 {
        match isolation {
            Isolation::ReadUncommitted => self.high_watermark(),
            Isolation::ReadCommitted => self.last_stable_offset(),
        }
    }

    fn offsets(&self) -> PartitionOffsets {
        PartitionOffsets {
            log_start_offset: self.log.log_start_offset(),
            high_watermark: self.high_watermark(),
            last_stable_offset: self.last_stable_offset(),
            log_end_offset: self.log.log_end_offset(),
        }
    }
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub dir: PathBuf,
    /// None once the topic is deleted; every later use answers UNKNOWN_TOPIC_OR_PARTITION.
    state: Mutex<Option<PartitionState>>,
    /// Woken after appends to this partition (and when it is retired), so that fetches parked
    /// on it, and only those, re-read it.
    appended: Arc<Notify>,
    /// The log fsyncs every append (`flush.messages=1`): known before the lock is taken, so
    /// that a produce waiting for the lock behind another's fsync waits off the async runtime.
    flushes_every_append: AtomicBool,
}

impl Partition {
    /// Wraps an opened log, which becomes leader in `LEADER_EPOCH` as a Kafka partition does
    /// when it is created or loaded, rebuilding producer state from the newest snapshot at or
    /// below the log end offset and the batch headers after it (`docs/log-format.md` §13.5,
    /// "Read").
    pub(super) fn new(
        topic: String,
        index: i32,
        dir: PathBuf,
        mut log: PartitionLog,
    ) -> Result<Partition, LogError> {
        log.become_leader(LEADER_EPOCH)?;
        let producers = replay::rebuild_producer_state(&dir, &mut log)?;
        let flushes_every_append = AtomicBool::new(log.flushes_every_append());
        Ok(Partition {
            topic,
            index,
            dir,
            state: Mutex::new(Some(PartitionState { log, producers })),
            appended: Arc::new(Notify::new()),
            flushes_every_append,
        })
    }

    /// Appends a batch a client produced, already validated (and re-encoded into the topic's
    /// codec if need be): the idempotence check and the append under one lock, so a retry
    /// racing its original is never appended twice; a duplicate is answered with its original
    /// base offset. A transactional batch that starts no transaction known here must bring the
    /// guard of its verification with the coordinator (`verification`, KIP-890). With
    /// `flush.messages=1` the append is fsynced before this returns, off the async runtime's
    /// worker. `log_append_time`: the topic's `message.timestamp.type` is LogAppendTime, so the
    /// broker stamps the batch's timestamp.
    pub fn append_produced(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        log_append_time: bool,
        now_ms: i64,
        verification: TxnVerification,
    ) -> Result<ProducedBatch, PartitionError> {
        let append = || {
            self.with_state(|state| {
                let log_start_offset = state.log.log_start_offset();
                match state.producers.check(header)? {
                    SequenceCheck::Duplicate { base_offset } => Ok((
                        false,
                        ProducedBatch {
                            base_offset,
                            log_append_time_ms: -1,
                            log_start_offset,
                        },
                    )),
                    SequenceCheck::Append => {
                        if !txn::is_verified(state, header, verification) {
                            return Err(SequenceError::InvalidTxnState.into());
                        }
                        let (base_offset, log_append_time_ms) =
                            self.append_locked(state, batch, now_ms, log_append_time)?;
                        state.producers.update(header, base_offset);
                        Ok((
                            true,
                            ProducedBatch {
                                base_offset,
                                log_append_time_ms,
                                log_start_offset: state.log.log_start_offset(),
                            },
                        ))
                    }
                }
            })
        };
        let (appended, produced) = self.off_the_runtime(append)?;
        if appended {
            self.appended.notify_waiters();
        }
        Ok(produced)
    }

    /// Runs an append that may fsync: off the async runtime's worker when every append is
    /// fsynced (`flush.messages=1`), since an fsync per append would stall this worker's other
    /// connections, and so would waiting for the lock behind another append's fsync.
    fn off_the_runtime<T>(&self, append: impl FnOnce() -> T) -> T {
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_thread && self.flushes_every_append.load(Ordering::Relaxed) {
            tokio::task::block_in_place(append)
        } else {
            append()
        }
    }

    /// Appends a batch the broker wrote itself (the group coordinator's records), with the same
    /// leader epoch, roll snapshot and wake-ups as a produced batch. A transactional batch (a
    /// transactional offset commit) is checked as Kafka checks a coordinator's append, by its
    /// producer epoch alone, and opens or continues its producer's transaction. Returns its base
    /// offset.
    pub fn append_internal(&self, batch: &[u8], now_ms: i64) -> Result<i64, PartitionError> {
        let header = BatchHeader::parse(batch)
            .map_err(|e| PartitionError::Corrupt(format!("internal batch: {e}")))?;
        let append = || {
            self.with_state(|state| {
                if header.producer_id >= 0 {
                    txn::check_internal_epoch(state, &header)?;
                }
                let (base_offset, _) = self.append_locked(state, batch, now_ms, false)?;
                state.producers.update(&header, base_offset);
                Ok(base_offset)
            })
        };
        let base_offset = self.off_the_runtime(append)?;
        self.appended.notify_waiters();
        Ok(base_offset)
    }

    /// The one append: stamps the leader epoch, and snapshots producer state when the append
    /// rolled a new segment, as Kafka does at every roll: named by the new segment's base
    /// offset and taken before this batch, the first one above it. Returns the base offset and
    /// the LogAppendTime stamped (-1 when none).
    fn append_locked(
        &self,
        state: &mut PartitionState,
        batch: &[u8],
        now_ms: i64,
        log_append_time: bool,
    ) -> Result<(i64, i64), PartitionError> {
        let segment_before = state.log.active_segment_base_offset();
        let info = state
            .log
            .append(batch, LEADER_EPOCH, now_ms, log_append_time)?;
        if state.log.active_segment_base_offset() != segment_before {
            self.snapshot_at_roll(state);
        }
        Ok((info.base_offset, info.log_append_time_ms))
    }

    fn snapshot_at_roll(&self, state: &PartitionState) {
        let entries: Vec<_> = state.producers.entries().collect();
        let offset = state.log.active_segment_base_offset();
        let disk = state.log.disk();
        if let Err(e) = snapshot::write(disk, &self.dir, offset, &entries) {
            // Recovery rebuilds producer state from the log without it; only restart time
            // suffers. (A failed fsync of it has taken the log directory offline, as any does.)
            tracing::warn!(partition = %self, offset, "producer snapshot at roll failed: {e}");
        }
        snapshot::prune(disk, &self.dir, SNAPSHOTS_RETAINED);
    }

    /// The partition's current leader epoch, as Metadata, ListOffsets and the leader-epoch
    /// checks of Fetch and ListOffsets report and compare it.
    pub fn leader_epoch(&self) -> i32 {
        LEADER_EPOCH
    }

    /// A fetch's read: at most `max_bytes` from `fetch_offset`, up to what `isolation` may see
    /// (see `PartitionLog::read_slice` for `min_one_batch`); a read_committed read also lists
    /// the aborted transactions its records overlap. The slice is cut under the lock, so it
    /// never reaches past what was appended then.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: Isolation,
    ) -> Result<PartitionRead, PartitionError> {
        self.with_state(|state| {
            let read = state.log.read_for_fetch(
                fetch_offset,
                max_bytes,
                min_one_batch,
                state.visible_end(isolation),
            );
            let (records, aborted) = match read {
                Ok(read) => {
                    let aborted = match isolation {
                        Isolation::ReadUncommitted => None,
                        Isolation::ReadCommitted if read.slice.is_none() => Some(Vec::new()),
                        Isolation::ReadCommitted => Some(
                            state
                                .log
                                .collect_aborted_txns(fetch_offset, read.upper_bound_offset)?,
                        ),
                    };
                    (Ok(read.slice), aborted)
                }
                Err(e) => (Err(PartitionError::from(e)), None),
            };
            Ok(PartitionRead {
                offsets: state.offsets(),
                records,
                aborted,
            })
        })
    }

    /// Reads whole batches into memory from `offset` up to the high watermark, at most about
    /// `max_bytes` (one batch at least): for the broker's own replays of its logs.
    pub(super) fn read_bytes(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Bytes, PartitionError> {
        self.with_state(|state| {
            let end = state.high_watermark();
            Ok(state.log.read(offset, max_bytes, true, end)?.records)
        })
    }

    pub fn offsets(&self) -> Result<PartitionOffsets, PartitionError> {
        self.with_state(|state| Ok(state.offsets()))
    }

    /// ListOffsets for one partition: `(timestamp, offset)` for Kafka's special timestamps
    /// (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local, -5 latest tiered, -6
    /// earliest pending upload) or the first offset whose timestamp is at or after `timestamp`;
    /// `(-1, -1)` when there is none. Nothing is ever tiered, so -5 and -6 find no offset.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
        isolation: Isolation,
    ) -> Result<(i64, i64), PartitionError> {
        const LATEST: i64 = -1;
        const EARLIEST: i64 = -2;
        const MAX_TIMESTAMP: i64 = -3;
        const EARLIEST_LOCAL: i64 = -4;
        const LATEST_TIERED: i64 = -5;
        const EARLIEST_PENDING_UPLOAD: i64 = -6;
        self.with_state(|state| {
            let end = state.visible_end(isolation);
            Ok(match timestamp {
                LATEST => (-1, end),
                EARLIEST | EARLIEST_LOCAL => (-1, state.log.log_start_offset()),
                MAX_TIMESTAMP => state.log.max_timestamp_and_offset().unwrap_or((-1, -1)),
                LATEST_TIERED | EARLIEST_PENDING_UPLOAD => (-1, -1),
                ts if ts >= 0 => match state.log.find_offset_by_timestamp(ts)? {
                    Some((offset, found_ts)) if offset < end => (found_ts, offset),
                    _ => (-1, -1),
                },
                _ => (-1, -1),
            })
        })
    }

    /// DeleteRecords: moves the log start offset up to `offset` (-1: the high watermark), which
    /// may not pass the high watermark. Returns the new log start offset (the low watermark).
    pub fn delete_records(&self, offset: i64) -> Result<i64, PartitionError> {
        self.with_state(|state| {
            let high_watermark = state.high_watermark();
            let target = if offset == -1 { high_watermark } else { offset };
            if target < 0 || target > high_watermark {
                return Err(PartitionError::OffsetOutOfRange {
                    requested: target,
                    log_start_offset: state.log.log_start_offset(),
                    log_end_offset: high_watermark,
                });
            }
            Ok(state.log.advance_log_start_offset(target)?)
        })
    }

    /// Deletes segments past `retention` (never above the high watermark) and any `.deleted`
    /// files whose delay has passed. Returns the segments deleted.
    pub(super) fn enforce_retention(
        &self,
        retention: &RetentionConfig,
        now_ms: i64,
    ) -> Result<usize, PartitionError> {
        self.with_state(|state| {
            let high_watermark = state.high_watermark();
            let count = state
                .log
                .delete_old_segments(retention, high_watermark, now_ms)?;
            state.log.remove_deleted_files(now_ms)?;
            Ok(count)
        })
    }

    pub fn active_producers(&self) -> Result<Vec<ActiveProducer>, PartitionError> {
        self.with_state(|state| {
            Ok(state
                .producers
                .entries()
                .map(|entry| ActiveProducer {
                    producer_id: entry.producer_id,
                    epoch: entry.epoch,
                    last_sequence: entry.last_sequence().unwrap_or(-1),
                    last_timestamp_ms: entry.last_timestamp_ms,
                    coordinator_epoch: entry.coordinator_epoch,
                    current_txn_start_offset: entry.current_txn_first_offset.unwrap_or(-1),
                })
                .collect())
        })
    }

    /// Forgets idempotent producers idle for `expiration_ms`.
    pub(super) fn expire_producers(&self, now_ms: i64, expiration_ms: i64) {
        // A deleted partition has no producers left to expire.
        let _ = self.with_state(|state| {
            state.producers.expire(now_ms, expiration_ms);
            Ok(())
        });
    }

    pub fn log_stats(&self) -> Result<LogStats, PartitionError> {
        self.with_state(|state| {
            Ok(LogStats {
                size_bytes: state.log.size_bytes(),
                active_segment_base_offset: state.log.active_segment_base_offset(),
                log_end_offset: state.log.log_end_offset(),
                recovery_point: state.log.recovery_point(),
                segment_fsyncs: state.log.segment_fsyncs(),
            })
        })
    }

    /// What the log directory's checkpoint files record of this partition.
    pub(super) fn checkpoint_offsets(&self) -> Result<CheckpointOffsets, PartitionError> {
        self.with_state(|state| {
            Ok(CheckpointOffsets {
                recovery_point: state.log.recovery_point(),
                high_watermark: state.high_watermark(),
                log_start_offset: state.log.log_start_offset(),
                first_segment_base_offset: state.log.first_segment_base_offset(),
            })
        })
    }

    /// Gives the log new settings (a topic config or dynamic broker config changed).
    pub(super) fn set_log_config(&self, config: LogConfig) {
        self.flushes_every_append
            .store(config.flush_interval_messages == 1, Ordering::Relaxed);
        // A deleted partition has nothing left to configure.
        let _ = self.with_state(|state| {
            state.log.set_config(config);
            Ok(())
        });
    }

    /// Runs `f` on the log and producer state under the partition's lock: for storage's own
    /// modules (flushes, cleaning, configuration), never for request handlers.
    pub(super) fn with_state<T>(
        &self,
        f: impl FnOnce(&mut PartitionState) -> Result<T, PartitionError>,
    ) -> Result<T, PartitionError> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let state = guard.as_mut().ok_or(PartitionError::Deleted)?;
        if state.log.disk().is_offline() {
            // The log directory went offline after a storage failure: nothing is read or
            // written until a restart recovers it.
            return Err(PartitionError::Storage(Disk::offline_error()));
        }
        f(state)
    }

    /// Stops serving: the log is dropped (files closed, indexes unmapped) before deletion, and
    /// fetches parked on the partition wake up to answer that it is gone.
    pub(super) fn retire(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.appended.notify_waiters();
    }

    /// What a fetch parks on: register (`enable`) before reading the partition, so an append
    /// between the read and the wait is not missed.
    pub fn appended(&self) -> &Arc<Notify> {
        &self.appended
    }

    /// Writes `<log end offset>.snapshot` and keeps the two newest snapshots.
    pub(super) fn snapshot_producers(&self) -> Result<(), PartitionError> {
        self.with_state(|state| {
            let entries: Vec<_> = state.producers.entries().collect();
            let disk = state.log.disk();
            snapshot::write(disk, &self.dir, state.log.log_end_offset(), &entries)?;
            snapshot::prune(disk, &self.dir, SNAPSHOTS_RETAINED);
            Ok(())
        })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.index)
    }
}
