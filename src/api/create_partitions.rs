//! CreatePartitions (37): grow a topic's partition count. Manual assignments must place every
//! new partition on this broker alone.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::{code, topic_error_code};
use super::Broker;

pub fn handle(broker: &Broker, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let node = broker.config.node_id;
    let results = request
        .topics
        .into_iter()
        .map(|topic| {
            let mut result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
            let single_node = topic.assignments.as_ref().is_none_or(|a| {
                a.iter()
                    .all(|p| p.broker_ids.len() == 1 && p.broker_ids[0].0 == node)
            });
            let outcome = if !single_node {
                Err((
                    code(ResponseError::InvalidReplicaAssignment),
                    format!("new partitions must be assigned to broker {node} only"),
                ))
            } else {
                broker
                    .logs
                    .create_partitions(
                        topic.name.as_str(),
                        topic.count,
                        request.validate_only,
                        broker.clock.now_ms(),
                    )
                    .map_err(|e| (topic_error_code(&e), e.to_string()))
            };
            if let Err((error_code, message)) = outcome {
                result.error_code = error_code;
                result.error_message = Some(StrBytes::from_string(message));
            }
            result
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
