//! ListOffsets (2): earliest, latest, max-timestamp, and lookup by timestamp through the time
//! index. "Latest" is the high watermark (equal to the last stable offset without
//! transactions), and a timestamp lookup that lands at or past it answers -1/-1.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use super::errors::{code, partition_error_code};
use super::Broker;
use crate::log::PartitionLog;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

pub fn handle(broker: &Broker, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
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
                        Some(_) if p.current_leader_epoch > 0 => {
                            response.error_code = code(ResponseError::UnknownLeaderEpoch)
                        }
                        Some(partition) => match partition.with_log(|log| lookup(log, p.timestamp))
                        {
                            Ok((timestamp, offset)) => {
                                response.timestamp = timestamp;
                                response.offset = offset;
                                // Leader epochs exist from v4; setting one below fails the encode.
                                if version >= 4 {
                                    response.leader_epoch = 0;
                                }
                            }
                            Err(e) => response.error_code = partition_error_code(&e),
                        },
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

/// `(timestamp, offset)` for one partition.
fn lookup(log: &mut PartitionLog, timestamp: i64) -> Result<(i64, i64), crate::log::LogError> {
    let high_watermark = log.log_end_offset();
    Ok(match timestamp {
        LATEST => (-1, high_watermark),
        EARLIEST | EARLIEST_LOCAL => (-1, log.log_start_offset()),
        MAX_TIMESTAMP => log.max_timestamp_and_offset().unwrap_or((-1, -1)),
        LATEST_TIERED => (-1, -1),
        ts if ts >= 0 => match log.find_offset_by_timestamp(ts)? {
            Some((offset, found_ts)) if offset < high_watermark => (found_ts, offset),
            _ => (-1, -1),
        },
        _ => (-1, -1),
    })
}
