//! CreatePartitions (37): grow a topic's partition count. Manual assignments must place every
//! new partition on this broker alone.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::ResponseError;

use super::errors::{code, error_message, throttling_quota_exceeded, topic_error_code};
use super::{throttled_body, Broker, Reply};
use crate::quota::ControllerMutationQuota;

/// The partitions a topic gains are charged to the client's `controller_mutation_rate` before
/// they are created, as Kafka's controller does (in `validate_only` too).
pub fn handle(
    broker: &Broker,
    request: CreatePartitionsRequest,
    mut quota: ControllerMutationQuota,
) -> Reply {
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
            } else if let Err(refused) =
                charge(broker, &mut quota, topic.name.as_str(), topic.count)
            {
                Err(throttling_quota_exceeded(refused))
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
                result.error_message = error_message(error_code, message);
            }
            result
        })
        .collect();
    throttled_body(
        CreatePartitionsResponse::default().with_results(results),
        quota.throttle_time_ms(broker.clock.now_ms()),
    )
}

/// Charges the partitions `name` would gain; a request that adds none (an unknown topic, a
/// count that does not grow) is refused later and charges nothing.
fn charge(
    broker: &Broker,
    quota: &mut ControllerMutationQuota,
    name: &str,
    count: i32,
) -> Result<(), crate::quota::ThrottlingQuotaExceeded> {
    let current = broker.logs.topic(name).map_or(count, |t| {
        i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)
    });
    if count > current {
        quota.record(count - current, broker.clock.now_ms())?;
    }
    Ok(())
}
