//! One classic group's in-memory state: its members, generation, chosen protocol, leader, the
//! timers that drive it, and its committed offsets. Kafka's `ClassicGroup` and
//! `ClassicGroupMember`. Everything here is bookkeeping on one group; the rebalance protocol
//! that moves a group between states lives in `rebalance.rs`, and no function here sees a clock,
//! a store or a request (`JoinRequest` is only a JoinGroup's fields, owned, for the classic
//! path and for classic members of consumer groups alike).

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

/// Kafka's `ConsumerProtocol.PROTOCOL_TYPE`: groups of this type have subscriptions we can read.
pub(crate) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The classic group states. Kafka's fifth state, Dead, is never stored: a deleted group leaves
/// the map, and "Dead" is only what DescribeGroups says about a group it does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// The name Kafka puts on the wire (DescribeGroups, ListGroups).
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// The parts of a JoinGroup request the coordinator keeps, owned.
pub(crate) struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub version: i16,
}

/// What a parked JoinGroup is eventually answered with, before it is shaped for its version.
#[derive(Debug, Clone, Default)]
pub(crate) struct JoinOutcome {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// (member id, group instance id, metadata); filled only in the leader's answer.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinOutcome {
    pub(crate) fn error(error: ResponseError, member_id: &str) -> JoinOutcome {
        JoinOutcome {
            error_code: error.code(),
            generation_id: -1,
            member_id: member_id.to_string(),
            ..JoinOutcome::default()
        }
    }
}

/// What a parked SyncGroup is eventually answered with.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncOutcome {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    pub(crate) fn error(error: ResponseError) -> SyncOutcome {
        SyncOutcome {
            error_code: error.code(),
            ..SyncOutcome::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

pub(crate) struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    /// Some while the member's JoinGroup is parked: Kafka's "awaiting join".
    pub join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    /// Some while the member's SyncGroup is parked: Kafka's "awaiting sync".
    pub sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
    /// True from the first join until that join is answered; a new member expires even while
    /// it is parked, because nobody knows its id yet to heartbeat with it.
    pub is_new: bool,
    /// When the session (or, for a new member, the join) times out; `i64::MAX` when disarmed.
    pub heartbeat_deadline_ms: i64,
}

impl Member {
    pub(crate) fn metadata(&self, protocol_name: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol_name)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    /// Kafka's `hasSatisfiedHeartbeat`: a known member parked in a join or sync is alive by
    /// definition, since its socket is muted and it cannot heartbeat.
    pub(crate) fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.join_waiter.is_some() || self.sync_waiter.is_some())
    }

    /// Answers the parked JoinGroup, if any. A client that went away dropped its receiver; that
    /// is not an error here.
    pub(crate) fn complete_join(&mut self, outcome: JoinOutcome) -> bool {
        match self.join_waiter.take() {
            Some(sender) => {
                let _ = sender.send(outcome);
                true
            }
            None => false,
        }
    }

    pub(crate) fn complete_sync(&mut self, outcome: SyncOutcome) -> bool {
        match self.sync_waiter.take() {
            Some(sender) => {
                let _ = sender.send(outcome);
                true
            }
            None => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    pub expire_timestamp_ms: Option<i64>,
}

/// The join-phase timer. The initial rebalance of an empty group waits in steps of
/// `group_initial_rebalance_delay_ms` while new members keep arriving; any other rebalance waits
/// at most the rebalance timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinTimer {
    Initial { delay_ms: i64, remaining_ms: i64 },
    Rebalance,
}

/// A timer that is due, as found by [`ClassicGroup::next_due_timer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DueTimer {
    PendingMember(String),
    Heartbeat(String),
    Join,
    Sync,
}

pub(crate) struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    pub previous_state: GroupState,
    /// When the group entered its state; None for a group rebuilt from stored offsets, whose
    /// offsets then expire by their commit timestamps, as Kafka does without that timestamp.
    pub state_since_ms: Option<i64>,
    pub generation_id: i32,
    /// Set by the first member to join; None for a group that only ever had simple commits.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// In join order, which decides who leads when the leader leaves.
    pub members: Vec<Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, and when each expires if it never rejoins.
    pub pending_members: HashMap<String, i64>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pub pending_sync_members: HashSet<String>,
    /// Set when a member joins during the initial rebalance, to extend its delay once more.
    pub new_member_added: bool,
    pub join_timer: Option<(i64, JoinTimer)>,
    pub sync_deadline_ms: Option<i64>,
    /// Topics the members subscribe to (consumer protocol only); None when unknown.
    pub subscribed_topics: Option<HashSet<String>>,
    pub offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
    /// A lower bound on the earliest armed timer, so `tick` can skip a group cheaply.
    pub wakeup_ms: i64,
}

impl ClassicGroup {
    pub(crate) fn new(group_id: &str, now_ms: Option<i64>) -> ClassicGroup {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_since_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            pending_members: HashMap::new(),
            pending_sync_members: HashSet::new(),
            new_member_added: false,
            join_timer: None,
            sync_deadline_ms: None,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
            wakeup_ms: i64::MAX,
        }
    }

    pub(crate) fn transition_to(&mut self, state: GroupState, now_ms: i64) {
        self.previous_state = self.state;
        self.state = state;
        self.state_since_ms = Some(now_ms);
    }

    pub(crate) fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    pub(crate) fn member_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    pub(crate) fn static_member_id(&self, group_instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(group_instance_id))
            .map(|m| m.member_id.clone())
    }

    pub(crate) fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub(crate) fn has_offsets(&self) -> bool {
        !self.offsets.is_empty()
    }

    /// Kafka's `validateMember`: a static member is checked by its instance id, so a stale member
    /// id of a known instance is fenced rather than merely unknown.
    pub(crate) fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        match group_instance_id {
            Some(instance_id) => match self.static_member_id(instance_id) {
                None => Err(ResponseError::UnknownMemberId),
                Some(existing) if existing != member_id => Err(ResponseError::FencedInstanceId),
                Some(_) => Ok(()),
            },
            None if self.member(member_id).is_none() => Err(ResponseError::UnknownMemberId),
            None => Ok(()),
        }
    }

    /// Arms a timer: every deadline goes through here so that `wakeup_ms` stays a lower bound.
    pub(crate) fn arm(&mut self, deadline_ms: i64) {
        self.wakeup_ms = self.wakeup_ms.min(deadline_ms);
    }

    pub(crate) fn set_join_timer(&mut self, deadline_ms: i64, timer: JoinTimer) {
        self.join_timer = Some((deadline_ms, timer));
        self.arm(deadline_ms);
    }

    pub(crate) fn set_sync_deadline(&mut self, deadline_ms: i64) {
        self.sync_deadline_ms = Some(deadline_ms);
        self.arm(deadline_ms);
    }

    pub(crate) fn reschedule_heartbeat(&mut self, member_id: &str, deadline_ms: i64) {
        if let Some(member) = self.member_mut(member_id) {
            member.heartbeat_deadline_ms = deadline_ms;
            self.arm(deadline_ms);
        }
    }

    pub(crate) fn add_pending_member(&mut self, member_id: String, deadline_ms: i64) {
        self.pending_members.insert(member_id, deadline_ms);
        self.arm(deadline_ms);
    }

    /// Kafka's `add`: the first member fixes the protocol type and becomes leader.
    pub(crate) fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.arm(member.heartbeat_deadline_ms);
        self.members.push(member);
    }

    /// Kafka's `remove`: drops the member (its parked requests are the caller's business) and
    /// hands leadership to the next member in join order.
    pub(crate) fn remove(&mut self, member_id: &str) -> Option<Member> {
        self.pending_members.remove(member_id);
        self.pending_sync_members.remove(member_id);
        let position = self.members.iter().position(|m| m.member_id == member_id)?;
        let removed = self.members.remove(position);
        if self.is_leader(member_id) {
            self.leader_id = self.members.first().map(|m| m.member_id.clone());
        }
        Some(removed)
    }

    /// Kafka's `replaceStaticMember`: the instance's member takes `new_member_id`, keeping its
    /// assignment, client id and host; requests parked under the old id are fenced.
    pub(crate) fn replace_static_member(&mut self, old_member_id: &str, new_member_id: &str) {
        let Some(member) = self.member_mut(old_member_id) else {
            return;
        };
        member.complete_join(JoinOutcome::error(
            ResponseError::FencedInstanceId,
            old_member_id,
        ));
        member.complete_sync(SyncOutcome::error(ResponseError::FencedInstanceId));
        member.member_id = new_member_id.to_string();
        if self.is_leader(old_member_id) {
            self.leader_id = Some(new_member_id.to_string());
        }
        if self.pending_sync_members.remove(old_member_id) {
            self.pending_sync_members.insert(new_member_id.to_string());
        }
    }

    pub(crate) fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.iter().all(|m| m.join_waiter.is_some())
    }

    pub(crate) fn awaiting_join_count(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.join_waiter.is_some())
            .count()
    }

    /// The join phase waits at most the largest rebalance timeout of the members.
    pub(crate) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn can_rebalance(&self) -> bool {
        self.state != GroupState::PreparingRebalance
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty type; otherwise the type
    /// must match and one of the joiner's protocols must be supported by every member.
    pub(crate) fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|p| self.count_supporting(&p.name) == self.members.len())
    }

    fn count_supporting(&self, protocol_name: &str) -> usize {
        self.members
            .iter()
            .filter(|m| m.protocols.iter().any(|p| p.name == protocol_name))
            .count()
    }

    /// Kafka's `selectProtocol`: among the protocols every member supports, each member votes
    /// for its most preferred one and the most votes win. Ties go to the first member's preference,
    /// which Kafka leaves to hash order.
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&str> = self
            .members
            .first()?
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.count_supporting(name) == self.members.len())
            .collect();
        let mut votes: Vec<(&str, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for member in &self.members {
            let vote = member
                .protocols
                .iter()
                .find(|p| candidates.contains(&p.name.as_str()));
            if let Some(vote) = vote {
                if let Some(entry) = votes.iter_mut().find(|(name, _)| *name == vote.name) {
                    entry.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, count)| *count).max()?;
        votes
            .iter()
            .find(|(_, count)| *count == best)
            .map(|(name, _)| name.to_string())
    }

    /// Kafka's `computeSubscribedTopics`, which reads only the version-0 prefix of each member's
    /// `ConsumerProtocolSubscription` so that any future version parses.
    pub(crate) fn compute_subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol_name = self.protocol_name.as_deref()?;
        let mut topics = HashSet::new();
        for member in &self.members {
            let mut metadata = member.metadata(protocol_name);
            if metadata.len() < 2 {
                return None;
            }
            let _version = bytes::Buf::get_i16(&mut metadata);
            let subscription = ConsumerProtocolSubscription::decode(&mut metadata, 0).ok()?;
            topics.extend(subscription.topics.iter().map(|t| t.to_string()));
        }
        Some(topics)
    }

    pub(crate) fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        self.subscribed_topics
            .as_ref()
            .is_some_and(|topics| topics.contains(topic))
    }

    /// The earliest timer that is due at `now_ms`, if any.
    pub(crate) fn next_due_timer(&self, now_ms: i64) -> Option<DueTimer> {
        let mut best: Option<(i64, DueTimer)> = None;
        let mut consider = |deadline_ms: i64, timer: DueTimer| {
            if deadline_ms <= now_ms && best.as_ref().is_none_or(|(d, _)| deadline_ms < *d) {
                best = Some((deadline_ms, timer));
            }
        };
        for (member_id, deadline_ms) in &self.pending_members {
            consider(*deadline_ms, DueTimer::PendingMember(member_id.clone()));
        }
        for member in &self.members {
            consider(
                member.heartbeat_deadline_ms,
                DueTimer::Heartbeat(member.member_id.clone()),
            );
        }
        if let Some((deadline_ms, _)) = self.join_timer {
            consider(deadline_ms, DueTimer::Join);
        }
        if let Some(deadline_ms) = self.sync_deadline_ms {
            consider(deadline_ms, DueTimer::Sync);
        }
        best.map(|(_, timer)| timer)
    }

    /// The exact earliest armed deadline, used to reset `wakeup_ms` after timers fire.
    pub(crate) fn next_deadline_ms(&self) -> i64 {
        let pending = self.pending_members.values().copied();
        let heartbeats = self.members.iter().map(|m| m.heartbeat_deadline_ms);
        let join = self.join_timer.map(|(d, _)| d);
        pending
            .chain(heartbeats)
            .chain(join)
            .chain(self.sync_deadline_ms)
            .min()
            .unwrap_or(i64::MAX)
    }
}
