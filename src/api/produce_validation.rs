//! The checks Kafka's `LogValidator` makes on a produced batch before it is appended (digest
//! §1.5), in Kafka's order and with Kafka's error codes. Uncompressed batches have their
//! records walked (framing, offset deltas, timestamps); compressed batches are checked from the
//! header only, so the hot path never decompresses.

use kafka_protocol::ResponseError;

use crate::log::batch::{crc_is_valid, BatchHeader, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};

/// What a batch is checked against.
pub struct BatchLimits {
    pub max_message_bytes: i32,
    pub produce_version: i16,
    pub now_ms: i64,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
}

/// A refused batch: the partition's error code and the message Kafka would give.
#[derive(Debug, PartialEq)]
pub struct Refused {
    pub error_code: i16,
    pub message: String,
}

fn refuse(error: ResponseError, message: impl Into<String>) -> Refused {
    Refused {
        error_code: error.code(),
        message: message.into(),
    }
}

const ZSTD: u8 = 4;

/// Validates the records of one partition of a Produce request: exactly one v2 batch.
pub fn validate(records: &[u8], limits: &BatchLimits) -> Result<BatchHeader, Refused> {
    if records.is_empty() {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "produce request has no record batch",
        ));
    }
    if records.len() < RECORD_BATCH_OVERHEAD {
        return Err(refuse(
            ResponseError::CorruptMessage,
            "record batch shorter than its header",
        ));
    }
    if records[16] != 2 {
        return Err(refuse(
            ResponseError::InvalidRecord,
            format!("magic {} is not supported; only 2", records[16]),
        ));
    }
    let header = BatchHeader::parse(records)
        .map_err(|e| refuse(ResponseError::CorruptMessage, e.to_string()))?;
    let batch_length = header.batch_length as i64 + LOG_OVERHEAD as i64;
    if header.batch_length < 0 || batch_length > records.len() as i64 {
        return Err(refuse(
            ResponseError::CorruptMessage,
            "record batch length runs past the request",
        ));
    }
    if batch_length < records.len() as i64 {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "more than one record batch in a partition's produce data",
        ));
    }
    if header.compression() == ZSTD && limits.produce_version < 7 {
        return Err(refuse(
            ResponseError::UnsupportedCompressionType,
            "zstd needs Produce v7 or later",
        ));
    }
    if header.compression() > ZSTD {
        return Err(refuse(
            ResponseError::CorruptMessage,
            format!("unknown compression codec {}", header.compression()),
        ));
    }
    if header.base_offset != 0 {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "a producer's batch must have base offset 0",
        ));
    }
    if batch_length > i64::from(limits.max_message_bytes) {
        return Err(refuse(
            ResponseError::MessageTooLarge,
            format!(
                "batch of {batch_length} bytes exceeds max.message.bytes {}",
                limits.max_message_bytes
            ),
        ));
    }
    if !crc_is_valid(records) {
        return Err(refuse(
            ResponseError::CorruptMessage,
            "record batch CRC does not match",
        ));
    }
    check_header_fields(&header)?;
    check_timestamp(header.max_timestamp, limits)?;
    if header.compression() == 0 {
        walk_records(&records[RECORD_BATCH_OVERHEAD..], &header, limits)?;
    } else {
        check_timestamp(header.base_timestamp, limits)?;
    }
    Ok(header)
}

fn check_header_fields(header: &BatchHeader) -> Result<(), Refused> {
    if header.records_count <= 0 {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "record batch has no records",
        ));
    }
    if i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count) {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "last offset delta + 1 does not equal the record count",
        ));
    }
    if header.is_control() {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "clients may not produce control batches",
        ));
    }
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "idempotent batch without a base sequence",
        ));
    }
    if header.timestamp_type_is_log_append() {
        return Err(refuse(
            ResponseError::InvalidTimestamp,
            "producers may not set LogAppendTime",
        ));
    }
    if header.is_transactional() {
        return Err(refuse(
            ResponseError::InvalidTxnState,
            "transactions are not supported yet",
        ));
    }
    Ok(())
}

fn check_timestamp(timestamp_ms: i64, limits: &BatchLimits) -> Result<(), Refused> {
    if timestamp_ms == -1 {
        return Ok(());
    }
    let too_old = limits.now_ms.saturating_sub(timestamp_ms) > limits.timestamp_before_max_ms;
    let too_new = timestamp_ms.saturating_sub(limits.now_ms) > limits.timestamp_after_max_ms;
    if too_old || too_new {
        return Err(refuse(
            ResponseError::InvalidTimestamp,
            format!(
                "timestamp {timestamp_ms} is out of range of the broker's time {}",
                limits.now_ms
            ),
        ));
    }
    Ok(())
}

/// Walks the records of an uncompressed batch: each record's length must lie inside the batch,
/// offset deltas must run 0..n-1, timestamps must be in bounds, and no bytes may be left over.
fn walk_records(
    mut body: &[u8],
    header: &BatchHeader,
    limits: &BatchLimits,
) -> Result<(), Refused> {
    let corrupt = |m: &str| refuse(ResponseError::CorruptMessage, m.to_string());
    for expected_delta in 0..header.records_count {
        let length = read_varint(&mut body).ok_or_else(|| corrupt("truncated record length"))?;
        let length = usize::try_from(length).map_err(|_| corrupt("negative record length"))?;
        if length > body.len() {
            return Err(corrupt("record runs past the batch"));
        }
        let (mut record, rest) = body.split_at(length);
        body = rest;
        if record.is_empty() {
            return Err(corrupt("empty record"));
        }
        record = &record[1..]; // attributes, unused
        let timestamp_delta =
            read_varint(&mut record).ok_or_else(|| corrupt("truncated timestamp delta"))?;
        let offset_delta =
            read_varint(&mut record).ok_or_else(|| corrupt("truncated offset delta"))?;
        if offset_delta != i64::from(expected_delta) {
            return Err(refuse(
                ResponseError::InvalidRecord,
                "record offset deltas are not consecutive",
            ));
        }
        if header.base_timestamp != -1 {
            check_timestamp(
                header.base_timestamp.saturating_add(timestamp_delta),
                limits,
            )?;
        }
    }
    if !body.is_empty() {
        return Err(refuse(
            ResponseError::InvalidRecord,
            "bytes left over after the batch's records",
        ));
    }
    Ok(())
}

/// A zig-zag varint (up to 64 bits), as in Kafka's record format.
fn read_varint(buf: &mut &[u8]) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_zig_zag() {
        let mut b: &[u8] = &[0x00, 0x01, 0x02, 0x7f, 0xac, 0x02];
        assert_eq!(read_varint(&mut b), Some(0));
        assert_eq!(read_varint(&mut b), Some(-1));
        assert_eq!(read_varint(&mut b), Some(1));
        assert_eq!(read_varint(&mut b), Some(-64));
        assert_eq!(read_varint(&mut b), Some(150));
        let mut endless: &[u8] = &[0xff; 12];
        assert_eq!(read_varint(&mut endless), None);
    }
}
