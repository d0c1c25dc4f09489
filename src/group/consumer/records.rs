//! The consumer-group records in `__consumer_offsets`, in Kafka 4.4's byte formats (the
//! `ConsumerGroup*` coordinator records), so that `kafka-dump-log --offsets-decoder` decodes
//! them. A key is an i16 record type and the key's fields at version 0, not flexible (strings
//! with an i16 length); a value is an i16 version (0) and the value's fields, flexible (varint
//! lengths plus one, tagged fields at the end). A tombstone has no value.
//!
//! ```text
//! type  key                      value (version 0)
//!  3    group                    Epoch i32, [tag 0] MetadataHash i64
//!  4    group                    (pre-4.1 subscription metadata; only read, then tombstoned)
//!  5    group, member            InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames[],
//!                                SubscribedTopicRegex?, RebalanceTimeoutMs i32, ServerAssignor?,
//!                                [tag 0] ClassicMemberMetadata? {SessionTimeoutMs, Protocols[{Name, Metadata}]}
//!  6    group                    AssignmentEpoch i32, [tag 0] AssignmentTimestamp i64
//!  7    group, member            TopicPartitions[{TopicId, Partitions[]}]
//!  8    group, member            MemberEpoch, PreviousMemberEpoch, State i8,
//!                                AssignedPartitions[{TopicId, Partitions[], [tag 0] AssignmentEpochs[]}],
//!                                PartitionsPendingRevocation[same]
//! 16    group, regex             Topics[], Version i64, Timestamp i64
//! ```

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::member::{
    ClassicMemberMetadata, ClassicProtocol, MemberAssignment, MemberMetadata, MemberState,
    PartitionEpochs, PartitionSet,
};
use super::ResolvedRegex;
use crate::group::records::{put_string, Reader};

pub(crate) const GROUP_EPOCH: i16 = 3;
pub(crate) const PARTITION_METADATA: i16 = 4;
pub(crate) const MEMBER_METADATA: i16 = 5;
pub(crate) const TARGET_METADATA: i16 = 6;
pub(crate) const TARGET_MEMBER: i16 = 7;
pub(crate) const CURRENT_ASSIGNMENT: i16 = 8;
pub(crate) const REGULAR_EXPRESSION: i16 = 16;

/// A decoded consumer-group key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsumerKey {
    pub record_type: i16,
    pub group_id: String,
    /// The member id (types 5, 7, 8) or the regular expression (type 16).
    pub second: Option<String>,
}

pub(crate) fn is_consumer_record_type(record_type: i16) -> bool {
    matches!(record_type, 3..=8 | 16)
}

pub(crate) fn key(record_type: i16, group_id: &str, second: Option<&str>) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(8 + group_id.len());
    buf.put_i16(record_type);
    put_string(&mut buf, group_id)?;
    if let Some(second) = second {
        put_string(&mut buf, second)?;
    }
    Ok(buf.freeze())
}

pub(crate) fn decode_key(bytes: &[u8]) -> Result<ConsumerKey, String> {
    let mut reader = Reader::new(bytes);
    let record_type = reader.i16()?;
    let group_id = reader.string()?;
    let second = match record_type {
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT | REGULAR_EXPRESSION => {
            Some(reader.string()?)
        }
        _ => None,
    };
    reader.finish()?;
    Ok(ConsumerKey {
        record_type,
        group_id,
        second,
    })
}

/// A flexible-version value being written.
struct Writer(BytesMut);

impl Writer {
    fn new() -> Writer {
        let mut buf = BytesMut::with_capacity(64);
        buf.put_i16(0);
        Writer(buf)
    }
    fn uvarint(&mut self, mut value: u32) {
        while value >= 0x80 {
            self.0.put_u8((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.put_u8(value as u8);
    }
    fn len(&mut self, n: usize) -> Result<(), String> {
        let n = u32::try_from(n + 1).map_err(|_| format!("{n} is too long for a record"))?;
        self.uvarint(n);
        Ok(())
    }
    fn string(&mut self, s: &str) -> Result<(), String> {
        self.len(s.len())?;
        self.0.put_slice(s.as_bytes());
        Ok(())
    }
    fn nullable_string(&mut self, s: Option<&str>) -> Result<(), String> {
        match s {
            Some(s) => self.string(s),
            None => {
                self.uvarint(0);
                Ok(())
            }
        }
    }
    fn int32s(&mut self, values: impl ExactSizeIterator<Item = i32>) -> Result<(), String> {
        self.len(values.len())?;
        for v in values {
            self.0.put_i32(v);
        }
        Ok(())
    }
    fn no_tags(&mut self) {
        self.uvarint(0);
    }
    /// One tagged field (tag 0) holding `body`, or none when `body` is None.
    fn tag0(&mut self, body: Option<BytesMut>) -> Result<(), String> {
        match body {
            None => self.no_tags(),
            Some(body) => {
                self.uvarint(1);
                self.uvarint(0);
                self.uvarint(u32::try_from(body.len()).map_err(|_| "tagged field too long")?);
                self.0.put_slice(&body);
            }
        }
        Ok(())
    }
    fn finish(self) -> Bytes {
        self.0.freeze()
    }
}

/// A flexible-version value being read.
struct Fields<'a>(Reader<'a>);

impl<'a> Fields<'a> {
    fn open(bytes: &'a [u8]) -> Result<Fields<'a>, String> {
        let mut reader = Reader::new(bytes);
        let version = reader.i16()?;
        if version != 0 {
            return Err(format!("unknown consumer group value version {version}"));
        }
        Ok(Fields(reader))
    }
    fn nullable_len(&mut self) -> Result<Option<usize>, String> {
        let n = self.0.uvarint()?;
        Ok(n.checked_sub(1).map(|n| n as usize))
    }
    fn len(&mut self) -> Result<usize, String> {
        self.nullable_len()?
            .ok_or_else(|| "null where a value is required".to_string())
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.len()?;
        self.0.utf8(n)
    }
    fn nullable_string(&mut self) -> Result<Option<String>, String> {
        match self.nullable_len()? {
            Some(n) => Ok(Some(self.0.utf8(n)?)),
            None => Ok(None),
        }
    }
    fn uuid(&mut self) -> Result<Uuid, String> {
        let raw = self.0.take(16)?;
        Uuid::from_slice(raw).map_err(|e| e.to_string())
    }
    fn int32s(&mut self) -> Result<Vec<i32>, String> {
        let n = self.len()?;
        // Each element takes four bytes: a count larger than what is left is garbage.
        if n > self.remaining() / 4 {
            return Err("array longer than its record".to_string());
        }
        (0..n).map(|_| self.0.i32()).collect()
    }
    fn array_len(&mut self) -> Result<usize, String> {
        let n = self.len()?;
        if n > self.remaining() {
            return Err("array longer than its record".to_string());
        }
        Ok(n)
    }
    fn remaining(&self) -> usize {
        self.0.remaining()
    }
    /// The tagged fields: the bytes of tag 0, if present; others are skipped.
    fn tags(&mut self) -> Result<Option<Vec<u8>>, String> {
        let count = self.0.uvarint()?;
        let mut tag0 = None;
        for _ in 0..count {
            let tag = self.0.uvarint()?;
            let size = self.0.uvarint()? as usize;
            let body = self.0.take(size)?;
            if tag == 0 {
                tag0 = Some(body.to_vec());
            }
        }
        Ok(tag0)
    }
}

pub(crate) fn group_epoch_value(epoch: i32, metadata_hash: i64) -> Bytes {
    let mut w = Writer::new();
    w.0.put_i32(epoch);
    let hash = (metadata_hash != 0).then(|| {
        let mut b = BytesMut::new();
        b.put_i64(metadata_hash);
        b
    });
    // A tag of eight bytes cannot be too long.
    let _ = w.tag0(hash);
    w.finish()
}

pub(crate) fn decode_group_epoch(bytes: &[u8]) -> Result<(i32, i64), String> {
    let mut f = Fields::open(bytes)?;
    let epoch = f.0.i32()?;
    let hash = match f.tags()? {
        Some(tag) => Reader::new(&tag).i64()?,
        None => 0,
    };
    f.0.finish()?;
    Ok((epoch, hash))
}

pub(crate) fn target_metadata_value(epoch: i32, timestamp_ms: i64) -> Bytes {
    let mut w = Writer::new();
    w.0.put_i32(epoch);
    let timestamp = (timestamp_ms != 0).then(|| {
        let mut b = BytesMut::new();
        b.put_i64(timestamp_ms);
        b
    });
    let _ = w.tag0(timestamp);
    w.finish()
}

pub(crate) fn decode_target_metadata(bytes: &[u8]) -> Result<(i32, i64), String> {
    decode_group_epoch(bytes)
}

pub(crate) fn member_metadata_value(m: &MemberMetadata) -> Result<Bytes, String> {
    let mut w = Writer::new();
    w.nullable_string(m.instance_id.as_deref())?;
    w.nullable_string(m.rack_id.as_deref())?;
    w.string(&m.client_id)?;
    w.string(&m.client_host)?;
    w.len(m.subscribed_topic_names.len())?;
    for topic in &m.subscribed_topic_names {
        w.string(topic)?;
    }
    w.nullable_string(Some(&m.subscribed_topic_regex))?;
    w.0.put_i32(m.rebalance_timeout_ms);
    w.nullable_string(m.server_assignor.as_deref())?;
    // Kafka writes this tagged struct even when null: a varint marker (0 null, 1 present) and
    // then the struct.
    let mut inner = Writer(BytesMut::new());
    match &m.classic {
        None => inner.uvarint(0),
        Some(c) => {
            inner.uvarint(1);
            inner.0.put_i32(c.session_timeout_ms);
            inner.len(c.protocols.len())?;
            for p in &c.protocols {
                inner.string(&p.name)?;
                inner.len(p.metadata.len())?;
                inner.0.put_slice(&p.metadata);
                inner.no_tags();
            }
            inner.no_tags();
        }
    }
    w.tag0(Some(inner.0))?;
    Ok(w.finish())
}

pub(crate) fn decode_member_metadata(bytes: &[u8]) -> Result<MemberMetadata, String> {
    let mut f = Fields::open(bytes)?;
    let instance_id = f.nullable_string()?;
    let rack_id = f.nullable_string()?;
    let client_id = f.string()?;
    let client_host = f.string()?;
    let count = f.array_len()?;
    let mut subscribed_topic_names = BTreeSet::new();
    for _ in 0..count {
        subscribed_topic_names.insert(f.string()?);
    }
    let subscribed_topic_regex = f.nullable_string()?.unwrap_or_default();
    let rebalance_timeout_ms = f.0.i32()?;
    let server_assignor = f.nullable_string()?;
    let classic = match f.tags()? {
        None => None,
        Some(tag) => decode_classic(&tag)?,
    };
    f.0.finish()?;
    Ok(MemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

fn decode_classic(bytes: &[u8]) -> Result<Option<ClassicMemberMetadata>, String> {
    let mut f = Fields(Reader::new(bytes));
    if f.0.uvarint()? == 0 {
        return Ok(None);
    }
    let session_timeout_ms = f.0.i32()?;
    let count = f.array_len()?;
    let mut protocols = Vec::with_capacity(count);
    for _ in 0..count {
        let name = f.string()?;
        let n = f.len()?;
        let metadata = Bytes::copy_from_slice(f.0.take(n)?);
        f.tags()?;
        protocols.push(ClassicProtocol { name, metadata });
    }
    f.tags()?;
    Ok(Some(ClassicMemberMetadata {
        session_timeout_ms,
        protocols,
    }))
}

pub(crate) fn target_member_value(partitions: &PartitionSet) -> Result<Bytes, String> {
    let mut w = Writer::new();
    w.len(partitions.len())?;
    for (topic, ps) in partitions {
        w.0.put_slice(topic.as_bytes());
        w.int32s(ps.iter().copied())?;
        w.no_tags();
    }
    w.no_tags();
    Ok(w.finish())
}

pub(crate) fn decode_target_member(bytes: &[u8]) -> Result<PartitionSet, String> {
    let mut f = Fields::open(bytes)?;
    let count = f.array_len()?;
    let mut set = PartitionSet::new();
    for _ in 0..count {
        let topic = f.uuid()?;
        let partitions = f.int32s()?;
        f.tags()?;
        set.entry(topic).or_default().extend(partitions);
    }
    f.tags()?;
    f.0.finish()?;
    Ok(set)
}

fn put_epochs(w: &mut Writer, map: &PartitionEpochs) -> Result<(), String> {
    w.len(map.len())?;
    for (topic, partitions) in map {
        w.0.put_slice(topic.as_bytes());
        w.int32s(partitions.keys().copied())?;
        // Kafka leaves an empty epoch list out.
        let epochs = match partitions.is_empty() {
            true => None,
            false => {
                let mut epochs = Writer(BytesMut::new());
                epochs.int32s(partitions.values().copied())?;
                Some(epochs.0)
            }
        };
        w.tag0(epochs)?;
    }
    Ok(())
}

fn read_epochs(f: &mut Fields, default_epoch: i32) -> Result<PartitionEpochs, String> {
    let count = f.array_len()?;
    let mut map = PartitionEpochs::new();
    for _ in 0..count {
        let topic = f.uuid()?;
        let partitions = f.int32s()?;
        let epochs = match f.tags()? {
            Some(tag) => {
                let mut inner = Fields(Reader::new(&tag));
                match inner.nullable_len()? {
                    None => None,
                    Some(n) if n == partitions.len() && n <= tag.len() / 4 => Some(
                        (0..n)
                            .map(|_| inner.0.i32())
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                    Some(_) => None,
                }
            }
            None => None,
        };
        let entry = map.entry(topic).or_default();
        for (i, p) in partitions.iter().enumerate() {
            let epoch = epochs.as_ref().map_or(default_epoch.max(0), |e| e[i]);
            entry.insert(*p, epoch);
        }
    }
    Ok(map)
}

pub(crate) fn current_assignment_value(a: &MemberAssignment) -> Result<Bytes, String> {
    let mut w = Writer::new();
    w.0.put_i32(a.member_epoch);
    w.0.put_i32(a.previous_member_epoch);
    w.0.put_i8(a.state.value());
    put_epochs(&mut w, &a.assigned)?;
    put_epochs(&mut w, &a.pending_revocation)?;
    w.no_tags();
    Ok(w.finish())
}

pub(crate) fn decode_current_assignment(bytes: &[u8]) -> Result<MemberAssignment, String> {
    let mut f = Fields::open(bytes)?;
    let member_epoch = f.0.i32()?;
    let previous_member_epoch = f.0.i32()?;
    let state = MemberState::from_value(f.0.i8()?);
    let assigned = read_epochs(&mut f, member_epoch)?;
    let pending_revocation = read_epochs(&mut f, member_epoch)?;
    f.tags()?;
    f.0.finish()?;
    Ok(MemberAssignment {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

pub(crate) fn regex_value(resolved: &ResolvedRegex) -> Result<Bytes, String> {
    let mut w = Writer::new();
    w.len(resolved.topics.len())?;
    for topic in &resolved.topics {
        w.string(topic)?;
    }
    w.0.put_i64(resolved.version);
    w.0.put_i64(resolved.timestamp_ms);
    w.no_tags();
    Ok(w.finish())
}

pub(crate) fn decode_regex(bytes: &[u8]) -> Result<ResolvedRegex, String> {
    let mut f = Fields::open(bytes)?;
    let count = f.array_len()?;
    let mut topics = BTreeSet::new();
    for _ in 0..count {
        topics.insert(f.string()?);
    }
    let version = f.0.i64()?;
    let timestamp_ms = f.0.i64()?;
    f.tags()?;
    f.0.finish()?;
    Ok(ResolvedRegex {
        topics,
        version,
        timestamp_ms,
    })
}
