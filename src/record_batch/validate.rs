//! The checks Kafka makes on a produced batch before it is appended, in Kafka's
//! order and with the distinctions Kafka's error codes make (`BatchError`; `api::errors` picks
//! the codes): the request-level framing of `ProduceRequest`
//! (`validate_framing`, which Kafka applies before acks), then `LogValidator`'s. Every batch
//! has its records walked (framing, count, offset deltas, timestamps), compressed ones through
//! a streaming, bounded decompressor that keeps nothing: the batch is still stored exactly as
//! it arrived.

use super::header::{
    crc_is_valid, BatchHeader, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_BATCH_LENGTH_ANY_FORMAT,
    RECORD_BATCH_OVERHEAD,
};
use super::walk::{walk_records, WalkError};
use super::BatchError;

/// What a batch is checked against.
pub struct BatchLimits {
    pub max_message_bytes: i32,
    /// `cleanup.policy` includes `compact`: every record needs a key (Kafka's INVALID_RECORD).
    pub compacted: bool,
    pub produce_version: i16,
    pub now_ms: i64,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
}

const ZSTD: u8 = 4;

/// Kafka's request-level checks (`ProduceRequest.validateRecords`, the first of its checks), which
/// come before acks and before the log: there must be one whole batch, of magic 2, zstd only
/// from Produce v7, and no second whole batch. Returns the first batch's size in bytes; bytes
/// after it that do not form a whole batch are ignored (Kafka's batch iterator stops there and
/// the append trims them).
pub fn validate_framing(records: &[u8], produce_version: i16) -> Result<usize, BatchError> {
    let Some(batch_bytes) = whole_batch_at(records, 0)? else {
        return Err(BatchError::InvalidRecord(
            "produce request has no whole record batch".into(),
        ));
    };
    if records[16] != 2 {
        return Err(BatchError::InvalidRecord(format!(
            "magic {} is not supported; only 2",
            records[16]
        )));
    }
    // The codec is the low three bits of the attributes (bytes 21..23, big-endian).
    let compression = records.get(22).map_or(0, |attributes| attributes & 0x07);
    if compression == ZSTD && produce_version < 7 {
        return Err(BatchError::UnsupportedCompression(
            "zstd needs Produce v7 or later".into(),
        ));
    }
    if whole_batch_at(records, batch_bytes)?.is_some() {
        return Err(BatchError::InvalidRecord(
            "more than one record batch in a partition's produce data".into(),
        ));
    }
    Ok(batch_bytes)
}

/// The size of the whole batch starting at `position`, as Kafka's batch iterator sees it: None
/// when the bytes left cannot hold it, CORRUPT_MESSAGE for a size or magic no batch can have.
fn whole_batch_at(records: &[u8], position: usize) -> Result<Option<usize>, BatchError> {
    let rest = &records[position.min(records.len())..];
    if rest.len() < LOG_OVERHEAD {
        return Ok(None);
    }
    let size_field = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
    if size_field < MIN_BATCH_LENGTH_ANY_FORMAT {
        return Err(BatchError::Corrupt(format!(
            "record batch size {size_field} is below the minimum {MIN_BATCH_LENGTH_ANY_FORMAT}"
        )));
    }
    let batch_bytes = size_field as usize + LOG_OVERHEAD;
    if rest.len() < batch_bytes.max(HEADER_SIZE_UP_TO_MAGIC) {
        return Ok(None);
    }
    let magic = rest[16] as i8;
    if !(0..=2).contains(&magic) {
        return Err(BatchError::Corrupt(format!(
            "record batch has an invalid magic {magic}"
        )));
    }
    Ok(Some(batch_bytes))
}

/// Validates the records of one partition of a Produce request: exactly one v2 batch (bytes
/// after it that are not a whole batch are left out of the returned header's size, and the
/// caller stores only the batch).
pub fn validate(records: &[u8], limits: &BatchLimits) -> Result<BatchHeader, BatchError> {
    let batch_bytes = validate_framing(records, limits.produce_version)?;
    let records = &records[..batch_bytes];
    if records.len() < RECORD_BATCH_OVERHEAD {
        return Err(BatchError::Corrupt(
            "record batch shorter than its header".into(),
        ));
    }
    let header = BatchHeader::parse(records).map_err(|e| BatchError::Corrupt(e.to_string()))?;
    let batch_length = header.batch_length as i64 + LOG_OVERHEAD as i64;
    if header.compression() > ZSTD {
        return Err(BatchError::Corrupt(format!(
            "unknown compression codec {}",
            header.compression()
        )));
    }
    if header.base_offset != 0 {
        return Err(BatchError::InvalidRecord(
            "a producer's batch must have base offset 0".into(),
        ));
    }
    if batch_length > i64::from(limits.max_message_bytes) {
        return Err(BatchError::MessageTooLarge(format!(
            "batch of {batch_length} bytes exceeds max.message.bytes {}",
            limits.max_message_bytes
        )));
    }
    if !crc_is_valid(records) {
        return Err(BatchError::Corrupt(
            "record batch CRC does not match".into(),
        ));
    }
    check_header_fields(&header)?;
    check_timestamp(header.max_timestamp, limits)?;
    check_records(&records[RECORD_BATCH_OVERHEAD..], &header, limits)?;
    Ok(header)
}

/// How far a batch may decompress, in multiples of `max.message.bytes`: generous for real
/// data, and a bound on the CPU a decompression bomb can cost.
const DECOMPRESSION_FACTOR: u64 = 64;

/// The most bytes a batch may decompress to under `max_message_bytes` (at least 1 MiB's worth).
pub fn decompression_bound(max_message_bytes: i32) -> u64 {
    DECOMPRESSION_FACTOR * u64::try_from(max_message_bytes.max(1 << 20)).unwrap_or(1 << 20)
}

/// Walks every record: exactly `records_count` of them, offset deltas 0..n-1, timestamps in
/// bounds, nothing left over.
fn check_records(
    body: &[u8],
    header: &BatchHeader,
    limits: &BatchLimits,
) -> Result<(), BatchError> {
    let max_bytes = decompression_bound(limits.max_message_bytes);
    let mut bad_timestamp = None;
    let walked = walk_records(
        header.compression(),
        body,
        header.records_count,
        max_bytes,
        |_, timestamp_delta, has_key| {
            if limits.compacted && !has_key {
                return Err(WalkError::Invalid(
                    "Compacted topic cannot accept message without key".into(),
                ));
            }
            if header.base_timestamp != -1 && bad_timestamp.is_none() {
                if let Err(refused) = check_timestamp(
                    header.base_timestamp.saturating_add(timestamp_delta),
                    limits,
                ) {
                    bad_timestamp = Some(refused);
                }
            }
            Ok(())
        },
    );
    match walked {
        Ok(()) => bad_timestamp.map_or(Ok(()), Err),
        Err(WalkError::Corrupt(m)) => Err(BatchError::Corrupt(m)),
        Err(WalkError::Invalid(m)) => Err(BatchError::InvalidRecord(m)),
        Err(WalkError::TooLarge) => Err(BatchError::InvalidRecord(format!(
            "batch decompresses to more than {max_bytes} bytes"
        ))),
    }
}

fn check_header_fields(header: &BatchHeader) -> Result<(), BatchError> {
    if header.records_count <= 0 {
        return Err(BatchError::InvalidRecord(
            "record batch has no records".into(),
        ));
    }
    if i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count) {
        return Err(BatchError::InvalidRecord(
            "last offset delta + 1 does not equal the record count".into(),
        ));
    }
    if header.is_control() {
        return Err(BatchError::InvalidRecord(
            "clients may not produce control batches".into(),
        ));
    }
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(BatchError::InvalidRecord(
            "idempotent batch without a base sequence".into(),
        ));
    }
    if header.timestamp_type_is_log_append() {
        return Err(BatchError::InvalidTimestamp(
            "producers may not set LogAppendTime".into(),
        ));
    }
    Ok(())
}

fn check_timestamp(timestamp_ms: i64, limits: &BatchLimits) -> Result<(), BatchError> {
    if timestamp_ms == -1 {
        return Ok(());
    }
    let too_old = limits.now_ms.saturating_sub(timestamp_ms) > limits.timestamp_before_max_ms;
    let too_new = timestamp_ms.saturating_sub(limits.now_ms) > limits.timestamp_after_max_ms;
    if too_old || too_new {
        return Err(BatchError::InvalidTimestamp(format!(
            "timestamp {timestamp_ms} is out of range of the broker's time {}",
            limits.now_ms
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::encode::{self, PlainRecord};
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::records::Compression;

    fn batch(keys: &[Option<&'static [u8]>], compression: Compression) -> Bytes {
        let value = || Some(Bytes::from_static(b"v"));
        let records = keys
            .iter()
            .map(|key| PlainRecord::new(key.map(Bytes::from_static), value(), 1000));
        encode::batch(records, compression).unwrap()
    }

    fn limits(compacted: bool) -> BatchLimits {
        BatchLimits {
            max_message_bytes: 1 << 20,
            compacted,
            produce_version: 7,
            now_ms: 1000,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
        }
    }

    #[test]
    fn compacted_topics_refuse_records_without_keys() {
        for compression in [Compression::None, Compression::Gzip] {
            let keyless = batch(&[Some(b"k"), None], compression);
            let refused = validate(&keyless, &limits(true)).unwrap_err();
            assert!(
                matches!(refused, BatchError::InvalidRecord(_)),
                "{refused:?}"
            );
            validate(&keyless, &limits(false)).unwrap_or_else(|r| panic!("{r:?}"));
            // An empty key is a key.
            let keyed = batch(&[Some(b"k"), Some(b"")], compression);
            validate(&keyed, &limits(true)).unwrap_or_else(|r| panic!("{compression:?}: {r:?}"));
        }
    }
}
