//! ListOffsets (2): earliest, latest, max-timestamp, and lookup by timestamp through the time
//! index, answered by `storage::Partition::offset_for_timestamp`. "Latest" is the high watermark
//! for read_uncommitted and the last stable offset for read_committed, and a timestamp lookup
//! that lands at or past it answers -1/-1.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use super::errors::{code, partition_error_code};
use super::Broker;
use crate::storage::Isolation;

pub fn handle(broker: &Broker, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let isolation = Isolation::from_wire(request.isolation_level);
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = broker.logs.topic(t.name.as_str());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1);
                    match topic.as_ref().and_then(|t| t.partition(p.partition_index)) {
                        None => response.error_code = code(ResponseError::UnknownTopicOrPartition),
                        // A client ahead of this broker's epoch; none can be behind epoch 0.
                        Some(partition) if p.current_leader_epoch > partition.leader_epoch() => {
                            response.error_code = code(ResponseError::UnknownLeaderEpoch)
                        }
                        Some(partition) => {
                            match partition.offset_for_timestamp(p.timestamp, isolation) {
                                Ok((timestamp, offset)) => {
                                    response.timestamp = timestamp;
                                    response.offset = offset;
                                    // Leader epochs exist from v4; setting one below fails the encode.
                                    if version >= 4 {
                                        response.leader_epoch = partition.leader_epoch();
                                    }
                                }
                                Err(e) => response.error_code = partition_error_code(&e),
                            }
                        }
                    }
                    response
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
