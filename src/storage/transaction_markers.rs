//! Where transaction markers are written: the one path by which a COMMIT or ABORT marker
//! reaches a partition, for the transaction coordinator (`txn::MarkerSink`) and for
//! WriteTxnMarkers alike. A marker is resolved to its partition by name when it is written, so a
//! topic deleted (or deleted and created again) since the transaction began is never written
//! through a stale handle. A `__consumer_offsets` partition's marker goes through the group
//! coordinator, which appends it and then commits or drops the transaction's pending offsets
//! in the same step, as Kafka's group coordinator does.

use std::sync::Arc;

use super::consumer_offsets::CONSUMER_OFFSETS_TOPIC;
use super::{LogManager, PartitionError, SequenceError};
use crate::group::{GroupCoordinator, StoreError};
use crate::record_batch::control::TxnMarker;
use crate::time::Clock;
use crate::txn::{MarkerOutcome, MarkerSink};

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
    groups: Arc<GroupCoordinator>,
    clock: Arc<dyn Clock>,
}

impl MarkerWriter {
    pub fn new(
        logs: Arc<LogManager>,
        groups: Arc<GroupCoordinator>,
        clock: Arc<dyn Clock>,
    ) -> MarkerWriter {
        MarkerWriter {
            logs,
            groups,
            clock,
        }
    }

    /// Appends `marker` for the producer to `topic`-`partition`, under the transaction's
    /// version (`Partition::append_marker`).
    pub fn write(
        &self,
        topic: &str,
        partition: i32,
        (producer_id, producer_epoch): (i64, i16),
        marker: TxnMarker,
        transaction_version: i8,
    ) -> Result<(), MarkerError> {
        let found = self
            .logs
            .topic(topic)
            .and_then(|t| t.partition(partition).cloned())
            .ok_or(MarkerError::UnknownPartition)?;
        if topic == CONSUMER_OFFSETS_TOPIC {
            return self
                .groups
                .complete_transaction(
                    partition,
                    producer_id,
                    producer_epoch,
                    marker.commit,
                    marker.coordinator_epoch,
                    transaction_version,
                )
                .map_err(|error| MarkerError::Partition(partition_error(error)));
        }
        let now_ms = self.clock.now_ms();
        found
            .append_marker(
                producer_id,
                producer_epoch,
                marker,
                transaction_version,
                now_ms,
            )
            .map(drop)
            .map_err(|error| match error {
                PartitionError::Deleted => MarkerError::UnknownPartition,
                other => MarkerError::Partition(other),
            })
    }
}

/// The group coordinator's store error, as the partition's refusal it stands for.
fn partition_error(error: StoreError) -> PartitionError {
    match error {
        StoreError::ProducerFenced => SequenceError::InvalidProducerEpoch.into(),
        StoreError::CoordinatorFenced => SequenceError::CoordinatorFenced.into(),
        other => PartitionError::Storage(std::io::Error::other(other.to_string())),
    }
}

impl MarkerSink for MarkerWriter {
    fn write_marker(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: TxnMarker,
        transaction_version: i8,
    ) -> MarkerOutcome {
        match self.write(
            topic,
            partition,
            (producer_id, producer_epoch),
            marker,
            transaction_version,
        ) {
            Ok(()) => MarkerOutcome::Written,
            Err(MarkerError::UnknownPartition) => MarkerOutcome::Gone,
            Err(MarkerError::Partition(PartitionError::Sequence(
                SequenceError::InvalidProducerEpoch | SequenceError::CoordinatorFenced,
            ))) => MarkerOutcome::Refused,
            Err(error) => {
                tracing::warn!(
                    topic,
                    partition,
                    producer_id,
                    "cannot write a transaction marker now: {error}"
                );
                MarkerOutcome::Retry
            }
        }
    }
}
