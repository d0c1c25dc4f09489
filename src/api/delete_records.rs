//! DeleteRecords (21): advance a partition's log start offset (-1 means the high watermark).
//! Reads below it then fail with OFFSET_OUT_OF_RANGE; whole segments below it go at the next
//! retention check. The new log start offset is checkpointed before the answer.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use super::errors::{code, partition_error_code};
use super::Broker;

pub fn handle(broker: &Broker, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = broker.logs.topic(t.name.as_str());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    match topic
                        .as_ref()
                        .and_then(|topic| topic.partition(p.partition_index))
                    {
                        None => result.error_code = code(ResponseError::UnknownTopicOrPartition),
                        Some(partition) => match partition.delete_records(p.offset) {
                            Ok(low_watermark) => result.low_watermark = low_watermark,
                            Err(e) => result.error_code = partition_error_code(&e),
                        },
                    }
                    result
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    if let Err(e) = broker.logs.write_checkpoints() {
        tracing::error!("checkpoint after DeleteRecords failed: {e}");
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
