//! DescribeLogDirs (35): the one log directory, its partitions' sizes, and (v4) the file
//! system's total and usable bytes.

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
    let log_dir = std::fs::canonicalize(&broker.config.log_dir)
        .unwrap_or_else(|_| broker.config.log_dir.clone());
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(log_dir.display().to_string()))
        .with_topics(topics);
    if version >= 4 {
        let (total, usable) = file_system_bytes(&log_dir).unwrap_or((-1, -1));
        result.total_bytes = total;
        result.usable_bytes = usable;
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// (total, available to this user) bytes of the file system holding `dir`.
fn file_system_bytes(dir: &std::path::Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid NUL-terminated string and `stat` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let block = stat.f_frsize as i64;
    Some((stat.f_blocks as i64 * block, stat.f_bavail as i64 * block))
}
