//! The records the group coordinator writes to `__consumer_offsets`, in Kafka's own byte formats,
//! so that the topic reads the same as a Kafka broker's. Every key starts with an i16 record type
//! (Kafka calls it the key "version"): 0 and 1 are offset commits, 2 is group metadata, higher
//! ones belong to the KIP-848 protocol and are not read here. Values start with an i16 version.
//! A "string" is an i16 byte length followed by UTF-8.
//!
//! ```text
//! offset-commit key   i16 1 | string group | string topic | i32 partition
//! offset-commit value i16 3 | i64 offset | i32 leader_epoch | string metadata | i64 commit_timestamp
//!                     i16 1 | i64 offset | string metadata | i64 commit_timestamp | i64 expire_timestamp
//! group-metadata key  i16 2 | string group
//! ```
//!
//! The group-metadata value (membership) is in `group_record.rs`. This module only converts
//! bytes; it does not decide what is written or when.

use bytes::{BufMut, Bytes, BytesMut};

/// Record type of an offset commit key (0 is the legacy spelling of the same layout).
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Record type of a group metadata key.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// The offset commit value version written when no explicit expiry was requested.
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// The value version that carries an explicit expire timestamp (OffsetCommit v2-4 retention).
pub const OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY: i16 = 1;

/// A decoded `__consumer_offsets` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    OffsetCommit {
        group_id: String,
        topic: String,
        partition: i32,
    },
    GroupMetadata {
        group_id: String,
    },
    /// A record type this coordinator does not read, such as KIP-848 consumer-group records.
    Other {
        record_type: i16,
    },
}

/// A decoded offset commit value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// -1 when the committer did not know the leader epoch.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Set only by OffsetCommit v2-4 requests with an explicit retention time.
    pub expire_timestamp_ms: Option<i64>,
}

pub fn encode_offset_commit_key(
    group_id: &str,
    topic: &str,
    partition: i32,
) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(8 + group_id.len() + topic.len());
    buf.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_string(&mut buf, group_id)?;
    put_string(&mut buf, topic)?;
    buf.put_i32(partition);
    Ok(buf.freeze())
}

pub fn encode_group_metadata_key(group_id: &str) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(4 + group_id.len());
    buf.put_i16(GROUP_METADATA_KEY_VERSION);
    put_string(&mut buf, group_id)?;
    Ok(buf.freeze())
}

/// Version 3, or version 1 when the value carries an explicit expire timestamp (only version 1
/// has that field, exactly as Kafka chooses).
pub fn encode_offset_commit_value(value: &OffsetCommitValue) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(32 + value.metadata.len());
    match value.expire_timestamp_ms {
        Some(expire_timestamp_ms) => {
            buf.put_i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY);
            buf.put_i64(value.offset);
            put_string(&mut buf, &value.metadata)?;
            buf.put_i64(value.commit_timestamp_ms);
            buf.put_i64(expire_timestamp_ms);
        }
        None => {
            buf.put_i16(OFFSET_COMMIT_VALUE_VERSION);
            buf.put_i64(value.offset);
            buf.put_i32(value.leader_epoch);
            put_string(&mut buf, &value.metadata)?;
            buf.put_i64(value.commit_timestamp_ms);
        }
    }
    Ok(buf.freeze())
}

pub fn decode_key(bytes: &[u8]) -> Result<RecordKey, String> {
    let mut reader = Reader { bytes, position: 0 };
    let record_type = reader.i16()?;
    let key = match record_type {
        0 | 1 => RecordKey::OffsetCommit {
            group_id: reader.string()?,
            topic: reader.string()?,
            partition: reader.i32()?,
        },
        2 => RecordKey::GroupMetadata {
            group_id: reader.string()?,
        },
        other => return Ok(RecordKey::Other { record_type: other }),
    };
    reader.finish()?;
    Ok(key)
}

/// Reads value versions 0-4 (4 is Kafka 4.x's first flexible version, which sluice never
/// writes but may find in a topic copied from Kafka).
pub fn decode_offset_commit_value(bytes: &[u8]) -> Result<OffsetCommitValue, String> {
    let mut reader = Reader { bytes, position: 0 };
    let version = reader.i16()?;
    if !(0..=4).contains(&version) {
        return Err(format!("unknown offset commit value version {version}"));
    }
    let offset = reader.i64()?;
    let leader_epoch = if version >= 3 { reader.i32()? } else { -1 };
    let metadata = if version >= 4 {
        reader.compact_string()?
    } else {
        reader.string()?
    };
    let commit_timestamp_ms = reader.i64()?;
    let expire_timestamp_ms = if version == 1 {
        Some(reader.i64()?).filter(|t| *t != -1)
    } else {
        None
    };
    if version >= 4 {
        reader.skip_tagged_fields()?;
    }
    reader.finish()?;
    Ok(OffsetCommitValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
        expire_timestamp_ms,
    })
}

/// The `__consumer_offsets` partition Kafka assigns to a group:
/// `abs(javaStringHashCode(group_id)) % partition_count`, with Kafka's `Utils.abs` (which maps
/// `i32::MIN` to 0).
pub fn offsets_partition_for(group_id: &str, partition_count: i32) -> i32 {
    let hash = group_id
        .encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32));
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % partition_count.max(1)
}

pub(super) fn put_string(buf: &mut BytesMut, s: &str) -> Result<(), String> {
    let length = i16::try_from(s.len())
        .map_err(|_| format!("string of {} bytes is too long for a record", s.len()))?;
    buf.put_i16(length);
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// A bounds-checked cursor: records come from disk, so a short or garbled one is an error, never
/// a panic.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, position: 0 }
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .position
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| format!("record truncated at byte {}", self.position))?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    pub(super) fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }

    /// The bytes not read yet.
    pub(super) fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    pub(super) fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(super) fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn i64(&mut self) -> Result<i64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }

    pub(super) fn string(&mut self) -> Result<String, String> {
        let length = self.i16()?;
        let length = usize::try_from(length).map_err(|_| "null string in record".to_string())?;
        self.utf8(length)
    }

    pub(super) fn compact_string(&mut self) -> Result<String, String> {
        let length_plus_one = self.uvarint()?;
        let length = length_plus_one
            .checked_sub(1)
            .ok_or("null string in record")?;
        self.utf8(length as usize)
    }

    pub(super) fn utf8(&mut self, length: usize) -> Result<String, String> {
        let raw = self.take(length)?;
        String::from_utf8(raw.to_vec()).map_err(|_| "string in record is not UTF-8".to_string())
    }

    pub(super) fn uvarint(&mut self) -> Result<u32, String> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint in record is too long".to_string())
    }

    pub(super) fn skip_tagged_fields(&mut self) -> Result<(), String> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }

    pub(super) fn finish(&self) -> Result<(), String> {
        if self.position == self.bytes.len() {
            Ok(())
        } else {
            Err(format!(
                "{} trailing bytes in record",
                self.bytes.len() - self.position
            ))
        }
    }
}
