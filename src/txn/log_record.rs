//! `__transaction_state`'s record formats, Kafka's `TransactionLogKey` and `TransactionLogValue`
//! (`docs/log-format.md` §15), so that `kafka-dump-log --transaction-log-decoder` reads them:
//!
//! ```text
//! key   = i16 record type (0) | string transactional id (i16 length)
//! value = i16 version (0, or 1 flexible) | i64 producer id | i16 producer epoch |
//!         i32 timeout ms | i8 state | partitions: nullable [{string topic, [i32] partitions}] |
//!         i64 last update ms | i64 start ms | (v1) tagged fields: 0 previous producer id,
//!         1 next producer id, 2 client transaction version, 3 next producer epoch
//! ```
//!
//! v1 (written, as by a broker whose transaction version is 1 or more) uses compact strings and
//! arrays and ends each struct with its tagged fields, of which only those differing from their
//! defaults (-1, -1, 0, -1) are written. The partitions are null for an Empty record. A tombstone
//! (no value) deletes the id.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::state::{TxnRecord, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TV_0};

/// The value version sluice writes.
pub const VALUE_VERSION: i16 = 1;

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;
const TAG_NEXT_PRODUCER_EPOCH: u32 = 3;

pub fn encode_key(transactional_id: &str) -> Result<Bytes, String> {
    let length = i16::try_from(transactional_id.len())
        .map_err(|_| "transactional id too long for a record".to_string())?;
    let mut out = BytesMut::with_capacity(4 + transactional_id.len());
    out.put_i16(0);
    out.put_i16(length);
    out.put_slice(transactional_id.as_bytes());
    Ok(out.freeze())
}

pub fn decode_key(key: &[u8]) -> Result<String, String> {
    let mut reader = Reader::new(key);
    let record_type = reader.i16()?;
    if record_type != 0 {
        return Err(format!("transaction log key of type {record_type}"));
    }
    reader.string()
}

/// The record `record` as a v1 value.
pub fn encode_value(record: &TxnRecord) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_i16(VALUE_VERSION);
    out.put_i64(record.producer_id);
    out.put_i16(record.producer_epoch);
    out.put_i32(record.timeout_ms);
    out.put_i8(record.state.id());
    if record.state == TxnState::Empty {
        put_uvarint(&mut out, 0);
    } else {
        let topics = by_topic(&record.partitions);
        put_uvarint(&mut out, topics.len() as u64 + 1);
        for (topic, partitions) in topics {
            put_uvarint(&mut out, topic.len() as u64 + 1);
            out.put_slice(topic.as_bytes());
            put_uvarint(&mut out, partitions.len() as u64 + 1);
            for partition in partitions {
                out.put_i32(partition);
            }
            put_uvarint(&mut out, 0);
        }
    }
    out.put_i64(record.last_update_ms);
    out.put_i64(record.start_ms);
    let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
    if record.prev_producer_id != NO_PRODUCER_ID {
        tags.push((
            TAG_PREVIOUS_PRODUCER_ID,
            record.prev_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if record.next_producer_id != NO_PRODUCER_ID {
        tags.push((
            TAG_NEXT_PRODUCER_ID,
            record.next_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if record.client_tv != TV_0 {
        tags.push((
            TAG_CLIENT_TRANSACTION_VERSION,
            record.client_tv.to_be_bytes().to_vec(),
        ));
    }
    put_uvarint(&mut out, tags.len() as u64);
    for (tag, data) in tags {
        put_uvarint(&mut out, u64::from(tag));
        put_uvarint(&mut out, data.len() as u64);
        out.put_slice(&data);
    }
    out.freeze()
}

/// A stored value, v0 or v1.
pub fn decode_value(value: &[u8]) -> Result<TxnRecord, String> {
    let mut reader = Reader::new(value);
    let version = reader.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!("transaction log value version {version}"));
    }
    let flexible = version >= 1;
    let producer_id = reader.i64()?;
    let producer_epoch = reader.i16()?;
    let timeout_ms = reader.i32()?;
    let state_id = reader.i8()?;
    let state = TxnState::from_id(state_id).ok_or(format!("transaction state {state_id}"))?;
    let mut partitions = BTreeSet::new();
    if let Some(topics) = reader.array_len(flexible)? {
        for _ in 0..topics {
            let topic = if flexible {
                reader.compact_string()?
            } else {
                reader.string()?
            };
            let count = reader.array_len(flexible)?.unwrap_or(0);
            for _ in 0..count {
                partitions.insert((topic.clone(), reader.i32()?));
            }
            if flexible {
                reader.skip_tagged_fields()?;
            }
        }
    }
    let last_update_ms = reader.i64()?;
    let start_ms = reader.i64()?;
    let mut record = TxnRecord {
        producer_id,
        prev_producer_id: NO_PRODUCER_ID,
        next_producer_id: NO_PRODUCER_ID,
        producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        client_tv: TV_0,
    };
    if flexible {
        for (tag, data) in reader.tagged_fields()? {
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => record.prev_producer_id = be_i64(&data)?,
                TAG_NEXT_PRODUCER_ID => record.next_producer_id = be_i64(&data)?,
                TAG_CLIENT_TRANSACTION_VERSION => record.client_tv = be_i16(&data)?,
                // The next producer epoch (two-phase commit, KIP-939) is not used by sluice.
                TAG_NEXT_PRODUCER_EPOCH => {}
                _ => {}
            }
        }
    }
    Ok(record)
}

/// Partitions grouped by topic, in order.
fn by_topic(partitions: &BTreeSet<(String, i32)>) -> Vec<(&str, Vec<i32>)> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in partitions {
        match topics.last_mut() {
            Some((last, list)) if *last == topic.as_str() => list.push(*partition),
            _ => topics.push((topic.as_str(), vec![*partition])),
        }
    }
    topics
}

fn put_uvarint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn be_i64(data: &[u8]) -> Result<i64, String> {
    data.try_into()
        .map(i64::from_be_bytes)
        .map_err(|_| "tagged int64 of the wrong size".to_string())
}

fn be_i16(data: &[u8]) -> Result<i16, String> {
    data.try_into()
        .map(i16::from_be_bytes)
        .map_err(|_| "tagged int16 of the wrong size".to_string())
}

/// A bounded reader over a record's bytes: every length is checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or("transaction log record truncated")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }

    fn i16(&mut self) -> Result<i16, String> {
        be_i16(self.take(2)?)
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, String> {
        be_i64(self.take(8)?)
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err("varint too long".to_string())
    }

    fn string(&mut self) -> Result<String, String> {
        let length = usize::try_from(self.i16()?).map_err(|_| "null string".to_string())?;
        utf8(self.take(length)?)
    }

    fn compact_string(&mut self) -> Result<String, String> {
        let length = self.uvarint()?.checked_sub(1).ok_or("null string")?;
        let length = usize::try_from(length).map_err(|_| "string too long".to_string())?;
        utf8(self.take(length)?)
    }

    /// An array's length, None for a null array.
    fn array_len(&mut self, flexible: bool) -> Result<Option<usize>, String> {
        let length = if flexible {
            match self.uvarint()? {
                0 => return Ok(None),
                n => n - 1,
            }
        } else {
            match self.i32()? {
                n if n < 0 => return Ok(None),
                n => n as u64,
            }
        };
        // Every element takes at least one byte: a length past the bytes left is corrupt.
        let length = usize::try_from(length).map_err(|_| "array too long".to_string())?;
        if length > self.bytes.len() - self.at {
            return Err("array longer than the record".to_string());
        }
        Ok(Some(length))
    }

    fn tagged_fields(&mut self) -> Result<Vec<(u32, Vec<u8>)>, String> {
        let count = self.uvarint()?;
        let mut fields = Vec::new();
        for _ in 0..count {
            let tag = u32::try_from(self.uvarint()?).map_err(|_| "tag too large".to_string())?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| "tag too long".to_string())?;
            fields.push((tag, self.take(size)?.to_vec()));
        }
        Ok(fields)
    }

    fn skip_tagged_fields(&mut self) -> Result<(), String> {
        self.tagged_fields().map(drop)
    }
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "string is not UTF-8".to_string())
}
