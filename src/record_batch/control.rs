//! Control batches: the COMMIT and ABORT markers that end a transaction in a partition, in
//! Kafka's format. A marker is a v2 batch with the transactional and control attributes set,
//! the transaction's producer id and epoch, base sequence -1 and exactly one uncompressed record:
//!
//! ```text
//! key   = i16 version (0) | i16 type (0 ABORT, 1 COMMIT)
//! value = i16 version (0) | i32 coordinator epoch
//! ```
//!
//! A control batch the log cleaner emptied (no records) is legal and marks nothing. Other
//! control types (2 and up) are KRaft's own and never appear in a data partition.

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::header::BatchHeader;
use super::records::{for_each_record, records_of};
use super::BatchError;

const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// What a transaction marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it.
    pub coordinator_epoch: i32,
}

/// A one-record control batch at base offset 0 carrying `marker` for the producer.
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: TxnMarker,
    timestamp_ms: i64,
) -> Result<Bytes, String> {
    let kind = if marker.commit { COMMIT } else { ABORT };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        // Base sequence -1: markers carry no sequence.
        sequence: -1,
        timestamp: timestamp_ms,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: IndexMap::new(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, std::iter::once(&record), &options)
        .map_err(|e| format!("{e:#}"))?;
    Ok(buf.freeze())
}

/// The marker of a stored control batch (`batch` is the whole batch); None for an empty one or
/// a control type other than COMMIT and ABORT.
pub fn parse_marker(header: &BatchHeader, batch: &[u8]) -> Result<Option<TxnMarker>, BatchError> {
    if !header.is_control() || header.records_count <= 0 {
        return Ok(None);
    }
    let records = records_of(header, batch)?;
    let mut marker = None;
    let mut seen = false;
    for_each_record(header, &records, |record| {
        if seen {
            return;
        }
        seen = true;
        marker = decode(record.key, record.value);
    })?;
    Ok(marker)
}

fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Option<TxnMarker> {
    let key = key?;
    let value = value?;
    if key.len() < 4 || value.len() < 6 {
        return None;
    }
    let kind = i16::from_be_bytes([key[2], key[3]]);
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    match kind {
        ABORT | COMMIT => Some(TxnMarker {
            commit: kind == COMMIT,
            coordinator_epoch,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch::header::crc_is_valid;

    #[test]
    fn markers_have_kafkas_layout() {
        let marker = TxnMarker {
            commit: true,
            coordinator_epoch: 7,
        };
        let batch = marker_batch(42, 3, marker, 1_000).unwrap();
        assert!(crc_is_valid(&batch));
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!(
            header.attributes, 0x30,
            "transactional, control, uncompressed"
        );
        assert_eq!(header.producer_id, 42);
        assert_eq!(header.producer_epoch, 3);
        assert_eq!(header.base_sequence, -1);
        assert_eq!(header.records_count, 1);
        // The record's key and value bytes, as Kafka's EndTransactionMarker writes them.
        let body = &batch[61..];
        let key = [0u8, 0, 0, 1];
        let value = [0u8, 0, 0, 0, 0, 7];
        assert!(body.windows(4).any(|w| w == key));
        assert!(body.windows(6).any(|w| w == value));
        assert_eq!(parse_marker(&header, &batch).unwrap(), Some(marker));
        let abort = TxnMarker {
            commit: false,
            coordinator_epoch: 0,
        };
        let batch = marker_batch(1, 0, abort, 5).unwrap();
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!(parse_marker(&header, &batch).unwrap(), Some(abort));
    }

    #[test]
    fn an_empty_control_batch_marks_nothing() {
        let batch = marker_batch(
            1,
            0,
            TxnMarker {
                commit: true,
                coordinator_epoch: 0,
            },
            5,
        )
        .unwrap();
        let mut head = [0u8; 61];
        head.copy_from_slice(&batch[..61]);
        crate::record_batch::header::set_records_count(&mut head, 0);
        let empty = crate::record_batch::header::with_records(&head, &[], 0);
        let header = BatchHeader::parse(&empty).unwrap();
        assert_eq!(parse_marker(&header, &empty).unwrap(), None);
    }
}
