//! ListOffsets (2): earliest, latest, max-timestamp, and lookup by timestamp through the time
//! index, answered by `storage::Partition::offset_for_timestamp`. "Latest" is the high watermark
//! for read_uncommitted and the last stable offset for read_committed, and a timestamp lookup
//! that lands at or past it answers -1/-1, with leader epoch -1 (none) as Kafka answers when it
//! finds no offset. A special (negative) timestamp newer than the request's version is refused
//! with UNSUPPORTED_VERSION before the topic is looked up, as Kafka does.

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
                    if !timestamp_known_at(p.timestamp, version) {
                        response.error_code = code(ResponseError::UnsupportedVersion);
                        return response;
                    }
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
                                    // Leader epochs exist from v4; setting one below fails the
                                    // encode. No offset found: no epoch (-1, the default).
                                    if version >= 4 && offset >= 0 {
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

/// Whether a ListOffsets request at `version` may carry `timestamp`. Times (>= 0), -1 (latest)
/// and -2 (earliest) are known at every version; -3 (max timestamp, KIP-734) from v7, -4
/// (earliest local, KIP-405) from v8, -5 (latest tiered, KIP-1005) from v9, -6 (earliest pending
/// upload, KIP-1023) from v11; no other. (v10, KIP-1075, adds only a timeout for remote reads,
/// which a broker without tiered storage never waits on.)
fn timestamp_known_at(timestamp: i64, version: i16) -> bool {
    match timestamp {
        t if t >= -2 => true,
        -3 => version >= 7,
        -4 => version >= 8,
        -5 => version >= 9,
        -6 => version >= 11,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::timestamp_known_at;

    #[test]
    fn special_timestamps_start_at_kafkas_versions() {
        for version in 1..=11 {
            assert!(timestamp_known_at(0, version));
            assert!(timestamp_known_at(-1, version));
            assert!(timestamp_known_at(-2, version));
            assert_eq!(timestamp_known_at(-3, version), version >= 7);
            assert_eq!(timestamp_known_at(-4, version), version >= 8);
            assert_eq!(timestamp_known_at(-5, version), version >= 9);
            assert_eq!(timestamp_known_at(-6, version), version >= 11);
            assert!(!timestamp_known_at(-7, version));
            assert!(!timestamp_known_at(i64::MIN, version));
        }
    }
}
