//! WriteTxnMarkers (27, v1-2): COMMIT or ABORT markers written to the partitions named, as a
//! transaction coordinator sends them to partition leaders. sluice's own coordinator writes its
//! markers directly; this API serves clients, as Kafka does: `kafka-transactions abort` ends a
//! hanging transaction with it. Each partition answers on its own: UNKNOWN_TOPIC_OR_PARTITION,
//! INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch (from v2, a marker of
//! transaction version 2 also at the epoch of the transaction open there, KIP-1228), or
//! TRANSACTION_COORDINATOR_FENCED for one from an older coordinator. v1 markers, which carry no
//! version, are checked as transaction version 0 ones, as Kafka checks them.
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;

use super::errors::{code, partition_error_code, NONE};
use super::Broker;
use crate::protocol::NewerFields;
use crate::storage::{MarkerError, TxnMarker};

pub fn handle(
    broker: &Broker,
    request: WriteTxnMarkersRequest,
    newer: &NewerFields,
) -> WriteTxnMarkersResponse {
    let versions = match newer {
        NewerFields::WriteTxnMarkers {
            transaction_versions,
        } => transaction_versions.as_slice(),
        _ => &[],
    };
    let markers = request
        .markers
        .into_iter()
        .enumerate()
        .map(|(i, marker)| {
            let transaction_version = versions.get(i).copied().unwrap_or(0);
            let txn_marker = TxnMarker {
                commit: marker.transaction_result,
                coordinator_epoch: marker.coordinator_epoch,
            };
            let topics = marker
                .topics
                .into_iter()
                .map(|topic| {
                    let partitions = topic
                        .partition_indexes
                        .iter()
                        .map(|&index| {
                            let error_code = marker_error_code(broker.markers.write(
                                topic.name.as_str(),
                                index,
                                (marker.producer_id.0, marker.producer_epoch),
                                txn_marker,
                                transaction_version,
                            ));
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(index)
                                .with_error_code(error_code)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(topic.name)
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// The Kafka code for a marker written to one partition (NONE when it was appended).
pub fn marker_error_code(result: Result<(), MarkerError>) -> i16 {
    match result {
        Ok(()) => NONE,
        Err(MarkerError::UnknownPartition) => code(ResponseError::UnknownTopicOrPartition),
        Err(MarkerError::Partition(error)) => partition_error_code(&error),
    }
}
