//! DescribeLogDirs (35): the one log directory, its partitions' sizes, and (v4) the file
//! system's total and usable bytes. A directory taken offline by a storage failure is answered
//! with KAFKA_STORAGE_ERROR and no partitions, as Kafka answers for an offline log directory.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Broker;

pub fn handle(
    broker: &Broker,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(list) => list
            .iter()
            .any(|t| t.topic.as_str() == topic && t.partitions.contains(&partition)),
    };
    let topics = broker
        .logs
        .topics()
        .into_iter()
        .filter_map(|topic| {
            let partitions: Vec<_> = topic
                .partitions
                .iter()
                .filter(|p| wanted(&topic.name, p.index))
                .filter_map(|p| {
                    let size = p.log_stats().ok()?.size_bytes;
                    Some(
                        DescribeLogDirsPartition::default()
                            .with_partition_index(p.index)
                            .with_partition_size(size as i64),
                    )
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(partitions)
            })
        })
        .collect();
    let disk = broker.logs.disk();
    let log_dir = disk
        .canonicalize(&broker.config.log_dir)
        .unwrap_or_else(|_| broker.config.log_dir.clone());
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(log_dir.display().to_string()))
        .with_topics(topics);
    if broker.logs.is_offline() {
        result.error_code = super::errors::code(kafka_protocol::ResponseError::KafkaStorageError);
    }
    if version >= 4 {
        let (total, usable) = disk
            .space_bytes(&log_dir)
            .map(|(total, usable)| {
                let clamp = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
                (clamp(total), clamp(usable))
            })
            .unwrap_or((-1, -1));
        result.total_bytes = total;
        result.usable_bytes = usable;
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}
