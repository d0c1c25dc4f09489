//! DeleteTopics (20): by name (v1-5) or by name or topic id (v6). The topic stops serving at
//! once and its directories and id are removed.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::errors::{code, error_message, throttling_quota_exceeded, topic_error_code};
use super::{throttled_body, Broker, Reply};
use crate::quota::ControllerMutationQuota;

/// A topic's partitions are charged to the client's `controller_mutation_rate` before it is
/// deleted, as Kafka's controller does.
pub fn handle(
    broker: &Broker,
    request: DeleteTopicsRequest,
    version: i16,
    mut quota: ControllerMutationQuota,
) -> Reply {
    let targets: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::nil()))
            .collect()
    };
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let topic = match &name {
                Some(n) => broker.logs.topic(n.as_str()),
                None => broker.logs.topic_by_id(id),
            };
            let mut result = DeletableTopicResult::default()
                .with_name(name.clone())
                .with_topic_id(id);
            match topic {
                None if name.is_none() => result.error_code = code(ResponseError::UnknownTopicId),
                None => result.error_code = code(ResponseError::UnknownTopicOrPartition),
                Some(topic) => {
                    if version >= 6 {
                        result.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
                        result.topic_id = topic.id;
                    }
                    let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                    if let Err(refused) = quota.record(partitions, broker.clock.now_ms()) {
                        let (error_code, message) = throttling_quota_exceeded(refused);
                        result.error_code = error_code;
                        result.error_message = error_message(error_code, message);
                    } else if let Err(e) = broker.logs.delete_topic(&topic.name) {
                        result.error_code = topic_error_code(&e);
                        result.error_message = Some(StrBytes::from_string(e.to_string()));
                    }
                }
            }
            result
        })
        .collect();
    throttled_body(
        DeleteTopicsResponse::default().with_responses(responses),
        quota.throttle_time_ms(broker.clock.now_ms()),
    )
}
