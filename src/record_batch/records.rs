//! Records inside one stored batch: per-record timestamps and offsets for ListOffsets by timestamp
//! and by max timestamp, and keys, tombstones and raw record bytes for the log cleaner. These are
//! the only ways the log looks inside a batch.
//!
//! Decompression is kafka-protocol's. The record walk is ours, on purpose: kafka-protocol 0.18.0's
//! `RecordBatchDecoder` reserves memory from counts read from the bytes (records count, header
//! count) before checking them against the bytes available, while this walk allocates nothing and
//! reads only each record's length, timestamp delta and offset delta (the record layout is in
//! `docs/log-format.md` §2).

use bytes::Bytes;
use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};
use kafka_protocol::records::RecordBatchDecoder;

use super::header::{BatchHeader, RECORD_BATCH_OVERHEAD};
use super::BatchError;

/// Finds the first record of `batch` (exactly one whole batch) for which `wanted(offset,
/// timestamp)` holds. LogAppendTime batches report the batch max timestamp for every record.
pub fn find_record(
    batch: &[u8],
    mut wanted: impl FnMut(i64, i64) -> bool,
) -> Result<Option<(i64, i64)>, BatchError> {
    let header =
        BatchHeader::parse(batch).map_err(|error| BatchError::Corrupt(error.to_string()))?;
    let records = decompress(header.compression(), &batch[RECORD_BATCH_OVERHEAD..])?;
    let mut reader = VarintReader {
        buf: &records,
        at: 0,
    };
    for _ in 0..header.records_count.max(0) {
        let length = reader.varint()?;
        let length = usize::try_from(length)
            .ok()
            .filter(|length| *length <= reader.remaining())
            .ok_or_else(|| corrupt("record length out of range"))?;
        let record_end = reader.at + length;
        let _attributes = reader.byte()?;
        let timestamp_delta = reader.varlong()?;
        let offset_delta = reader.varint()?;
        if reader.at > record_end {
            return Err(corrupt("record header runs past the record"));
        }
        reader.at = record_end;
        let offset = header.base_offset + i64::from(offset_delta);
        let timestamp = if header.timestamp_type_is_log_append() {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(timestamp_delta)
        };
        if wanted(offset, timestamp) {
            return Ok(Some((offset, timestamp)));
        }
    }
    Ok(None)
}

/// One record of a stored batch, decoded whole: what the group coordinator replays from
/// `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub offset: i64,
    /// None for a null key.
    pub key: Option<Bytes>,
    /// None for a null value (a tombstone).
    pub value: Option<Bytes>,
}

/// The records of the batches in `batches`, decoded by kafka-protocol; its error as text. Only
/// for batches the broker wrote itself (`__consumer_offsets`), whose counts are not a client's.
pub fn decode_records(batches: &mut Bytes) -> Result<Vec<KeyValue>, String> {
    let set = RecordBatchDecoder::decode(batches).map_err(|e| e.to_string())?;
    Ok(set
        .records
        .into_iter()
        .map(|record| KeyValue {
            offset: record.offset,
            key: record.key,
            value: record.value,
        })
        .collect())
}

/// One record of a stored batch, as the log cleaner sees it.
pub struct RecordView<'a> {
    pub offset: i64,
    /// Relative to the batch's base timestamp.
    pub timestamp_delta: i64,
    /// None for a null key.
    pub key: Option<&'a [u8]>,
    /// None for a null value.
    pub value: Option<&'a [u8]>,
    /// The value is null: a delete marker (tombstone) on a compacted topic.
    pub is_tombstone: bool,
    /// The whole record as stored, its length varint included, to be copied unchanged.
    pub bytes: &'a [u8],
    /// The record's attributes byte.
    attributes: u8,
    /// Everything after the timestamp delta: offset delta, key, value, headers.
    after_timestamp: &'a [u8],
}

impl RecordView<'_> {
    /// Appends the record to `out` with its timestamp delta replaced (KIP-534: a batch that
    /// gets a delete horizon as its base timestamp keeps each record's timestamp this way).
    pub fn write_with_timestamp_delta(&self, out: &mut Vec<u8>, timestamp_delta: i64) {
        let (delta, delta_len) = varlong(timestamp_delta);
        let body_len = 1 + delta_len + self.after_timestamp.len();
        let (length, length_len) = varlong(body_len as i64);
        out.extend_from_slice(&length[..length_len]);
        out.push(self.attributes);
        out.extend_from_slice(&delta[..delta_len]);
        out.extend_from_slice(self.after_timestamp);
    }
}

/// The records section of one whole stored batch, decompressed.
pub fn records_of(header: &BatchHeader, batch: &[u8]) -> Result<Bytes, BatchError> {
    let end = header.total_size().min(batch.len());
    decompress(header.compression(), &batch[RECORD_BATCH_OVERHEAD..end])
}

/// Calls `visit` for each of the header's records in `records` (from `records_of`), in order.
pub fn for_each_record(
    header: &BatchHeader,
    records: &[u8],
    mut visit: impl FnMut(RecordView<'_>),
) -> Result<(), BatchError> {
    let mut reader = VarintReader {
        buf: records,
        at: 0,
    };
    for _ in 0..header.records_count.max(0) {
        let start = reader.at;
        let length = reader.varint()?;
        let length = usize::try_from(length)
            .ok()
            .filter(|length| *length <= reader.remaining())
            .ok_or_else(|| corrupt("record length out of range"))?;
        let end = reader.at + length;
        let mut record = VarintReader {
            buf: &records[..end],
            at: reader.at,
        };
        let attributes = record.byte()?;
        let timestamp_delta = record.varlong()?;
        let after_timestamp = &records[record.at..end];
        let offset_delta = record.varint()?;
        let key = record.bytes_or_null()?;
        let value = record.bytes_or_null()?;
        visit(RecordView {
            offset: header.base_offset + i64::from(offset_delta),
            timestamp_delta,
            key,
            value,
            is_tombstone: value.is_none(),
            bytes: &records[start..end],
            attributes,
            after_timestamp,
        });
        reader.at = end;
    }
    Ok(())
}

/// Kafka's zig-zag varlong (a varint is the same encoding for a value that fits 32 bits): the
/// bytes and how many of them are used.
fn varlong(value: i64) -> ([u8; 10], usize) {
    let mut bytes = [0u8; 10];
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    let mut len = 0;
    while zigzag >= 0x80 {
        bytes[len] = (zigzag as u8) | 0x80;
        zigzag >>= 7;
        len += 1;
    }
    bytes[len] = zigzag as u8;
    (bytes, len + 1)
}

/// The records section, decompressed by kafka-protocol. The output size is not bounded here: the
/// batch was decompressed and checked by the produce path before it was stored.
fn decompress(codec: u8, compressed: &[u8]) -> Result<Bytes, BatchError> {
    let mut input = Bytes::copy_from_slice(compressed);
    let take_all = |buf: &mut Bytes| Ok(std::mem::take(buf));
    let result = match codec {
        0 => return Ok(input),
        1 => <Gzip as Decompressor<Bytes>>::decompress(&mut input, take_all),
        2 => <Snappy as Decompressor<Bytes>>::decompress(&mut input, take_all),
        3 => <Lz4 as Decompressor<Bytes>>::decompress(&mut input, take_all),
        4 => <Zstd as Decompressor<Bytes>>::decompress(&mut input, take_all),
        other => return Err(corrupt(&format!("unknown compression codec {other}"))),
    };
    result.map_err(|error| BatchError::Corrupt(format!("cannot decompress batch: {error:#}")))
}

fn corrupt(reason: &str) -> BatchError {
    BatchError::Corrupt(reason.to_string())
}

/// Zig-zag varints as Kafka's record format uses them.
struct VarintReader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> VarintReader<'a> {
    /// A varint length then that many bytes; a negative length is null.
    fn bytes_or_null(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        let Ok(length) = usize::try_from(self.varint()?) else {
            return Ok(None);
        };
        if length > self.remaining() {
            return Err(corrupt("field runs past the record"));
        }
        let bytes = &self.buf[self.at..self.at + length];
        self.at += length;
        Ok(Some(bytes))
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, BatchError> {
        let byte = *self
            .buf
            .get(self.at)
            .ok_or_else(|| corrupt("record truncated"))?;
        self.at += 1;
        Ok(byte)
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let value = self.unsigned(5)?;
        let value = u32::try_from(value).map_err(|_| corrupt("varint overflows 32 bits"))?;
        Ok(((value >> 1) as i32) ^ -((value & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let value = self.unsigned(10)?;
        Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
    }

    fn unsigned(&mut self, max_bytes: usize) -> Result<u64, BatchError> {
        let mut value = 0u64;
        for n in 0..max_bytes {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * n);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(corrupt("varint too long"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode::{self, PlainRecord};
    use super::super::header::set_base_offset;
    use super::super::test_batches::{encode_batch, BatchSpec};
    use super::*;
    use kafka_protocol::records::Compression;

    #[test]
    fn finds_records_in_plain_and_compressed_batches() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let spec = BatchSpec {
                base_offset: 100,
                timestamps: vec![50, 10, 70, 60],
                compression,
                ..Default::default()
            };
            let batch = encode_batch(&spec);
            let found = find_record(&batch, |_, timestamp| timestamp >= 55).expect("decode");
            assert_eq!(found, Some((102, 70)), "{compression:?}");
            let found = find_record(&batch, |offset, timestamp| timestamp >= 55 && offset > 102);
            assert_eq!(found.expect("decode"), Some((103, 60)));
            assert_eq!(
                find_record(&batch, |_, timestamp| timestamp > 70).expect("decode"),
                None
            );
        }
    }

    #[test]
    fn garbage_records_are_corrupt_not_a_panic() {
        let spec = BatchSpec {
            timestamps: vec![1, 2],
            ..Default::default()
        };
        let mut batch = encode_batch(&spec);
        for byte in &mut batch[RECORD_BATCH_OVERHEAD..] {
            *byte = 0xff;
        }
        assert!(matches!(
            find_record(&batch, |_, _| false),
            Err(BatchError::Corrupt(_))
        ));
        let mut gzip = encode_batch(&BatchSpec {
            compression: Compression::Gzip,
            ..spec
        });
        let len = gzip.len();
        gzip[len - 8..].fill(0);
        assert!(matches!(
            find_record(&gzip, |_, _| false),
            Err(BatchError::Corrupt(_))
        ));
    }

    #[test]
    fn decode_records_returns_offsets_keys_and_values() {
        let records = [
            PlainRecord::new(
                Some(Bytes::from_static(b"a")),
                Some(Bytes::from_static(b"1")),
                5,
            ),
            PlainRecord::new(Some(Bytes::from_static(b"b")), None, 6),
        ];
        let mut batch = Bytes::from({
            let mut batch = encode::batch(records, Compression::Gzip)
                .expect("encode")
                .to_vec();
            set_base_offset(&mut batch, 40);
            batch
        });
        let decoded = decode_records(&mut batch).expect("decode");
        assert_eq!(
            decoded,
            vec![
                KeyValue {
                    offset: 40,
                    key: Some(Bytes::from_static(b"a")),
                    value: Some(Bytes::from_static(b"1")),
                },
                KeyValue {
                    offset: 41,
                    key: Some(Bytes::from_static(b"b")),
                    value: None,
                },
            ]
        );
        assert!(decode_records(&mut Bytes::from_static(&[0u8; 70])).is_err());
    }
}
