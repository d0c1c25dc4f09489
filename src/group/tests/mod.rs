//! Tests of the group coordinator: a manual clock, an in-memory offset store, and helpers that
//! drive joins and syncs the way a consumer does. Parked requests run as tokio tasks on the
//! test's single-threaded runtime; `settle` lets them reach their await point.

mod membership;
mod offsets;
mod persistence;
mod records;
mod static_members;
mod txn_offsets;
mod versions;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolSubscription, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    OffsetCommitRequest, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::task::JoinHandle;

use super::{GroupConfig, GroupCoordinator, OffsetStore, StoreError, StoredRecord};
use crate::config::Config;
use crate::time::Clock;

pub(super) const SESSION_TIMEOUT_MS: i32 = 10_000;
pub(super) const REBALANCE_TIMEOUT_MS: i32 = 60_000;
pub(super) const INITIAL_DELAY_MS: i64 = 3_000;

pub(super) struct ManualClock(AtomicI64);

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Keeps every appended record (`records`: the coordinator's own, for tests to inspect; `log`:
/// everything, transactional records and markers included, in order); `fail` makes appends
/// fail, as a full disk would.
#[derive(Default)]
pub(super) struct MemoryStore {
    pub records: Mutex<Vec<(Bytes, Option<Bytes>)>>,
    pub log: Mutex<Vec<StoredRecord>>,
    pub fail: AtomicBool,
}

impl MemoryStore {
    fn store(
        &self,
        records: Vec<(Bytes, Option<Bytes>)>,
        producer_id: Option<i64>,
    ) -> Result<(), StoreError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Io("injected failure".to_string()));
        }
        let mut log = self.log.lock().unwrap();
        for (key, value) in &records {
            log.push(StoredRecord::Record {
                key: key.clone(),
                value: value.clone(),
                producer_id,
            });
        }
        if producer_id.is_none() {
            self.records.lock().unwrap().extend(records);
        }
        Ok(())
    }
}

impl OffsetStore for MemoryStore {
    fn append(
        &self,
        _group_id: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError> {
        self.store(records, None)
    }

    fn append_transactional(
        &self,
        _group_id: &str,
        producer_id: i64,
        _producer_epoch: i16,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), StoreError> {
        self.store(records, Some(producer_id))
    }

    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        _producer_epoch: i16,
        commit: bool,
        _coordinator_epoch: i32,
        _transaction_version: i8,
    ) -> Result<(), StoreError> {
        self.log.lock().unwrap().push(StoredRecord::Marker {
            partition,
            producer_id,
            commit,
        });
        Ok(())
    }

    fn partition_for(&self, group_id: &str) -> i32 {
        crate::group::records::offsets_partition_for(group_id, 50)
    }

    fn load(&self) -> Result<Vec<StoredRecord>, String> {
        Ok(self.log.lock().unwrap().clone())
    }
}

pub(super) struct Harness {
    pub clock: Arc<ManualClock>,
    pub store: Arc<MemoryStore>,
    pub coordinator: Arc<GroupCoordinator>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(GroupConfig::from_broker(&Config::default()))
    }

    pub fn with_config(config: GroupConfig) -> Harness {
        let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000)));
        let store = Arc::new(MemoryStore::default());
        let coordinator = GroupCoordinator::new(config, clock.clone(), store.clone()).unwrap();
        Harness {
            clock,
            store,
            coordinator,
        }
    }

    /// A new coordinator over the same store and clock, as after a broker restart.
    pub fn restart(&self) -> Harness {
        self.restart_with(GroupConfig::from_broker(&Config::default()))
    }

    pub fn restart_with(&self, config: GroupConfig) -> Harness {
        let coordinator =
            GroupCoordinator::new(config, self.clock.clone(), self.store.clone()).unwrap();
        Harness {
            clock: self.clock.clone(),
            store: self.store.clone(),
            coordinator,
        }
    }

    /// Moves time on and lets the coordinator act on it.
    pub async fn advance(&self, delta_ms: i64) {
        self.clock.0.fetch_add(delta_ms, Ordering::SeqCst);
        self.coordinator.tick();
        settle().await;
    }

    pub fn spawn_join(
        &self,
        request: JoinGroupRequest,
        version: i16,
    ) -> JoinHandle<JoinGroupResponse> {
        let coordinator = self.coordinator.clone();
        tokio::spawn(async move {
            coordinator
                .join_group(request, version, "client", "/127.0.0.1")
                .await
        })
    }

    pub async fn join(&self, request: JoinGroupRequest, version: i16) -> JoinGroupResponse {
        self.coordinator
            .join_group(request, version, "client", "/127.0.0.1")
            .await
    }

    /// A v5 dynamic member's first join: MEMBER_ID_REQUIRED hands out the id, and the second join
    /// parks with it.
    pub async fn join_new_member(&self, group: &str) -> (String, JoinHandle<JoinGroupResponse>) {
        let first = self.join(join_request(group, ""), 5).await;
        assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
        let member_id = first.member_id.to_string();
        let handle = self.spawn_join(join_request(group, &member_id), 5);
        settle().await;
        (member_id, handle)
    }

    pub fn spawn_sync(
        &self,
        group: &str,
        member_id: &str,
        generation_id: i32,
        assignments: &[(&str, &[u8])],
    ) -> JoinHandle<SyncGroupResponse> {
        let coordinator = self.coordinator.clone();
        let request = sync_request(group, member_id, generation_id, assignments);
        tokio::spawn(async move { coordinator.sync_group(request, 3).await })
    }

    pub fn heartbeat(&self, group: &str, member_id: &str, generation_id: i32) -> i16 {
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_member_id(StrBytes::from_string(member_id.to_string()))
            .with_generation_id(generation_id);
        self.coordinator.heartbeat(request, 3).error_code
    }

    /// Forms a Stable group of `count` dynamic members (the first leads, subscribed to `topic`)
    /// and returns their ids and the generation.
    pub async fn stable_group(&self, group: &str, count: usize) -> (Vec<String>, i32) {
        let mut joins = Vec::new();
        for _ in 0..count {
            joins.push(self.join_new_member(group).await);
        }
        self.advance(INITIAL_DELAY_MS).await;
        self.advance(INITIAL_DELAY_MS).await;
        let mut ids = Vec::new();
        let mut generation_id = 0;
        for (member_id, handle) in joins {
            let response = handle.answered().await;
            assert_eq!(response.error_code, 0);
            generation_id = response.generation_id;
            ids.push(member_id);
        }
        let assignments: Vec<(&str, &[u8])> = ids
            .iter()
            .map(|id| (id.as_str(), &b"assigned"[..]))
            .collect();
        let syncs: Vec<_> = ids
            .iter()
            .map(|id| self.spawn_sync(group, id, generation_id, &assignments))
            .collect();
        for sync in syncs {
            assert_eq!(sync.answered().await.error_code, 0);
        }
        (ids, generation_id)
    }

    pub fn commit(&self, request: OffsetCommitRequest, version: i16) -> Vec<i16> {
        let response = self
            .coordinator
            .offset_commit(request, version, &|topic, partition| {
                topic != "missing" && (0..8).contains(&partition)
            });
        response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect()
    }
}

/// Awaits a spawned request, failing the test instead of hanging when it stays parked.
pub(super) trait Answered<T> {
    async fn answered(self) -> T;
}

impl<T> Answered<T> for JoinHandle<T> {
    async fn answered(self) -> T {
        match tokio::time::timeout(std::time::Duration::from_secs(5), self).await {
            Ok(result) => result.expect("request task panicked"),
            Err(_) => panic!("request is still parked"),
        }
    }
}

/// Lets spawned requests run up to the point where they park.
pub(super) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

pub(super) fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

pub(super) fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// A consumer's subscription metadata: i16 version, then `ConsumerProtocolSubscription`.
pub(super) fn subscription(topics: &[&str]) -> Bytes {
    let body = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.to_string()))
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    body.encode(&mut buf, 0).unwrap();
    buf.freeze()
}

pub(super) fn join_request(group: &str, member_id: &str) -> JoinGroupRequest {
    join_request_with(group, member_id, &[("range", subscription(&["topic"]))])
}

pub(super) fn join_request_with(
    group: &str,
    member_id: &str,
    protocols: &[(&str, Bytes)],
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_session_timeout_ms(SESSION_TIMEOUT_MS)
        .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|(name, metadata)| {
                    JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_string(name.to_string()))
                        .with_metadata(metadata.clone())
                })
                .collect(),
        )
}

pub(super) fn sync_request(
    group: &str,
    member_id: &str,
    generation_id: i32,
    assignments: &[(&str, &[u8])],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_generation_id(generation_id)
        .with_assignments(
            assignments
                .iter()
                .map(|(id, assignment)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(id.to_string()))
                        .with_assignment(Bytes::copy_from_slice(assignment))
                })
                .collect(),
        )
}

/// A commit of `offset` to partitions of one topic, with metadata "meta" and leader epoch 7.
pub(super) fn commit_request(
    group: &str,
    member_id: &str,
    generation_id: i32,
    topic: &str,
    partitions: &[i32],
    offset: i64,
) -> OffsetCommitRequest {
    let partitions = partitions
        .iter()
        .map(|p| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(7)
                .with_committed_metadata(Some(StrBytes::from_static_str("meta")))
        })
        .collect();
    OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_generation_id_or_member_epoch(generation_id)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(partitions)])
}
