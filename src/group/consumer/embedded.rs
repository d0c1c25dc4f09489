//! The consumer protocol embedded in the classic protocol (Kafka's `ConsumerProtocol`): the
//! subscription a classic member puts in its JoinGroup metadata and the assignment it receives
//! in SyncGroup, each an i16 version followed by the struct at that version. A consumer group
//! reads the one to take classic members in (their topics, rack and owned partitions) and
//! writes the other to hand them their partitions, so that classic and consumer-protocol
//! members can share a group (and a group can change protocol online, `migrate.rs`).
//!
//! As in Kafka, a version above the highest known (3) is read and written as 3, a negative one
//! is malformed, and the embedded structs name topics: ids are resolved through the topic
//! image, and topics it does not know are left out.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::member::PartitionSet;
use crate::group::topics::TopicImage;

/// The highest version of both embedded structs this broker reads and writes.
const HIGHEST_VERSION: i16 = 3;

/// Embedded bytes that cannot be read (Kafka's `SchemaException`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed(pub String);

/// What a classic member's subscription says, with topic names resolved to ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub topics: BTreeSet<String>,
    pub rack_id: Option<String>,
    /// The partitions the member says it owns (version 1+), by topic id.
    pub owned: Vec<(Uuid, Vec<i32>)>,
}

/// Kafka's `deserializeVersion`: the leading i16.
pub(crate) fn version(bytes: &[u8]) -> Result<i16, Malformed> {
    if bytes.len() < 2 {
        return Err(Malformed(
            "the embedded protocol has no version".to_string(),
        ));
    }
    Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
}

/// Kafka's `checkSubscriptionVersion` / `checkAssignmentVersion`.
fn checked(version: i16) -> Result<i16, Malformed> {
    if version < 0 {
        return Err(Malformed(format!("Unsupported version: {version}")));
    }
    Ok(version.min(HIGHEST_VERSION))
}

/// Kafka's `deserializeConsumerProtocolSubscription`, with owned partitions by topic id.
pub(crate) fn subscription(
    bytes: &[u8],
    topics: &dyn TopicImage,
) -> Result<Subscription, Malformed> {
    let version = checked(version(bytes)?)?;
    let mut body = Bytes::copy_from_slice(&bytes[2..]);
    let decoded = ConsumerProtocolSubscription::decode(&mut body, version)
        .map_err(|e| Malformed(e.to_string()))?;
    let owned = decoded
        .owned_partitions
        .iter()
        .filter_map(|tp| {
            let topic = topics.by_name(tp.topic.as_str())?;
            Some((topic.id, tp.partitions.clone()))
        })
        .collect();
    Ok(Subscription {
        topics: decoded.topics.iter().map(|t| t.to_string()).collect(),
        rack_id: decoded.rack_id.map(|r| r.to_string()),
        owned,
    })
}

/// Why a classic member's assignment cannot be carried into a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AssignmentError {
    Malformed(Malformed),
    /// It carries user data (a custom assignor's), which a consumer group would lose.
    UserData,
}

/// Kafka's `deserializeConsumerProtocolAssignment` followed by `toTopicPartitionMap`: an empty
/// byte string is no assignment.
pub(crate) fn assignment(
    bytes: &[u8],
    topics: &dyn TopicImage,
) -> Result<PartitionSet, AssignmentError> {
    if bytes.is_empty() {
        return Ok(PartitionSet::new());
    }
    let version = checked(version(bytes).map_err(AssignmentError::Malformed)?)
        .map_err(AssignmentError::Malformed)?;
    let mut body = Bytes::copy_from_slice(&bytes[2..]);
    let decoded = ConsumerProtocolAssignment::decode(&mut body, version)
        .map_err(|e| AssignmentError::Malformed(Malformed(e.to_string())))?;
    if decoded
        .user_data
        .as_ref()
        .is_some_and(|d| d.has_remaining())
    {
        return Err(AssignmentError::UserData);
    }
    let mut set = PartitionSet::new();
    for tp in &decoded.assigned_partitions {
        if let Some(topic) = topics.by_name(tp.topic.as_str()) {
            set.entry(topic.id)
                .or_default()
                .extend(tp.partitions.iter().copied());
        }
    }
    Ok(set)
}

/// Kafka's `serializeAssignment` of `toConsumerProtocolAssignment`: the partitions by topic
/// name, at `version` (the member's subscription version, at most 3).
pub(crate) fn encode_assignment(
    partitions: &BTreeMap<Uuid, BTreeSet<i32>>,
    version: i16,
    topics: &dyn TopicImage,
) -> Result<Bytes, Malformed> {
    let version = checked(version)?;
    let assigned = partitions
        .iter()
        .filter_map(|(id, ps)| {
            let topic = topics.by_id(*id)?;
            Some(
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.name)))
                    .with_partitions(ps.iter().copied().collect()),
            )
        })
        .collect();
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    assignment
        .encode(&mut buf, version)
        .map_err(|e| Malformed(e.to_string()))?;
    Ok(buf.freeze())
}
