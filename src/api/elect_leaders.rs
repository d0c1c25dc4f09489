//! ElectLeaders (43): with one replica per partition its leader is always the preferred replica
//! and the only one, so, as on a Kafka cluster whose leaders are all in place, every named
//! partition answers ELECTION_NOT_NEEDED ("Valid replica already elected" in
//! `kafka-leader-election`), an unknown one UNKNOWN_TOPIC_OR_PARTITION, and a request for all
//! partitions (a null list) elects nothing and lists nothing.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;

pub fn handle(broker: &Broker, request: ElectLeadersRequest) -> ElectLeadersResponse {
    let results = request
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|requested| {
            let topic = broker.logs.topic(requested.topic.as_str());
            let partition_result = requested
                .partitions
                .iter()
                .map(|&index| {
                    let (error_code, message) = match &topic {
                        None => (
                            code(ResponseError::UnknownTopicOrPartition),
                            Some(format!("No such topic as {}", requested.topic.as_str())),
                        ),
                        Some(topic) if topic.partition(index).is_none() => (
                            code(ResponseError::UnknownTopicOrPartition),
                            Some(format!(
                                "No such partition as {}-{index}",
                                requested.topic.as_str()
                            )),
                        ),
                        Some(_) => (code(ResponseError::ElectionNotNeeded), None),
                    };
                    PartitionResult::default()
                        .with_partition_id(index)
                        .with_error_code(error_code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(requested.topic)
                .with_partition_result(partition_result)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}
