//! CreateTopics (19): one broker, so the replication factor is 1 (or -1 for the default) and
//! any larger factor is refused with Kafka's message. Configs are validated against Kafka's
//! names and stored with the topic; `validate_only` checks everything and creates nothing.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::ResponseError;

use super::errors::{code, error_message, throttling_quota_exceeded, topic_error_code};
use super::{throttled_body, Broker, Reply};
use crate::quota::ControllerMutationQuota;
use crate::storage::{validate_topic_name, TopicConfigs};

/// Each topic's partitions are charged to the client's `controller_mutation_rate` once the
/// topic is valid, as Kafka's controller does (in `validate_only` too).
pub fn handle(
    broker: &Broker,
    request: CreateTopicsRequest,
    version: i16,
    mut quota: ControllerMutationQuota,
) -> Reply {
    let mut seen = HashSet::new();
    let duplicated: HashSet<String> = request
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.to_string()))
        .map(|t| t.name.to_string())
        .collect();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            // kafka-protocol defaults the message to ""; Kafka sends null for a created topic.
            let mut result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_message(None);
            let outcome = if duplicated.contains(topic.name.as_str()) {
                Err((
                    code(ResponseError::InvalidRequest),
                    format!("topic '{}' appears twice in the request", &*topic.name),
                ))
            } else {
                create_one(broker, &topic, request.validate_only, &mut quota)
            };
            match outcome {
                Ok((partitions, id)) => {
                    result.num_partitions = partitions;
                    result.replication_factor = 1;
                    result.topic_id = id;
                }
                Err((error_code, message)) => {
                    result.error_code = error_code;
                    result.error_message = error_message(error_code, message);
                    result.num_partitions = -1;
                    result.replication_factor = -1;
                }
            }
            if version < 5 {
                result.num_partitions = -1;
                result.replication_factor = -1;
            }
            if version >= 5 {
                result.configs = Some(Vec::new());
            }
            result
        })
        .collect();
    throttled_body(
        CreateTopicsResponse::default().with_topics(topics),
        quota.throttle_time_ms(broker.clock.now_ms()),
    )
}

type Created = (i32, uuid::Uuid);

fn create_one(
    broker: &Broker,
    topic: &CreatableTopic,
    validate_only: bool,
    quota: &mut ControllerMutationQuota,
) -> Result<Created, (i16, String)> {
    let name = topic.name.as_str();
    validate_topic_name(name).map_err(|e| (topic_error_code(&e), e.to_string()))?;
    if broker.logs.topic(name).is_some() {
        return Err((
            code(ResponseError::TopicAlreadyExists),
            format!("Topic '{name}' already exists."),
        ));
    }
    let partitions = partition_count(broker, topic)?;
    let replication_factor = if topic.replication_factor == -1 {
        broker.config.default_replication_factor
    } else {
        topic.replication_factor
    };
    if replication_factor != 1 {
        let message = if replication_factor > 1 {
            format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) are registered.")
        } else {
            "Replication factor must be larger than 0, or -1 to use the default value.".to_string()
        };
        return Err((code(ResponseError::InvalidReplicationFactor), message));
    }
    let configs: BTreeMap<String, String> = topic
        .configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.to_string(), v.to_string()))
        })
        .collect();
    let configs =
        TopicConfigs::validated(configs).map_err(|e| (topic_error_code(&e), e.to_string()))?;
    quota
        .record(partitions, broker.clock.now_ms())
        .map_err(throttling_quota_exceeded)?;
    if validate_only {
        return Ok((partitions, uuid::Uuid::nil()));
    }
    let created = broker
        .logs
        .create_topic(name, partitions, configs, broker.clock.now_ms())
        .map_err(|e| (topic_error_code(&e), e.to_string()))?;
    Ok((partitions, created.id))
}

fn partition_count(broker: &Broker, topic: &CreatableTopic) -> Result<i32, (i16, String)> {
    if topic.assignments.is_empty() {
        return match topic.num_partitions {
            -1 => Ok(broker.config.num_partitions),
            n if n > broker.config.max_partitions_per_topic => Err((
                code(ResponseError::InvalidPartitions),
                format!(
                    "{n} partitions exceed this broker's sluice.max.partitions.per.topic of {}",
                    broker.config.max_partitions_per_topic
                ),
            )),
            n if n > 0 => Ok(n),
            _ => Err((
                code(ResponseError::InvalidPartitions),
                "Number of partitions must be larger than 0, or -1 to use the default value."
                    .into(),
            )),
        };
    }
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err((code(ResponseError::InvalidRequest), "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into()));
    }
    let node = broker.config.node_id;
    for (expected, assignment) in topic.assignments.iter().enumerate() {
        let on_this_node = assignment.broker_ids.len() == 1 && assignment.broker_ids[0].0 == node;
        if assignment.partition_index != expected as i32 || !on_this_node {
            return Err((
                code(ResponseError::InvalidReplicaAssignment),
                format!("replica assignment must place partitions 0..n-1 on broker {node} only"),
            ));
        }
    }
    i32::try_from(topic.assignments.len()).map_err(|_| {
        (
            code(ResponseError::InvalidPartitions),
            "too many partitions".into(),
        )
    })
}
