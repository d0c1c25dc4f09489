//! The group-metadata value: a classic group's membership as Kafka stores it in
//! `__consumer_offsets` under key type 2 (`GroupMetadataValue`, versions 0-4; 4 is flexible).
//! sluice writes version 3, the version Kafka 4.x writes, so Kafka's own tools decode it.
//!
//! ```text
//! value v3  i16 3 | string protocol_type | i32 generation | nullable string protocol
//!           | nullable string leader | i64 current_state_timestamp | i32 member count
//!           | members
//! member    string member_id | nullable string group_instance_id | string client_id
//!           | string client_host | i32 rebalance_timeout | i32 session_timeout
//!           | bytes subscription | bytes assignment
//! ```
//!
//! A nullable string is an i16 length (-1 for null) and UTF-8; bytes are an i32 length and raw
//! bytes. Older versions lack fields: v0 has no rebalance timeout, v0-1 no state timestamp, v0-2
//! no group instance id. Version 4 spells the same fields the flexible way (varint lengths plus
//! tagged fields). Like `records.rs`, this only converts bytes.

use bytes::{BufMut, Bytes, BytesMut};

use super::records::{put_string, Reader};

/// The value version Kafka 4.x writes (`MetadataVersion.groupMetadataValueVersion`).
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// A decoded group-metadata value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// Empty for a group that never had a protocol type.
    pub protocol_type: String,
    pub generation: i32,
    /// None while the group is Empty.
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// When the group entered its current state; -1 when unknown (versions 0-1).
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberMetadata>,
}

/// One member of a stored group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// -1 when the record predates rebalance timeouts (version 0).
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// Version 3. Fails only on a string longer than an i16 length or bytes longer than an i32 one.
pub fn encode_group_metadata_value(value: &GroupMetadataValue) -> Result<Bytes, String> {
    let members_len: usize = value
        .members
        .iter()
        .map(|m| 32 + m.member_id.len() + m.subscription.len() + m.assignment.len())
        .sum();
    let mut buf = BytesMut::with_capacity(32 + value.protocol_type.len() + members_len);
    buf.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_string(&mut buf, &value.protocol_type)?;
    buf.put_i32(value.generation);
    put_nullable_string(&mut buf, value.protocol.as_deref())?;
    put_nullable_string(&mut buf, value.leader.as_deref())?;
    buf.put_i64(value.current_state_timestamp_ms);
    buf.put_i32(array_length(value.members.len())?);
    for member in &value.members {
        put_string(&mut buf, &member.member_id)?;
        put_nullable_string(&mut buf, member.group_instance_id.as_deref())?;
        put_string(&mut buf, &member.client_id)?;
        put_string(&mut buf, &member.client_host)?;
        buf.put_i32(member.rebalance_timeout_ms);
        buf.put_i32(member.session_timeout_ms);
        put_bytes(&mut buf, &member.subscription)?;
        put_bytes(&mut buf, &member.assignment)?;
    }
    Ok(buf.freeze())
}

/// Reads versions 0-4.
pub fn decode_group_metadata_value(bytes: &[u8]) -> Result<GroupMetadataValue, String> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if !(0..=4).contains(&version) {
        return Err(format!("unknown group metadata value version {version}"));
    }
    let mut fields = Fields {
        reader,
        flexible: version >= 4,
    };
    let protocol_type = fields.string()?;
    let generation = fields.reader.i32()?;
    let protocol = fields.nullable_string()?;
    let leader = fields.nullable_string()?;
    let current_state_timestamp_ms = if version >= 2 {
        fields.reader.i64()?
    } else {
        -1
    };
    let count = fields.array_length()?;
    let mut members = Vec::new();
    for _ in 0..count {
        members.push(decode_member(&mut fields, version)?);
    }
    fields.tagged_fields()?;
    fields.reader.finish()?;
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

fn decode_member(fields: &mut Fields, version: i16) -> Result<MemberMetadata, String> {
    let member_id = fields.string()?;
    let group_instance_id = if version >= 3 {
        fields.nullable_string()?
    } else {
        None
    };
    let client_id = fields.string()?;
    let client_host = fields.string()?;
    let rebalance_timeout_ms = if version >= 1 {
        fields.reader.i32()?
    } else {
        -1
    };
    let session_timeout_ms = fields.reader.i32()?;
    let subscription = fields.bytes()?;
    let assignment = fields.bytes()?;
    fields.tagged_fields()?;
    Ok(MemberMetadata {
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        subscription,
        assignment,
    })
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) -> Result<(), String> {
    match s {
        Some(s) => put_string(buf, s),
        None => {
            buf.put_i16(-1);
            Ok(())
        }
    }
}

fn put_bytes(buf: &mut BytesMut, bytes: &[u8]) -> Result<(), String> {
    buf.put_i32(array_length(bytes.len())?);
    buf.put_slice(bytes);
    Ok(())
}

fn array_length(length: usize) -> Result<i32, String> {
    i32::try_from(length).map_err(|_| format!("{length} is too long for a record"))
}

/// The version-dependent spellings of strings, arrays and bytes: fixed-width lengths up to
/// version 3, unsigned varints (length + 1, 0 for null) and tagged fields in version 4.
struct Fields<'a> {
    reader: Reader<'a>,
    flexible: bool,
}

impl Fields<'_> {
    fn string(&mut self) -> Result<String, String> {
        self.nullable_string()?
            .ok_or_else(|| "null string in group metadata".to_string())
    }

    fn nullable_string(&mut self) -> Result<Option<String>, String> {
        let length = self.length()?;
        length.map(|n| self.reader.utf8(n)).transpose()
    }

    fn bytes(&mut self) -> Result<Bytes, String> {
        let length = self
            .length_wide()?
            .ok_or_else(|| "null bytes in group metadata".to_string())?;
        Ok(Bytes::copy_from_slice(self.reader.take(length)?))
    }

    fn array_length(&mut self) -> Result<usize, String> {
        self.length_wide()?
            .ok_or_else(|| "null member array in group metadata".to_string())
    }

    /// A string length: i16, or a varint in flexible versions. None for null.
    fn length(&mut self) -> Result<Option<usize>, String> {
        if self.flexible {
            return self.varint_length();
        }
        Ok(usize::try_from(self.reader.i16()?).ok())
    }

    /// An array or bytes length: i32, or a varint in flexible versions. None for null.
    fn length_wide(&mut self) -> Result<Option<usize>, String> {
        if self.flexible {
            return self.varint_length();
        }
        Ok(usize::try_from(self.reader.i32()?).ok())
    }

    fn varint_length(&mut self) -> Result<Option<usize>, String> {
        let length_plus_one = self.reader.uvarint()?;
        Ok(length_plus_one.checked_sub(1).map(|n| n as usize))
    }

    fn tagged_fields(&mut self) -> Result<(), String> {
        if self.flexible {
            self.reader.skip_tagged_fields()?;
        }
        Ok(())
    }
}
