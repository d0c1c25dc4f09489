//! A zero-copy view of the 61-byte header of a v2 RecordBatch (magic 2), the only batch format this
//! broker stores, plus the few in-place edits the broker makes to a batch it appends.
//!
//! This module owns the byte layout of the header and the rules that decide whether a run of bytes
//! starts with a whole, plausible batch. It deliberately knows nothing about records, compression,
//! files or offsets assignment policy: the log and the produce path build on it.

use std::fmt;

/// Bytes in a v2 batch header; also the smallest valid batch.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes before the part counted by `batchLength`: base offset (8) and the length itself (4).
pub const LOG_OVERHEAD: usize = 12;

/// Bytes needed to read base offset, length, leader epoch and magic: the least a reader must see
/// before it can tell a torn tail from a batch.
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
/// Smallest `batchLength` of any message format Kafka ever wrote (a v0 record). A smaller value is
/// corruption, not a torn write; zero-filled tails are caught here.
pub const MIN_BATCH_LENGTH_ANY_FORMAT: i32 = 14;

pub const MAGIC_V2: i8 = 2;
/// Start of the CRC-32C's coverage: attributes onwards.
pub const CRC_COVERED_FROM: usize = 21;

const BASE_OFFSET_AT: usize = 0;
const LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;
/// KIP-534: the base timestamp holds the time after which the cleaner may drop the batch's
/// tombstones.
const DELETE_HORIZON_BIT: i16 = 1 << 6;

/// Why bytes are not a usable v2 batch header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer bytes than the header (or the declared batch) needs.
    Truncated { needed: usize, available: usize },
    /// `batchLength` too small for a v2 batch, or too small for any format.
    InvalidLength(i32),
    /// Magic other than 2 (v0/v1 message sets are not supported).
    UnsupportedMagic(i8),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Truncated { needed, available } => {
                write!(
                    f,
                    "batch truncated: needs {needed} bytes, {available} available"
                )
            }
            HeaderError::InvalidLength(length) => write!(f, "invalid batch length {length}"),
            HeaderError::UnsupportedMagic(magic) => write!(f, "unsupported batch magic {magic}"),
        }
    }
}

impl std::error::Error for HeaderError {}

/// The fixed header of a v2 RecordBatch, decoded field by field (big-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the header at the start of `buf`. Needs 61 bytes and magic 2; does not need the
    /// whole batch, so a scanner can parse a header without reading the records.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, HeaderError> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(HeaderError::Truncated {
                needed: RECORD_BATCH_OVERHEAD,
                available: buf.len(),
            });
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(HeaderError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(buf, LENGTH_AT);
        // Checked here so that total_size() can never wrap.
        if batch_length < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32 {
            return Err(HeaderError::InvalidLength(batch_length));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, BASE_OFFSET_AT),
            batch_length,
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_AT),
            magic,
            crc: be_i32(buf, CRC_AT) as u32,
            attributes: be_i16(buf, ATTRIBUTES_AT),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_AT),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_AT),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_AT),
            producer_id: be_i64(buf, PRODUCER_ID_AT),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
            records_count: be_i32(buf, RECORDS_COUNT_AT),
        })
    }

    /// Bytes the batch occupies on disk and on the wire: `batchLength + 12`.
    pub fn total_size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Compression codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// The delete horizon the log cleaner stamped (KIP-534), if any.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }

    /// LogAppendTime batches carry the append time in max timestamp, and readers report it as the
    /// timestamp of every record.
    pub fn timestamp_type_is_log_append(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }
}

/// True when the stored CRC-32C matches bytes [21, end). `batch` must be exactly one batch.
pub fn crc_is_valid(batch: &[u8]) -> bool {
    if batch.len() < RECORD_BATCH_OVERHEAD {
        return false;
    }
    be_i32(batch, CRC_AT) as u32 == crc32c::crc32c(&batch[CRC_COVERED_FROM..])
}

/// Overwrites bytes 0..8. The CRC does not cover them, so it stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites bytes 12..16. The CRC does not cover them, so it stays valid.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Kafka's `setMaxTimestamp(LOG_APPEND_TIME, append_time_ms)` for a LogAppendTime topic: sets the
/// timestamp-type bit of the attributes, makes `append_time_ms` the max timestamp and recomputes
/// the CRC-32C, which covers both. The records' timestamp deltas are left alone: readers report the
/// max timestamp for every record of such a batch. `head` is the batch's first
/// `RECORD_BATCH_OVERHEAD` bytes, the only ones changed, and `records` the rest of the batch.
pub fn set_log_append_time(head: &mut [u8], records: &[u8], append_time_ms: i64) {
    assert_eq!(
        head.len(),
        RECORD_BATCH_OVERHEAD,
        "set_log_append_time takes a whole batch header"
    );
    let attributes = be_i16(head, ATTRIBUTES_AT) | TIMESTAMP_TYPE_BIT;
    head[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    head[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&append_time_ms.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[CRC_COVERED_FROM..]), records);
    head[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A batch made of `head` (a batch's first `RECORD_BATCH_OVERHEAD` bytes) and `records` encoded
/// in `codec`: the length, the codec bits of the attributes and the CRC-32C are set for the new
/// records; every other header field is kept.
pub fn with_records(head: &[u8], records: &[u8], codec: u8) -> Vec<u8> {
    assert_eq!(
        head.len(),
        RECORD_BATCH_OVERHEAD,
        "with_records takes a whole batch header"
    );
    let mut batch = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len());
    batch.extend_from_slice(head);
    batch.extend_from_slice(records);
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    let attributes = (be_i16(&batch, ATTRIBUTES_AT) & !COMPRESSION_MASK) | i16::from(codec);
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Stamps a delete horizon (KIP-534) into a header: attribute bit 6, and the horizon as base
/// timestamp. The records' timestamp deltas must be re-encoded against it; the CRC is not
/// updated (`with_records` computes it afterwards).
pub fn set_delete_horizon(head: &mut [u8], horizon_ms: i64) {
    let attributes = be_i16(head, ATTRIBUTES_AT) | DELETE_HORIZON_BIT;
    head[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    head[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&horizon_ms.to_be_bytes());
}

/// Sets a batch header's max timestamp; the CRC is not updated.
pub fn set_max_timestamp(head: &mut [u8], max_timestamp_ms: i64) {
    head[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp_ms.to_be_bytes());
}

/// Sets a batch header's record count (the log cleaner keeps a batch's offsets but not all of
/// its records). The CRC is not updated: `with_records` computes it afterwards.
pub fn set_records_count(head: &mut [u8], records_count: i32) {
    head[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&records_count.to_be_bytes());
}

/// What the first bytes of a region say about the batch that starts there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A whole v2 batch of this many bytes lies within the region.
    Whole(usize),
    /// The region ends before the batch does: a torn write at the tail, not corruption.
    Torn,
    /// The bytes can never start a batch: stop reading here.
    Corrupt(HeaderError),
}

/// Classifies the batch starting at `prefix[0]`, where `prefix` holds at least the first
/// min(61, remaining_bytes) bytes and `remaining_bytes` counts bytes left in the region from there.
/// The order of checks follows Kafka's file reader, so we truncate where Kafka would.
pub fn check_frame(prefix: &[u8], remaining_bytes: u64) -> Frame {
    if remaining_bytes < HEADER_SIZE_UP_TO_MAGIC as u64 || prefix.len() < HEADER_SIZE_UP_TO_MAGIC {
        return Frame::Torn;
    }
    let length = be_i32(prefix, LENGTH_AT);
    if length < MIN_BATCH_LENGTH_ANY_FORMAT {
        return Frame::Corrupt(HeaderError::InvalidLength(length));
    }
    let total = length as u64 + LOG_OVERHEAD as u64;
    if total > remaining_bytes {
        return Frame::Torn;
    }
    let magic = prefix[MAGIC_AT] as i8;
    if magic != MAGIC_V2 {
        return Frame::Corrupt(HeaderError::UnsupportedMagic(magic));
    }
    if total < RECORD_BATCH_OVERHEAD as u64 {
        return Frame::Corrupt(HeaderError::InvalidLength(length));
    }
    Frame::Whole(total as usize)
}

/// Iterates whole batches in a byte region (segment file contents or a fetch response), yielding
/// (position, header). Ends quietly at a torn tail; yields one error and then ends at bytes that
/// cannot start a batch. It checks framing only, not CRCs.
pub struct BatchIter<'a> {
    region: &'a [u8],
    position: usize,
    finished: bool,
    torn_tail: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(region: &'a [u8]) -> BatchIter<'a> {
        BatchIter {
            region,
            position: 0,
            finished: false,
            torn_tail: false,
        }
    }

    /// Where the next batch would start: after iteration ends, the length of the valid prefix.
    pub fn position(&self) -> usize {
        self.position
    }

    /// True when iteration ended at a partial batch rather than at the region's end or an error.
    pub fn stopped_at_torn_tail(&self) -> bool {
        self.torn_tail
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(usize, BatchHeader), HeaderError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished || self.position >= self.region.len() {
            self.finished = true;
            return None;
        }
        let rest = &self.region[self.position..];
        match check_frame(rest, rest.len() as u64) {
            Frame::Torn => {
                self.finished = true;
                self.torn_tail = true;
                None
            }
            Frame::Corrupt(error) => {
                self.finished = true;
                Some(Err(error))
            }
            Frame::Whole(total) => match BatchHeader::parse(rest) {
                Ok(header) => {
                    let position = self.position;
                    self.position += total;
                    Some(Ok((position, header)))
                }
                Err(error) => {
                    self.finished = true;
                    Some(Err(error))
                }
            },
        }
    }
}

fn be_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&buf[at..at + 4]);
    i32::from_be_bytes(bytes)
}

fn be_i64(buf: &[u8], at: usize) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal uncompressed batch with `records_count` fake records, valid CRC.
    pub(crate) fn fake_batch(records: usize, max_timestamp: i64) -> Vec<u8> {
        let mut batch = vec![0u8; RECORD_BATCH_OVERHEAD + records * 8];
        let length = (batch.len() - LOG_OVERHEAD) as i32;
        batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
            .copy_from_slice(&(-1i32).to_be_bytes());
        batch[MAGIC_AT] = 2;
        let delta = records as i32 - 1;
        batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&delta.to_be_bytes());
        batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
        batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4]
            .copy_from_slice(&(records as i32).to_be_bytes());
        let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    #[test]
    fn parse_reads_every_field_and_edits_keep_the_crc() {
        let mut batch = fake_batch(3, 1_000);
        set_base_offset(&mut batch, 42);
        set_partition_leader_epoch(&mut batch, 7);
        let header = BatchHeader::parse(&batch).expect("valid header");
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.partition_leader_epoch, 7);
        assert_eq!(header.last_offset(), 44);
        assert_eq!(header.max_timestamp, 1_000);
        assert_eq!(header.records_count, 3);
        assert_eq!(header.total_size(), batch.len());
        assert!(crc_is_valid(&batch));
        batch[70] ^= 1;
        assert!(!crc_is_valid(&batch));
    }

    #[test]
    fn log_append_time_sets_bit_3_and_max_timestamp_and_keeps_the_crc_valid() {
        let mut batch = fake_batch(3, 1_000);
        let records_before = batch[RECORD_BATCH_OVERHEAD..].to_vec();
        let (head, records) = batch.split_at_mut(RECORD_BATCH_OVERHEAD);
        set_log_append_time(head, records, 77_000);
        let header = BatchHeader::parse(&batch).expect("valid header");
        assert!(header.timestamp_type_is_log_append());
        assert_eq!(header.attributes & !TIMESTAMP_TYPE_BIT, 0);
        assert_eq!(header.max_timestamp, 77_000);
        assert!(crc_is_valid(&batch));
        assert_eq!(&batch[RECORD_BATCH_OVERHEAD..], &records_before[..]);
    }

    #[test]
    fn parse_rejects_short_bad_magic_and_bad_length() {
        let batch = fake_batch(1, 0);
        assert!(matches!(
            BatchHeader::parse(&batch[..60]),
            Err(HeaderError::Truncated { .. })
        ));
        let mut bad_magic = batch.clone();
        bad_magic[MAGIC_AT] = 1;
        assert_eq!(
            BatchHeader::parse(&bad_magic),
            Err(HeaderError::UnsupportedMagic(1))
        );
        let mut bad_length = batch;
        bad_length[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(
            BatchHeader::parse(&bad_length),
            Err(HeaderError::InvalidLength(-5))
        );
    }

    #[test]
    fn iter_stops_at_torn_tail_and_at_zero_fill() {
        let mut region = fake_batch(2, 0);
        region.extend(fake_batch(1, 0));
        let whole = region.len();
        region.extend(&fake_batch(4, 0)[..30]);
        let mut iter = BatchIter::new(&region);
        let positions: Vec<usize> = iter.by_ref().map(|item| item.expect("batch").0).collect();
        assert_eq!(positions, vec![0, 77]);
        assert_eq!(iter.position(), whole);
        assert!(iter.stopped_at_torn_tail());

        let mut zeroed = fake_batch(1, 0);
        zeroed.extend(vec![0u8; 100]);
        let items: Vec<_> = BatchIter::new(&zeroed).collect();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1], Err(HeaderError::InvalidLength(0)));
    }

    #[test]
    fn check_frame_order_matches_kafka() {
        assert_eq!(check_frame(&[0u8; 16], 16), Frame::Torn);
        assert_eq!(
            check_frame(&[0u8; 17], 17),
            Frame::Corrupt(HeaderError::InvalidLength(0))
        );
        let batch = fake_batch(1, 0);
        assert_eq!(check_frame(&batch, batch.len() as u64 - 1), Frame::Torn);
        assert_eq!(
            check_frame(&batch, batch.len() as u64),
            Frame::Whole(batch.len())
        );
    }
}
