//! Fetch responses framed as a list of chunks, so that record bytes are never copied into an
//! encode buffer: every field but the records is encoded into one small buffer, and each
//! partition's records stay a separate chunk (a segment file range, or bytes already in memory)
//! that the connection writes in place.
//!
//! kafka-protocol encodes every field. Each struct on the way down (the response, a topic, a
//! partition) is encoded with its last field, the collection below it or the records, left
//! empty; that empty field and the struct's tagged-field count, which follow it, are cut off and
//! written here with the real length after the chunks they frame. The result is byte for byte
//! what `encode_response` writes with the records inline (see the tests).

use crate::disk::File;
use std::sync::Arc;

use anyhow::{ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// One piece of a response frame, written in order.
#[derive(Clone, Debug)]
pub enum Chunk {
    /// Bytes in memory.
    Bytes(Bytes),
    /// `len` bytes at `position` of a file, sent from the page cache without a user-space copy.
    File {
        file: Arc<File>,
        position: u64,
        len: usize,
    },
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(bytes) => bytes.len(),
            Chunk::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A whole response, size prefix included, as chunks.
#[derive(Clone, Debug)]
pub struct ResponseFrame {
    pub chunks: Vec<Chunk>,
}

impl ResponseFrame {
    /// Size prefix and body, in bytes.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Chunk::is_empty)
    }
}

/// Frames a Fetch response (versions 4–18). `records` holds each partition's records in the
/// order of `response`'s topics and partitions; those partitions' own `records` are ignored.
/// Tagged fields other than the empty defaults are refused (sluice sets none).
pub fn encode_fetch_response(
    correlation_id: i32,
    version: i16,
    mut response: FetchResponse,
    records: Vec<Chunk>,
) -> anyhow::Result<ResponseFrame> {
    let flexible = version >= 12;
    ensure!(
        response.unknown_tagged_fields.is_empty() && response.node_endpoints.is_empty(),
        "fetch response with tagged fields"
    );
    let topics = std::mem::take(&mut response.responses);
    let mut head = BytesMut::with_capacity(64 + 64 * records.len());
    head.put_i32(0); // the size, known at the end
    let header_version = FetchResponse::header_version(version);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut head, header_version)?;
    encode_head(&mut head, &response, version, flexible)?;
    put_length(&mut head, topics.len(), flexible)?;
    // Where each records chunk goes: (position in `head`, chunk).
    let mut cuts = Vec::with_capacity(records.len());
    let mut records = records.into_iter();
    for mut topic in topics {
        ensure!(
            topic.unknown_tagged_fields.is_empty(),
            "fetch topic with tagged fields"
        );
        let partitions = std::mem::take(&mut topic.partitions);
        encode_head(&mut head, &topic, version, flexible)?;
        put_length(&mut head, partitions.len(), flexible)?;
        for mut partition in partitions {
            ensure!(
                has_no_tagged_fields(&partition),
                "fetch partition with tagged fields"
            );
            let chunk = records.next().context("fewer records than partitions")?;
            partition.records = Some(Bytes::new());
            encode_head(&mut head, &partition, version, flexible)?;
            put_length(&mut head, chunk.len(), flexible)?;
            if !chunk.is_empty() {
                cuts.push((head.len(), chunk));
            }
            put_no_tagged_fields(&mut head, flexible);
        }
        put_no_tagged_fields(&mut head, flexible);
    }
    ensure!(records.next().is_none(), "more records than partitions");
    put_no_tagged_fields(&mut head, flexible);

    let total = head.len() + cuts.iter().map(|(_, chunk)| chunk.len()).sum::<usize>();
    let size = i32::try_from(total - 4).context("fetch response larger than 2 GiB")?;
    head[..4].copy_from_slice(&size.to_be_bytes());
    let head = head.freeze();
    let mut chunks = Vec::with_capacity(2 * cuts.len() + 1);
    let mut at = 0;
    for (cut, chunk) in cuts {
        chunks.push(Chunk::Bytes(head.slice(at..cut)));
        chunks.push(chunk);
        at = cut;
    }
    chunks.push(Chunk::Bytes(head.slice(at..)));
    Ok(ResponseFrame { chunks })
}

/// Encodes `value`, whose last field (before its tagged fields) is an empty collection, without
/// that field and without the tagged-field count after it: the caller writes both. With no
/// tagged fields set, the cut-off tail is an empty array or byte string, i32 0 or compact 0 + 1,
/// then in flexible versions a zero tagged-field count; anything else is refused.
fn encode_head<T: Encodable>(
    buf: &mut BytesMut,
    value: &T,
    version: i16,
    flexible: bool,
) -> anyhow::Result<()> {
    let tail: &[u8] = if flexible { &[1, 0] } else { &[0, 0, 0, 0] };
    let start = buf.len();
    value.encode(buf, version)?;
    ensure!(
        buf.len() - start >= tail.len() && buf.ends_with(tail),
        "unexpected encoding of an empty trailing field"
    );
    buf.truncate(buf.len() - tail.len());
    Ok(())
}

fn has_no_tagged_fields(partition: &PartitionData) -> bool {
    partition.unknown_tagged_fields.is_empty()
        && partition.diverging_epoch == Default::default()
        && partition.current_leader == Default::default()
        && partition.snapshot_id == Default::default()
}

/// The length of an array or a non-null byte string: i32, or in flexible versions an unsigned
/// varint of length + 1.
fn put_length(buf: &mut BytesMut, len: usize, flexible: bool) -> anyhow::Result<()> {
    if flexible {
        let mut n = u32::try_from(len)?
            .checked_add(1)
            .context("length overflows")?;
        while n >= 0x80 {
            buf.put_u8((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        buf.put_u8(n as u8);
    } else {
        buf.put_i32(i32::try_from(len)?);
    }
    Ok(())
}

fn put_no_tagged_fields(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        buf.put_u8(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    fn response(records: &[&[u8]]) -> FetchResponse {
        let mut records = records.iter();
        let topics = (0..2)
            .map(|t| {
                let partitions = (0..3)
                    .map(|p| {
                        let bytes = records.next().unwrap();
                        PartitionData::default()
                            .with_partition_index(p)
                            .with_error_code(if p == 2 { 3 } else { 0 })
                            .with_high_watermark(1000 + p as i64)
                            .with_last_stable_offset(1000 + p as i64)
                            .with_log_start_offset(7)
                            .with_records(Some(Bytes::copy_from_slice(bytes)))
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(format!("topic-{t}"))))
                    .with_topic_id(uuid::Uuid::from_u128(t as u128 + 1))
                    .with_partitions(partitions)
            })
            .collect();
        FetchResponse::default()
            .with_throttle_time_ms(5)
            .with_responses(topics)
    }

    fn flatten(frame: &ResponseFrame) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in &frame.chunks {
            match chunk {
                Chunk::Bytes(bytes) => out.extend_from_slice(bytes),
                Chunk::File { .. } => unreachable!("no files here"),
            }
        }
        out
    }

    #[test]
    fn chunks_are_byte_for_byte_what_kafka_protocol_encodes() {
        // 200 bytes makes the compact length two bytes long.
        let big = vec![0xabu8; 200];
        let small = [1u8, 2, 3];
        let records: [&[u8]; 6] = [&big, &[], &[], &small, &big, &[]];
        for version in 4..=18 {
            let inline = crate::protocol::encode_response(42, version, &response(&records))
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
            let chunks = records
                .iter()
                .map(|r| Chunk::Bytes(Bytes::copy_from_slice(r)))
                .collect();
            let frame = encode_fetch_response(42, version, response(&records), chunks)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
            assert_eq!(flatten(&frame), inline.to_vec(), "Fetch v{version}");
            assert_eq!(frame.len(), inline.len());
        }
    }

    #[test]
    fn empty_responses_and_mismatched_records() {
        for version in [4, 11, 12, 18] {
            let inline =
                crate::protocol::encode_response(1, version, &FetchResponse::default()).unwrap();
            let frame =
                encode_fetch_response(1, version, FetchResponse::default(), vec![]).unwrap();
            assert_eq!(flatten(&frame), inline.to_vec(), "v{version}");
            let one: [&[u8]; 6] = [&[]; 6];
            assert!(encode_fetch_response(1, version, response(&one), vec![]).is_err());
        }
    }
}
