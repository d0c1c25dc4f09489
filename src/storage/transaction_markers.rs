//! Where transaction markers are written: the one path by which a COMMIT or ABORT marker
//! reaches a partition, for the transaction coordinator and for WriteTxnMarkers alike. A marker
//! is resolved to its partition by name when it is written, so a topic deleted (or deleted and
//! created again) since the transaction began is never written through a stale handle.

use std::sync::Arc;

use super::{LogManager, PartitionError};
use crate::record_batch::control::TxnMarker;

/// Why a marker was not written.
#[derive(Debug)]
pub enum MarkerError {
    /// No such topic or partition (any longer).
    UnknownPartition,
    /// The partition refused it (a zombie epoch, a fenced coordinator) or failed to store it.
    Partition(PartitionError),
}

impl std::fmt::Display for MarkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkerError::UnknownPartition => f.write_str("unknown topic or partition"),
            MarkerError::Partition(error) => write!(f, "{error}"),
        }
    }
}

/// Writes markers to the partitions of the log directory.
pub struct MarkerWriter {
    logs: Arc<LogManager>,
}

impl MarkerWriter {
    pub fn new(logs: Arc<LogManager>) -> MarkerWriter {
        MarkerWriter { logs }
    }

    /// Appends `marker` for the producer to `topic`-`partition`.
    pub fn write(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: TxnMarker,
        now_ms: i64,
    ) -> Result<(), MarkerError> {
        let partition = self
            .logs
            .topic(topic)
            .and_then(|t| t.partition(partition).cloned())
            .ok_or(MarkerError::UnknownPartition)?;
        partition
            .append_marker(producer_id, producer_epoch, marker, now_ms)
            .map(drop)
            .map_err(|error| match error {
                PartitionError::Deleted => MarkerError::UnknownPartition,
                other => MarkerError::Partition(other),
            })
    }
}
