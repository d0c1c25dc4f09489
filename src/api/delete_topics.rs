//! DeleteTopics (20): by name (v1-5) or by name or topic id (v6). The topic stops serving at
//! once and its directories and id are removed.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::errors::{code, topic_error_code};
use super::Broker;

pub fn handle(broker: &Broker, request: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
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
                    if let Err(e) = broker.logs.delete_topic(&topic.name) {
                        result.error_code = topic_error_code(&e);
                        result.error_message = Some(StrBytes::from_string(e.to_string()));
                    }
                }
            }
            result
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
