//! Why a storage operation failed: `TopicError` for topic operations (create, delete, grow,
//! configure), `PartitionError` for partition operations (append, read, offsets).
//! `api/errors.rs` chooses the Kafka error code for each.

use std::fmt;
use std::io;

use crate::log::LogError;
use crate::producer::SequenceError;

#[derive(Debug)]
pub enum TopicError {
    AlreadyExists,
    UnknownTopic,
    InvalidName(String),
    InvalidConfig(String),
    InvalidPartitions(String),
    Storage(String),
}

impl fmt::Display for TopicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicError::AlreadyExists => f.write_str("topic already exists"),
            TopicError::UnknownTopic => f.write_str("unknown topic"),
            TopicError::InvalidName(m)
            | TopicError::InvalidConfig(m)
            | TopicError::InvalidPartitions(m)
            | TopicError::Storage(m) => f.write_str(m),
        }
    }
}

/// Why an operation on a partition failed. `api` chooses the Kafka error code for each.
#[derive(Debug)]
pub enum PartitionError {
    /// The topic was deleted while the request was in flight.
    Deleted,
    /// An offset below the log start offset or above the log end offset.
    OffsetOutOfRange {
        requested: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// A batch larger than the segment size can never be stored.
    RecordTooLarge,
    /// Bytes that are not what the format requires.
    Corrupt(String),
    /// The log directory failed an I/O operation.
    Storage(io::Error),
    /// An idempotent producer's batch was refused (fenced epoch or a sequence gap).
    Sequence(SequenceError),
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::Deleted => f.write_str("partition deleted"),
            PartitionError::OffsetOutOfRange {
                requested,
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset {requested} is outside the log [{log_start_offset}, {log_end_offset}]"
            ),
            PartitionError::RecordTooLarge => f.write_str("batch is larger than the segment size"),
            PartitionError::Corrupt(reason) => write!(f, "corrupt log data: {reason}"),
            PartitionError::Storage(error) => write!(f, "log I/O error: {error}"),
            PartitionError::Sequence(error) => write!(f, "refused producer batch: {error:?}"),
        }
    }
}

impl std::error::Error for PartitionError {}

impl From<LogError> for PartitionError {
    fn from(error: LogError) -> Self {
        match error {
            LogError::OffsetOutOfRange {
                requested,
                log_start_offset,
                log_end_offset,
            } => PartitionError::OffsetOutOfRange {
                requested,
                log_start_offset,
                log_end_offset,
            },
            LogError::RecordTooLarge => PartitionError::RecordTooLarge,
            LogError::Corrupt(reason) => PartitionError::Corrupt(reason),
            LogError::Io(error) => PartitionError::Storage(error),
        }
    }
}

impl From<io::Error> for PartitionError {
    fn from(error: io::Error) -> Self {
        PartitionError::Storage(error)
    }
}

impl From<SequenceError> for PartitionError {
    fn from(error: SequenceError) -> Self {
        PartitionError::Sequence(error)
    }
}
