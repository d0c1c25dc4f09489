//! The in-tree layouts of the transaction APIs' newer versions, field by field as Kafka 4.4's
//! schemas define them:
//!
//! - TxnOffsetCommit v6 (KIP-1319) names each topic by `TopicId` instead of by name, in the
//!   request and in the response. The request is read into kafka-protocol's v5 struct with empty
//!   names and the ids, in order, in `NewerFields::TxnOffsetCommit`. kafka-protocol's response
//!   struct has no id field, so a v6 response carries each topic's id in its `name`, written as
//!   the id's text (`Uuid`'s hyphenated form) by the handler and turned back into the id's 16
//!   bytes here.
//! - WriteTxnMarkers v2 (KIP-1228) adds `TransactionVersion` (int8) after each marker's
//!   `CoordinatorEpoch`; its response is v1's. The versions, one per marker in order, are in
//!   `NewerFields::WriteTxnMarkers`.

use anyhow::{bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    GroupId, ProducerId, RequestKind, ResponseKind, TopicName, TransactionalId,
    TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};
use uuid::Uuid;

use super::messages::NewerFields;
use super::wire::*;

/// TxnOffsetCommit v6: v5's fields with each topic's name replaced by its `TopicId`.
pub fn decode_txn_offset_commit_v6(body: &mut Bytes) -> Result<(RequestKind, NewerFields)> {
    let transactional_id = TransactionalId(get_string(body, "TransactionalId")?);
    let group_id = GroupId(get_string(body, "GroupId")?);
    let producer_id = ProducerId(get_i64(body)?);
    let producer_epoch = get_i16(body)?;
    let generation_id = get_i32(body)?;
    let member_id = get_string(body, "MemberId")?;
    let group_instance_id = get_compact_string(body)?;
    // A topic: id (16), partition count (1), tagged fields (1).
    let topic_count = get_array_len(body, 18)?.unwrap_or_default();
    let mut topics = Vec::with_capacity(topic_count);
    let mut topic_ids = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        topic_ids.push(get_uuid(body)?);
        // A partition: index (4), offset (8), epoch (4), metadata (1), tagged fields (1).
        let partition_count = get_array_len(body, 18)?.unwrap_or_default();
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            let partition = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(get_i32(body)?)
                .with_committed_offset(get_i64(body)?)
                .with_committed_leader_epoch(get_i32(body)?)
                .with_committed_metadata(get_compact_string(body)?);
            skip_tagged_fields(body)?;
            partitions.push(partition);
        }
        skip_tagged_fields(body)?;
        topics.push(TxnOffsetCommitRequestTopic::default().with_partitions(partitions));
    }
    skip_tagged_fields(body)?;
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(transactional_id)
        .with_group_id(group_id)
        .with_producer_id(producer_id)
        .with_producer_epoch(producer_epoch)
        .with_generation_id(generation_id)
        .with_member_id(member_id)
        .with_group_instance_id(group_instance_id)
        .with_topics(topics);
    let fields = NewerFields::TxnOffsetCommit { topic_ids };
    Ok((RequestKind::TxnOffsetCommit(request), fields))
}

/// TxnOffsetCommit v6's response: v5's with each topic's `TopicId` (carried in `name` as
/// text, see above) in place of its name.
pub fn encode_txn_offset_commit_v6(body: &ResponseKind, buf: &mut BytesMut) -> Result<()> {
    let ResponseKind::TxnOffsetCommit(r) = body else {
        bail!("not a TxnOffsetCommit response");
    };
    buf.put_i32(r.throttle_time_ms);
    put_array_len(buf, r.topics.len())?;
    for topic in &r.topics {
        let id = Uuid::parse_str(topic.name.as_str())
            .with_context(|| format!("v6 topic {:?} is not a topic id", topic.name.as_str()))?;
        buf.put_u128(id.as_u128());
        put_array_len(buf, topic.partitions.len())?;
        for p in &topic.partitions {
            buf.put_i32(p.partition_index);
            buf.put_i16(p.error_code);
            put_no_tagged_fields(buf);
        }
        put_no_tagged_fields(buf);
    }
    put_no_tagged_fields(buf);
    Ok(())
}

/// The text a v6 response's topic carries its id as, in `name`.
pub fn topic_id_as_name(id: Uuid) -> TopicName {
    TopicName(kafka_protocol::protocol::StrBytes::from_string(
        id.hyphenated().to_string(),
    ))
}

/// WriteTxnMarkers v2: v1's fields with `TransactionVersion` after each `CoordinatorEpoch`.
pub fn decode_write_txn_markers_v2(body: &mut Bytes) -> Result<(RequestKind, NewerFields)> {
    // A marker: id (8), epoch (2), result (1), topics (1), coordinator epoch (4), version (1),
    // tagged fields (1).
    let marker_count = get_array_len(body, 18)?.unwrap_or_default();
    let mut markers = Vec::with_capacity(marker_count);
    let mut transaction_versions = Vec::with_capacity(marker_count);
    for _ in 0..marker_count {
        let producer_id = ProducerId(get_i64(body)?);
        let producer_epoch = get_i16(body)?;
        let transaction_result = get_bool(body)?;
        // A topic: name (1), partition count (1), tagged fields (1).
        let topic_count = get_array_len(body, 3)?.unwrap_or_default();
        let mut topics = Vec::with_capacity(topic_count);
        for _ in 0..topic_count {
            let name = TopicName(get_string(body, "Name")?);
            let count = get_array_len(body, 4)?.unwrap_or_default();
            let partition_indexes = (0..count)
                .map(|_| get_i32(body))
                .collect::<Result<Vec<_>>>()?;
            skip_tagged_fields(body)?;
            topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(name)
                    .with_partition_indexes(partition_indexes),
            );
        }
        let coordinator_epoch = get_i32(body)?;
        transaction_versions.push(get_i8(body)?);
        skip_tagged_fields(body)?;
        markers.push(
            WritableTxnMarker::default()
                .with_producer_id(producer_id)
                .with_producer_epoch(producer_epoch)
                .with_transaction_result(transaction_result)
                .with_topics(topics)
                .with_coordinator_epoch(coordinator_epoch),
        );
    }
    skip_tagged_fields(body)?;
    let request = WriteTxnMarkersRequest::default().with_markers(markers);
    let fields = NewerFields::WriteTxnMarkers {
        transaction_versions,
    };
    Ok((RequestKind::WriteTxnMarkers(request), fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::TxnOffsetCommitResponse;

    #[test]
    fn txn_offset_commit_v6_names_topics_by_id() {
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let mut body = BytesMut::new();
        body.put_slice(&[3, b't', b'x']); // TransactionalId
        body.put_slice(&[2, b'g']); // GroupId
        body.put_i64(7); // ProducerId
        body.put_i16(2); // ProducerEpoch
        body.put_i32(5); // GenerationIdOrMemberEpoch
        body.put_slice(&[2, b'm']); // MemberId
        body.put_u8(0); // GroupInstanceId: null
        body.put_u8(2); // one topic
        body.put_u128(id.as_u128());
        body.put_u8(2); // one partition
        body.put_i32(3);
        body.put_i64(42);
        body.put_i32(-1);
        body.put_slice(&[3, b'x', b'y']); // CommittedMetadata
        body.put_slice(&[0, 0, 0]); // tagged fields: partition, topic, request
        let (request, fields) = decode_txn_offset_commit_v6(&mut body.clone().freeze()).unwrap();
        let RequestKind::TxnOffsetCommit(r) = request else {
            panic!("{request:?}");
        };
        assert_eq!(
            (r.transactional_id.as_str(), r.group_id.as_str()),
            ("tx", "g")
        );
        assert_eq!(
            (r.producer_id.0, r.producer_epoch, r.generation_id),
            (7, 2, 5)
        );
        assert_eq!((r.member_id.as_str(), r.group_instance_id), ("m", None));
        assert_eq!(
            fields,
            NewerFields::TxnOffsetCommit {
                topic_ids: vec![id]
            }
        );
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            (
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch
            ),
            (3, 42, -1)
        );
        assert_eq!(p.committed_metadata.as_deref(), Some("xy"));
        for len in 0..body.len() {
            let mut cut = Bytes::copy_from_slice(&body[..len]);
            assert!(
                decode_txn_offset_commit_v6(&mut cut).is_err(),
                "cut at {len}"
            );
        }
    }

    #[test]
    fn txn_offset_commit_v6_response_writes_the_ids() {
        let id = Uuid::from_u128(9);
        let topic = TxnOffsetCommitResponseTopic::default()
            .with_name(topic_id_as_name(id))
            .with_partitions(vec![TxnOffsetCommitResponsePartition::default()
                .with_partition_index(1)
                .with_error_code(100)]);
        let response = TxnOffsetCommitResponse::default()
            .with_throttle_time_ms(4)
            .with_topics(vec![topic]);
        let mut buf = BytesMut::new();
        encode_txn_offset_commit_v6(&ResponseKind::TxnOffsetCommit(response.clone()), &mut buf)
            .unwrap();
        let mut expected = vec![0, 0, 0, 4, 2];
        expected.extend_from_slice(&9u128.to_be_bytes());
        expected.extend_from_slice(&[2, 0, 0, 0, 1, 0, 100, 0, 0, 0]);
        assert_eq!(buf.to_vec(), expected);
        // A name that is not an id cannot be written at v6.
        let mut named = response;
        named.topics[0].name = TopicName("orders".to_string().into());
        let mut buf = BytesMut::new();
        assert!(
            encode_txn_offset_commit_v6(&ResponseKind::TxnOffsetCommit(named), &mut buf).is_err()
        );
    }

    #[test]
    fn write_txn_markers_v2_reads_each_markers_transaction_version() {
        let mut body = BytesMut::new();
        body.put_u8(3); // two markers
        for (producer_id, version) in [(11i64, 2u8), (12, 0)] {
            body.put_i64(producer_id);
            body.put_i16(4);
            body.put_u8(1); // commit
            body.put_u8(2); // one topic
            body.put_slice(&[2, b't', 3]); // "t", two partitions
            body.put_i32(0);
            body.put_i32(5);
            body.put_u8(0); // topic tagged fields
            body.put_i32(8); // CoordinatorEpoch
            body.put_u8(version);
            body.put_u8(0); // marker tagged fields
        }
        body.put_u8(0);
        let (request, fields) = decode_write_txn_markers_v2(&mut body.clone().freeze()).unwrap();
        let RequestKind::WriteTxnMarkers(r) = request else {
            panic!("{request:?}");
        };
        assert_eq!(r.markers.len(), 2);
        let m = &r.markers[1];
        assert_eq!(
            (m.producer_id.0, m.producer_epoch, m.transaction_result),
            (12, 4, true)
        );
        assert_eq!(m.coordinator_epoch, 8);
        assert_eq!(m.topics[0].name.as_str(), "t");
        assert_eq!(m.topics[0].partition_indexes, vec![0, 5]);
        let expected = NewerFields::WriteTxnMarkers {
            transaction_versions: vec![2, 0],
        };
        assert_eq!(fields, expected);
        for len in 0..body.len() {
            let mut cut = Bytes::copy_from_slice(&body[..len]);
            assert!(
                decode_write_txn_markers_v2(&mut cut).is_err(),
                "cut at {len}"
            );
        }
    }
}
