//! Reading an internal topic's partition back at start-up, batch by batch, for the coordinators'
//! replays (`__consumer_offsets`, `__transaction_state`): every record from the log start offset
//! to the high watermark with the producer of its batch when the batch is transactional, and
//! transaction markers.

use bytes::Bytes;

use super::Partition;
use crate::record_batch::control::{parse_marker, TxnMarker};
use crate::record_batch::header::{BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::record_batch::records::{decode_records, KeyValue};

/// One batch read back.
pub(super) enum Replayed {
    /// A data batch's records (at or above where the replay reached), and its producer when
    /// the batch is transactional.
    Records {
        producer_id: Option<i64>,
        records: Vec<KeyValue>,
    },
    /// A transaction marker of the producer.
    Marker { producer_id: i64, marker: TxnMarker },
}

/// Calls `visit` for each batch of `partition`, in order, reading `read_bytes` at a time.
pub(super) fn replay_partition(
    partition: &Partition,
    read_bytes: usize,
    mut visit: impl FnMut(Replayed),
) -> Result<(), String> {
    let offsets = partition.offsets().map_err(|e| e.to_string())?;
    let (mut offset, end) = (offsets.log_start_offset, offsets.high_watermark);
    while offset < end {
        let mut bytes = partition
            .read_bytes(offset, read_bytes)
            .map_err(|e| e.to_string())?;
        let before = offset;
        while bytes.len() >= RECORD_BATCH_OVERHEAD {
            let Ok(header) = BatchHeader::parse(&bytes) else {
                break;
            };
            if header.total_size() > bytes.len() {
                break;
            }
            let one = bytes.split_to(header.total_size());
            if header.last_offset() >= offset {
                visit(replayed(partition, &header, one, offset)?);
            }
            offset = offset.max(header.last_offset() + 1);
        }
        if offset == before {
            return Err(format!(
                "{partition}: no progress replaying at offset {offset}"
            ));
        }
    }
    Ok(())
}

fn replayed(
    partition: &Partition,
    header: &BatchHeader,
    mut batch: Bytes,
    from_offset: i64,
) -> Result<Replayed, String> {
    if header.is_control() {
        let marker = parse_marker(header, &batch).map_err(|e| format!("{partition}: {e}"))?;
        return Ok(match marker {
            Some(marker) => Replayed::Marker {
                producer_id: header.producer_id,
                marker,
            },
            // An emptied control batch (left by the cleaner) marks nothing.
            None => Replayed::Records {
                producer_id: None,
                records: Vec::new(),
            },
        });
    }
    let records = decode_records(&mut batch).map_err(|e| format!("{partition}: {e}"))?;
    Ok(Replayed::Records {
        producer_id: header.is_transactional().then_some(header.producer_id),
        records: records
            .into_iter()
            .filter(|r| r.offset >= from_offset)
            .collect(),
    })
}
