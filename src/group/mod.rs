//! The consumer-group coordinator of a single broker: Kafka's classic group protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, with static membership) and committed offsets (OffsetCommit,
//! OffsetFetch, OffsetDelete), plus the admin APIs ListGroups, DescribeGroups and DeleteGroups.
//! It behaves like Kafka 4.x's `GroupMetadataManager`/`OffsetMetadataManager`, error codes included.
//!
//! It owns the groups and their offsets in memory and makes offsets durable through an
//! [`OffsetStore`] in `__consumer_offsets`' record formats (`records.rs`). It deliberately does not
//! own: the store itself, FindCoordinator (every group lives here), request framing, topic
//! metadata (the caller says which partitions exist), or the KIP-848 "consumer" protocol. Group
//! membership is persisted as Kafka does (`persist.rs`): after a restart a group comes back
//! Empty, or Stable with the members, generation and assignments of its last completed
//! rebalance, and members that keep heartbeating keep their assignment.
//!
//! Layout: `state.rs` one group's bookkeeping; `rebalance.rs` the state machine and its timers;
//! `join.rs`, `sync.rs` (SyncGroup, Heartbeat), `leave.rs`, `offsets.rs` (OffsetCommit,
//! OffsetDelete, expiry), `offset_fetch.rs`, `admin.rs` one API family each; `persist.rs` what
//! is stored about membership and how it is restored; `records.rs` and `group_record.rs` the
//! record formats.
//!
//! Concurrency: one mutex guards every group. It is never held across an `.await`: a JoinGroup or
//! SyncGroup that must wait parks on a oneshot channel that a later request, `tick` or `shutdown`
//! answers. Store appends do happen under the mutex, so that records reach the store in the same
//! order as the changes they describe, as in Kafka's single-threaded coordinator shard; an
//! [`OffsetStore`] must therefore never call back into the coordinator.

mod admin;
mod consumer;
mod context;
pub mod group_record;
mod join;
mod leave;
mod offset_fetch;
mod offsets;
mod persist;
mod rebalance;
pub mod records;
mod state;
mod sync;
pub mod topics;
mod txn_offsets;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{watch, Notify};

use crate::config::Config;
use crate::time::Clock;
use consumer::ConsumerGroup;
use context::Ctx;
use records::RecordKey;
use state::{ClassicGroup, CommittedOffset, JoinOutcome, SyncOutcome};
use topics::TopicImage;

/// Kafka's `classicGroupNewMemberJoinTimeoutMs` (fixed at 5 minutes there too): how long a
/// brand-new member may stay parked in its first JoinGroup before it is dropped (it will retry).
const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

/// Kafka's `offsets.retention.check.interval.ms` default: how often expired offsets and empty
/// groups are looked for.
const OFFSETS_RETENTION_CHECK_INTERVAL_MS: i64 = 600_000;
/// The longest the timer task sleeps without looking again, so a wall-clock step forward is
/// noticed within a minute.
const MAX_TIMER_SLEEP_MS: i64 = 60_000;

/// Group coordinator settings, with Kafka's names.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`
    pub group_initial_rebalance_delay_ms: i64,
    /// `offset.metadata.max.bytes`; like Kafka, compared with the metadata's length in UTF-16 units.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: i64,
    /// `group.max.size`
    pub group_max_size: usize,
    /// `group.consumer.session.timeout.ms` and its bounds.
    pub consumer_session_timeout_ms: i32,
    pub consumer_min_session_timeout_ms: i32,
    pub consumer_max_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` and its bounds.
    pub consumer_heartbeat_interval_ms: i32,
    pub consumer_min_heartbeat_interval_ms: i32,
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`
    pub consumer_max_size: usize,
    /// `group.consumer.assignors`; the first is the default.
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.migration.policy`
    pub migration_policy: MigrationPolicy,
    /// `group.consumer.regex.refresh.interval.ms`
    pub consumer_regex_refresh_interval_ms: i64,
    /// `group.consumer.assignment.interval.ms` and its bounds.
    pub consumer_assignment_interval_ms: i32,
    pub consumer_min_assignment_interval_ms: i32,
    pub consumer_max_assignment_interval_ms: i32,
}

/// `group.consumer.migration.policy`: which way a non-empty group may change protocol online
/// (empty groups always may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    Bidirectional,
}

impl MigrationPolicy {
    fn parse(value: &str) -> MigrationPolicy {
        match value {
            "disabled" => MigrationPolicy::Disabled,
            "upgrade" => MigrationPolicy::Upgrade,
            "downgrade" => MigrationPolicy::Downgrade,
            _ => MigrationPolicy::Bidirectional,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }
}

impl GroupConfig {
    /// The coordinator's settings from the broker's (the broker table holds their defaults).
    pub fn from_broker(config: &Config) -> GroupConfig {
        GroupConfig {
            group_min_session_timeout_ms: config.group_min_session_timeout_ms,
            group_max_session_timeout_ms: config.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            offset_metadata_max_bytes: config.offset_metadata_max_bytes,
            offsets_retention_ms: config.offsets_retention_minutes.saturating_mul(60_000),
            group_max_size: config.group_max_size,
            consumer_session_timeout_ms: config.group_consumer_session_timeout_ms,
            consumer_min_session_timeout_ms: config.group_consumer_min_session_timeout_ms,
            consumer_max_session_timeout_ms: config.group_consumer_max_session_timeout_ms,
            consumer_heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
            consumer_min_heartbeat_interval_ms: config.group_consumer_min_heartbeat_interval_ms,
            consumer_max_heartbeat_interval_ms: config.group_consumer_max_heartbeat_interval_ms,
            consumer_max_size: config.group_consumer_max_size,
            consumer_assignors: config.group_consumer_assignors.clone(),
            migration_policy: MigrationPolicy::parse(&config.group_consumer_migration_policy),
            consumer_regex_refresh_interval_ms: config.group_consumer_regex_refresh_interval_ms,
            consumer_assignment_interval_ms: config.group_consumer_assignment_interval_ms,
            consumer_min_assignment_interval_ms: config.group_consumer_min_assignment_interval_ms,
            consumer_max_assignment_interval_ms: config.group_consumer_max_assignment_interval_ms,
        }
    }

    /// The assignor of groups whose members ask for none.
    pub fn default_assignor(&self) -> &str {
        self.consumer_assignors
            .first()
            .map(String::as_str)
            .unwrap_or("uniform")
    }
}

/// Why an [`OffsetStore`] append failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The records make a batch larger than the offsets topic's `max.message.bytes` (Kafka's
    /// RECORD_TOO_LARGE); nothing was written.
    TooLarge {
        batch_bytes: usize,
        max_bytes: usize,
    },
    /// A transactional batch or marker older than the producer's epoch in the offsets
    /// partition (a zombie's).
    ProducerFenced,
    /// A marker from a coordinator older than the one that wrote the producer's last marker.
    CoordinatorFenced,
    /// The log could not be written.
    Io(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::TooLarge {
                batch_bytes,
                max_bytes,
            } => write!(
                f,
                "a batch of {batch_bytes} bytes exceeds max.message.bytes ({max_bytes})"
            ),
            StoreError::ProducerFenced => f.write_str("the producer's epoch is fenced"),
            StoreError::CoordinatorFenced => f.write_str("the transaction coordinator is fenced"),
            StoreError::Io(message) => f.write_str(message),
        }
    }
}

/// One stored `__consumer_offsets` entry, as start-up replays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredRecord {
    /// A record: key and value (None for a tombstone); `producer_id` is the producer of the
    /// transactional batch holding it, None for the coordinator's own batches.
    Record {
        key: Bytes,
        value: Option<Bytes>,
        producer_id: Option<i64>,
    },
    /// A COMMIT (`commit`) or ABORT marker of the producer in `partition`.
    Marker {
        partition: i32,
        producer_id: i64,
        commit: bool,
    },
}

/// Where committed offsets and group metadata are made durable. sluice implements it with the
/// internal topic `__consumer_offsets`; records use Kafka's formats (see [`records`] and
/// [`group_record`]).
pub trait OffsetStore: Send + Sync {
    /// Durably appends the records of one group (all to the same __consumer_offsets partition)
    /// as one batch, all or nothing; returns only once stored.
    fn append(
        &self,
        group_id: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError>;
    /// `append`, as a transactional batch of the producer (TxnOffsetCommit).
    fn append_transactional(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError>;
    /// Durably appends a transaction marker of the producer to offsets partition `partition`,
    /// under the transaction's version (which marker epochs the partition takes, KIP-1228).
    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        transaction_version: i8,
    ) -> Result<(), StoreError>;
    /// The offsets partition a group's records go to.
    fn partition_for(&self, group_id: &str) -> i32;
    /// Every entry ever appended, in order (replayed once at start-up; later records win,
    /// tombstones delete, markers end transactions).
    fn load(&self) -> Result<Vec<StoredRecord>, String>;
}

pub struct GroupCoordinator {
    config: GroupConfig,
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    inner: Mutex<Inner>,
    /// Signalled when a timer is armed earlier than the timer task's next wake-up.
    timers_changed: Notify,
    /// The broker's topics (`set_topic_image`); none until then.
    topic_image: OnceLock<Arc<dyn TopicImage>>,
}

pub(crate) struct Inner {
    groups: HashMap<String, ClassicGroup>,
    /// KIP-848 consumer groups. A group id is in at most one of the two maps.
    consumer_groups: HashMap<String, ConsumerGroup>,
    /// A lower bound on every group's `wakeup_ms`: `tick` does nothing before it.
    wakeup_ms: i64,
    next_offsets_check_ms: i64,
    /// When the timer task (`run_timers`) will next call `tick`; lowering `wakeup_ms` below it
    /// wakes the task early through `timers_changed`.
    scheduled_tick_ms: i64,
    /// Set by `shutdown`; afterwards every request is answered NOT_COORDINATOR.
    shut_down: bool,
    /// Offsets of transactions not ended yet (`txn_offsets.rs`).
    pending_txn_offsets: txn_offsets::PendingTxnOffsets,
}

impl Inner {
    /// Folds a group's earliest timer into the coordinator-wide wake-up time.
    fn note_wakeup(&mut self, group_id: &str, timers_changed: &Notify) {
        if let Some(group) = self.groups.get(group_id) {
            self.wakeup_ms = self.wakeup_ms.min(group.wakeup_ms);
        }
        self.reschedule_if_earlier(timers_changed);
    }

    /// Folds a consumer group's earliest timer into the coordinator-wide wake-up time (the
    /// caller then calls `reschedule_if_earlier`).
    fn note_consumer_wakeup(&mut self, group_id: &str) {
        if let Some(group) = self.consumer_groups.get(group_id) {
            self.wakeup_ms = self.wakeup_ms.min(group.wakeup_ms);
        }
    }

    /// Wakes the timer task if a timer is now due before the task means to wake.
    fn reschedule_if_earlier(&mut self, timers_changed: &Notify) {
        if self.wakeup_ms < self.scheduled_tick_ms {
            // The task recomputes its deadline; until then no other request needs to wake it.
            self.scheduled_tick_ms = self.wakeup_ms;
            timers_changed.notify_one();
        }
    }

    /// The earliest time anything is due: a group timer or the offsets-expiry check.
    fn next_tick_ms(&self) -> i64 {
        self.wakeup_ms.min(self.next_offsets_check_ms)
    }
}

impl GroupCoordinator {
    /// Builds the coordinator and replays `store.load()`: committed offsets and groups come back
    /// as their last records left them (`persist.rs`), and restored members' sessions start now.
    /// A record that cannot be decoded fails start-up rather than losing offsets.
    pub fn new(
        config: GroupConfig,
        clock: Arc<dyn Clock>,
        store: Arc<dyn OffsetStore>,
    ) -> Result<Arc<GroupCoordinator>, String> {
        let mut replay = persist::Replay::default();
        for stored in store.load()? {
            match stored {
                StoredRecord::Record {
                    key,
                    value,
                    producer_id: None,
                } => replay_record(&mut replay, &key, value.as_deref())?,
                StoredRecord::Record {
                    key,
                    value,
                    producer_id: Some(producer_id),
                } => replay.pending_offset(producer_id, &key, value.as_deref())?,
                StoredRecord::Marker {
                    partition,
                    producer_id,
                    commit,
                } => {
                    let store = store.as_ref();
                    replay.marker(producer_id, commit, |group| {
                        store.partition_for(group) == partition
                    });
                }
            }
        }
        let pending_txn_offsets = std::mem::take(&mut replay.pending);
        let (groups, consumer_groups) = replay.finish();
        tracing::info!(
            groups = groups.len(),
            consumer_groups = consumer_groups.len(),
            "loaded groups and committed offsets"
        );
        let now_ms = clock.now_ms();
        let coordinator = Arc::new(GroupCoordinator {
            config,
            clock,
            store,
            inner: Mutex::new(Inner {
                groups,
                consumer_groups,
                wakeup_ms: i64::MAX,
                next_offsets_check_ms: now_ms.saturating_add(OFFSETS_RETENTION_CHECK_INTERVAL_MS),
                scheduled_tick_ms: i64::MAX,
                shut_down: false,
                pending_txn_offsets,
            }),
            timers_changed: Notify::new(),
            topic_image: OnceLock::new(),
        });
        coordinator.on_loaded(now_ms);
        Ok(coordinator)
    }

    fn on_loaded(&self, now_ms: i64) {
        let ctx = self.ctx(now_ms);
        let mut inner = self.lock();
        let mut wakeup_ms = i64::MAX;
        for group in inner.groups.values_mut() {
            rebalance::on_loaded(group, &ctx);
            wakeup_ms = wakeup_ms.min(group.wakeup_ms);
        }
        for group in inner.consumer_groups.values_mut() {
            consumer::replay::on_loaded(group, &ctx);
            wakeup_ms = wakeup_ms.min(group.wakeup_ms);
        }
        inner.wakeup_ms = wakeup_ms;
    }

    /// Gives the coordinator the broker's topics (once, at start-up): KIP-848 groups assign by
    /// topic id and resolve regular expressions against them.
    pub fn set_topic_image(&self, topics: Arc<dyn TopicImage>) {
        let _ = self.topic_image.set(topics);
    }

    fn topics(&self) -> &dyn TopicImage {
        match self.topic_image.get() {
            Some(topics) => topics.as_ref(),
            None => &topics::NoTopics,
        }
    }

    /// Runs every due timer of classic and consumer groups.
    fn fire_all_timers(&self, inner: &mut Inner, ctx: &Ctx) {
        rebalance::fire_timers(inner, ctx);
        let topics = self.topics();
        let mut wakeup_ms = inner.wakeup_ms;
        for group in inner.consumer_groups.values_mut() {
            if group.wakeup_ms <= ctx.now_ms {
                consumer::fence::fire_timers(group, ctx, topics);
            }
            wakeup_ms = wakeup_ms.min(group.wakeup_ms);
        }
        inner.wakeup_ms = wakeup_ms;
    }

    /// What an operation at `now_ms` works with.
    fn ctx(&self, now_ms: i64) -> Ctx<'_> {
        Ctx {
            config: &self.config,
            now_ms,
            store: self.store.as_ref(),
        }
    }

    /// Drives time: completes join phases (initial delay, rebalance timeout), expires sessions,
    /// pending members and late syncs, and every `OFFSETS_RETENTION_CHECK_INTERVAL_MS` expires
    /// offsets and drops empty groups. Costs one comparison when nothing is due.
    pub fn tick(&self) {
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock();
        if inner.shut_down {
            return;
        }
        if now_ms >= inner.wakeup_ms {
            self.fire_all_timers(&mut inner, &self.ctx(now_ms));
        }
        if now_ms >= inner.next_offsets_check_ms {
            inner.next_offsets_check_ms =
                now_ms.saturating_add(OFFSETS_RETENTION_CHECK_INTERVAL_MS);
            self.expire_offsets(&mut inner, now_ms);
        }
    }

    /// Calls `tick` whenever something is due, and sleeps in between: no wake-ups while no
    /// timer is armed, and a timer armed earlier than the current sleep cuts it short. The
    /// sleep is measured on the monotonic clock from the gap the coordinator's clock gives, so
    /// a timer fires at most a millisecond after its deadline (`lock_at` covers requests that
    /// arrive in between).
    pub async fn run_timers(&self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let sleep_ms = {
                let now_ms = self.clock.now_ms();
                let mut inner = self.lock();
                if inner.shut_down {
                    return;
                }
                let next_ms = inner.next_tick_ms();
                inner.scheduled_tick_ms = next_ms;
                next_ms.saturating_sub(now_ms).clamp(0, MAX_TIMER_SLEEP_MS)
            };
            let sleep = tokio::time::sleep(Duration::from_millis(sleep_ms as u64));
            tokio::select! {
                _ = sleep => self.tick(),
                _ = self.timers_changed.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Broker shutdown: answers every parked JoinGroup and SyncGroup with NOT_COORDINATOR (the
    /// client looks for the coordinator again), and every later request the same way.
    pub fn shutdown(&self) {
        let mut inner = self.lock();
        inner.shut_down = true;
        let not_coordinator = kafka_protocol::ResponseError::NotCoordinator;
        for group in inner.groups.values_mut() {
            for member in &mut group.members {
                let member_id = member.member_id.clone();
                member.complete_join(JoinOutcome::error(not_coordinator, &member_id));
                member.complete_sync(SyncOutcome::error(not_coordinator));
            }
        }
    }

    /// Locks for a request at `now_ms`, first running every timer already due. A request then
    /// never sees a member whose session is over or a join phase whose time is up merely because
    /// the next `tick` has not come yet: to clients, timers fire at their deadlines, as Kafka's
    /// do (librdkafka's 0081_admin deletes a group a few milliseconds after its last session
    /// ends).
    fn lock_at(&self, now_ms: i64) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        if !inner.shut_down && now_ms >= inner.wakeup_ms {
            self.fire_all_timers(&mut inner, &self.ctx(now_ms));
            inner.reschedule_if_earlier(&self.timers_changed);
        }
        inner
    }

    /// A panic while the lock was held leaves groups as they were at that point; carrying on
    /// serves the other groups, which is better than failing every request from then on.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Applies one stored record to the groups being rebuilt at start-up.
fn replay_record(
    replay: &mut persist::Replay,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(), String> {
    match records::decode_key(key)? {
        RecordKey::OffsetCommit {
            group_id,
            topic,
            partition,
        } => match value {
            Some(value) => {
                let value = records::decode_offset_commit_value(value)?;
                let committed = CommittedOffset {
                    offset: value.offset,
                    leader_epoch: value.leader_epoch,
                    metadata: value.metadata,
                    commit_timestamp_ms: value.commit_timestamp_ms,
                    expire_timestamp_ms: value.expire_timestamp_ms,
                };
                replay
                    .offsets
                    .entry(group_id)
                    .or_default()
                    .entry(topic)
                    .or_default()
                    .insert(partition, committed);
            }
            None => {
                if let Some(offsets) = replay.offsets.get_mut(&group_id) {
                    consumer::remove_from(offsets, &topic, partition);
                }
            }
        },
        RecordKey::GroupMetadata { group_id } => replay.group_metadata(&group_id, value)?,
        RecordKey::Other { record_type }
            if consumer::records::is_consumer_record_type(record_type) =>
        {
            let classic = &mut replay.groups;
            let mut remove_classic = |group_id: &str| {
                classic.remove(group_id);
            };
            consumer::replay::apply(&mut replay.consumer_groups, key, value, &mut remove_classic)?;
        }
        RecordKey::Other { record_type } => {
            tracing::debug!(
                record_type,
                "skipping a __consumer_offsets record of another type"
            );
        }
    }
    Ok(())
}
