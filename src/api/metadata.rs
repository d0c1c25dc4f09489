//! Metadata (3): this node is the only broker, the controller, and every partition's leader
//! and sole replica. Topic ids are the stable ones from `partition.metadata`. Unknown topics are
//! created here when both the request and `auto.create.topics.enable` allow it.
//!
//! With ACLs, as Kafka: topics the caller may not DESCRIBE are left out of an all-topics
//! answer, and answered TOPIC_AUTHORIZATION_FAILED when named (with no id, so existence is not
//! revealed; by id, with the id and no name); auto-creation also needs CREATE on the cluster
//! or the topic. `topic_authorized_operations` (v8+) and `cluster_authorized_operations`
//! (v8-10) are filled when asked for.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::authorize::Authz;
use super::errors::{code, topic_error_code};
use super::{Broker, Session};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::storage::consumer_offsets::CONSUMER_OFFSETS_TOPIC;
use crate::storage::{validate_topic_name, Topic, TopicConfigs, TopicError};

pub fn handle(
    broker: &Broker,
    session: &Session,
    authz: &Authz<'_>,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let config = &broker.config;
    let node = BrokerId(config.node_id);
    let brokers = vec![MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(StrBytes::from_string(
            broker.config.listeners[session.listener]
                .advertised
                .host
                .clone(),
        ))
        .with_port(i32::from(
            broker.config.listeners[session.listener].advertised.port,
        ))];
    // Before v4 every request may auto-create; from v4 the client says.
    let allow_create =
        config.auto_create_topics_enable && (version < 4 || request.allow_auto_topic_creation);
    let include_ops = version >= 8 && request.include_topic_authorized_operations;

    let topics = match request.topics {
        // v0: an empty list means all topics; v1+: null means all, empty means none.
        None => all_topics(broker, authz),
        Some(ref list) if list.is_empty() && version == 0 => all_topics(broker, authz),
        Some(list) => list
            .into_iter()
            .map(|t| match (t.name, t.topic_id) {
                // As Kafka does: a non-zero topic id wins over the name, which clients
                // looking up by id leave empty rather than null.
                (_, id) if !id.is_nil() => describe_by_id(broker, authz, id),
                (Some(name), _) => describe_by_name(broker, authz, name.as_str(), allow_create),
                (None, id) => describe_by_id(broker, authz, id),
            })
            .collect(),
    };
    let topics = topics
        .into_iter()
        .map(|topic| match topic {
            Described::Found(t) => {
                let ops = include_ops.then(|| authz.operations(ResourceType::Topic, &t.name));
                describe(&t, node, ops)
            }
            Described::Error {
                name,
                id,
                error_code,
            } => MetadataResponseTopic::default()
                .with_name(name.map(|n| TopicName(StrBytes::from_string(n))))
                .with_topic_id(id)
                .with_error_code(error_code),
        })
        .collect();

    let mut response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_topics(topics);
    if version >= 1 {
        response.controller_id = node;
    }
    if version >= 2 {
        response.cluster_id = Some(StrBytes::from_string(broker.logs.cluster_id().to_string()));
    }
    if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = if authz.cluster(Operation::Describe) {
            authz.operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        };
    }
    response
}

enum Described {
    Found(std::sync::Arc<Topic>),
    Error {
        name: Option<String>,
        id: Uuid,
        error_code: i16,
    },
}

fn all_topics(broker: &Broker, authz: &Authz<'_>) -> Vec<Described> {
    broker
        .logs
        .topics()
        .into_iter()
        .filter(|t| authz.topic(Operation::Describe, &t.name))
        .map(Described::Found)
        .collect()
}

fn describe_by_name(
    broker: &Broker,
    authz: &Authz<'_>,
    name: &str,
    allow_create: bool,
) -> Described {
    let denied = || Described::Error {
        name: Some(name.to_string()),
        id: Uuid::nil(),
        error_code: code(ResponseError::TopicAuthorizationFailed),
    };
    // Authorization before existence, so that existence is not revealed.
    if !authz.topic(Operation::Describe, name) {
        return denied();
    }
    if let Some(topic) = broker.logs.topic(name) {
        return Described::Found(topic);
    }
    let error = |e: &TopicError| Described::Error {
        name: Some(name.to_string()),
        id: Uuid::nil(),
        error_code: topic_error_code(e),
    };
    if let Err(e) = validate_topic_name(name) {
        return error(&e);
    }
    if !allow_create {
        return error(&TopicError::UnknownTopic);
    }
    if !authz.cluster(Operation::Create) && !authz.topic(Operation::Create, name) {
        return denied();
    }
    let now_ms = broker.clock.now_ms();
    match broker.logs.create_topic(
        name,
        broker.config.num_partitions,
        TopicConfigs::default(),
        now_ms,
    ) {
        Ok(topic) => Described::Found(topic),
        // Another request created it first: describe that one.
        Err(TopicError::AlreadyExists) => broker
            .logs
            .topic(name)
            .map(Described::Found)
            .unwrap_or_else(|| error(&TopicError::UnknownTopic)),
        Err(e) => {
            tracing::warn!(topic = name, "auto-create failed: {e}");
            error(&e)
        }
    }
}

fn describe_by_id(broker: &Broker, authz: &Authz<'_>, id: Uuid) -> Described {
    match broker.logs.topic_by_id(id) {
        Some(topic) if !authz.topic(Operation::Describe, &topic.name) => Described::Error {
            name: None,
            id,
            error_code: code(ResponseError::TopicAuthorizationFailed),
        },
        Some(topic) => Described::Found(topic),
        None => Described::Error {
            name: None,
            id,
            error_code: code(ResponseError::UnknownTopicId),
        },
    }
}

fn describe(topic: &Topic, node: BrokerId, operations: Option<i32>) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p.index)
                .with_leader_id(node)
                .with_leader_epoch(p.leader_epoch())
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    let mut described = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.name == CONSUMER_OFFSETS_TOPIC)
        .with_partitions(partitions);
    if let Some(operations) = operations {
        described.topic_authorized_operations = operations;
    }
    described
}
