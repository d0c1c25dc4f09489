//! Why a topic operation failed (create, delete, grow, configure). `api/errors.rs` chooses the
//! Kafka error code for each; partition operations have their own `PartitionError`.

use std::fmt;

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
