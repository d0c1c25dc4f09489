//! The in-tree layouts of `newer_versions`, field by field as Kafka's schemas define them: the
//! requests of ApiVersions v5, OffsetCommit v10 and OffsetFetch v10 (read into kafka-protocol's
//! structs, with what they add in `NewerFields`), and the responses of DescribeLogDirs v5 and
//! DeleteGroups v3 (written from kafka-protocol's structs).

use anyhow::{bail, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiVersionsRequest, DeleteGroupsResponse, DescribeLogDirsResponse, GroupId,
    OffsetCommitRequest, OffsetFetchRequest, RequestKind, ResponseKind,
};

use super::wire::*;
use uuid::Uuid;

/// The fields a request version newer than the codec adds, for the handler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NewerFields {
    /// Nothing beyond what kafka-protocol's struct holds.
    #[default]
    None,
    /// ApiVersions v5: the cluster and node the client believes it is talking to (KIP-1242);
    /// null and -1 when it does not know them.
    ApiVersions {
        cluster_id: Option<String>,
        node_id: i32,
    },
    /// TxnOffsetCommit v6: each topic's id, in the order of the request's topics (whose names
    /// are empty until the handler resolves the ids).
    TxnOffsetCommit { topic_ids: Vec<Uuid> },
    /// WriteTxnMarkers v2: each marker's transaction version (KIP-1228), in order.
    WriteTxnMarkers { transaction_versions: Vec<i8> },
}

/// ApiVersions v5: v4's two software fields, then `ClusterId` and `NodeId`.
pub fn decode_api_versions_v5(body: &mut Bytes) -> Result<(RequestKind, NewerFields)> {
    let name = get_string(body, "ClientSoftwareName")?;
    let software_version = get_string(body, "ClientSoftwareVersion")?;
    let cluster_id = get_compact_string(body)?;
    let node_id = get_i32(body)?;
    skip_tagged_fields(body)?;
    let request = ApiVersionsRequest::default()
        .with_client_software_name(name)
        .with_client_software_version(software_version);
    let fields = NewerFields::ApiVersions {
        cluster_id: cluster_id.map(|c| c.to_string()),
        node_id,
    };
    Ok((RequestKind::ApiVersions(request), fields))
}

/// OffsetCommit v10: v9's fields with each topic's name replaced by its `TopicId` (kafka-protocol
/// 0.18 writes the v10 response but reads requests only up to v9).
pub fn decode_offset_commit_v10(body: &mut Bytes) -> Result<(RequestKind, NewerFields)> {
    let group_id = GroupId(get_string(body, "GroupId")?);
    let generation_id_or_member_epoch = get_i32(body)?;
    let member_id = get_string(body, "MemberId")?;
    let group_instance_id = get_compact_string(body)?;
    // A topic: id (16), partition count (1), tagged fields (1).
    let topic_count = get_array_len(body, 18)?.unwrap_or_default();
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let topic_id = get_uuid(body)?;
        // A partition: index (4), offset (8), epoch (4), metadata (1), tagged fields (1).
        let partition_count = get_array_len(body, 18)?.unwrap_or_default();
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            let partition = OffsetCommitRequestPartition::default()
                .with_partition_index(get_i32(body)?)
                .with_committed_offset(get_i64(body)?)
                .with_committed_leader_epoch(get_i32(body)?)
                .with_committed_metadata(get_compact_string(body)?);
            skip_tagged_fields(body)?;
            partitions.push(partition);
        }
        skip_tagged_fields(body)?;
        topics.push(
            OffsetCommitRequestTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions),
        );
    }
    skip_tagged_fields(body)?;
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id)
        .with_generation_id_or_member_epoch(generation_id_or_member_epoch)
        .with_member_id(member_id)
        .with_group_instance_id(group_instance_id)
        .with_topics(topics);
    Ok((RequestKind::OffsetCommit(request), NewerFields::None))
}

/// OffsetFetch v10: v9's fields with each topic's name replaced by its `TopicId`.
pub fn decode_offset_fetch_v10(body: &mut Bytes) -> Result<(RequestKind, NewerFields)> {
    // A group: id (1), member id (1), member epoch (4), topics (1), tagged fields (1).
    let group_count = get_array_len(body, 8)?.unwrap_or_default();
    let mut groups = Vec::with_capacity(group_count);
    for _ in 0..group_count {
        let group_id = GroupId(get_string(body, "GroupId")?);
        let member_id = get_compact_string(body)?;
        let member_epoch = get_i32(body)?;
        // A topic: id (16), partition count (1), tagged fields (1).
        let topics = match get_array_len(body, 18)? {
            None => None,
            Some(count) => {
                let mut topics = Vec::with_capacity(count);
                for _ in 0..count {
                    let topic_id = get_uuid(body)?;
                    let partition_count = get_array_len(body, 4)?.unwrap_or_default();
                    let partitions = (0..partition_count)
                        .map(|_| get_i32(body))
                        .collect::<Result<Vec<_>>>()?;
                    skip_tagged_fields(body)?;
                    topics.push(
                        OffsetFetchRequestTopics::default()
                            .with_topic_id(topic_id)
                            .with_partition_indexes(partitions),
                    );
                }
                Some(topics)
            }
        };
        skip_tagged_fields(body)?;
        groups.push(
            OffsetFetchRequestGroup::default()
                .with_group_id(group_id)
                .with_member_id(member_id)
                .with_member_epoch(member_epoch)
                .with_topics(topics),
        );
    }
    let require_stable = get_bool(body)?;
    skip_tagged_fields(body)?;
    let request = OffsetFetchRequest::default()
        .with_groups(groups)
        .with_require_stable(require_stable);
    Ok((RequestKind::OffsetFetch(request), NewerFields::None))
}

/// DescribeLogDirs v5: v4's response with `IsCordoned` after each result's `UsableBytes`.
pub fn encode_describe_log_dirs_v5(body: &ResponseKind, buf: &mut BytesMut) -> Result<()> {
    let ResponseKind::DescribeLogDirs(r) = body else {
        bail!("not a DescribeLogDirs response");
    };
    let DescribeLogDirsResponse {
        throttle_time_ms,
        error_code,
        results,
        ..
    } = r;
    buf.put_i32(*throttle_time_ms);
    buf.put_i16(*error_code);
    put_array_len(buf, results.len())?;
    for result in results {
        buf.put_i16(result.error_code);
        put_compact_string(buf, Some(result.log_dir.as_str()))?;
        put_array_len(buf, result.topics.len())?;
        for topic in &result.topics {
            put_compact_string(buf, Some(topic.name.as_str()))?;
            put_array_len(buf, topic.partitions.len())?;
            for p in &topic.partitions {
                buf.put_i32(p.partition_index);
                buf.put_i64(p.partition_size);
                buf.put_i64(p.offset_lag);
                buf.put_u8(u8::from(p.is_future_key));
                put_no_tagged_fields(buf);
            }
            put_no_tagged_fields(buf);
        }
        buf.put_i64(result.total_bytes);
        buf.put_i64(result.usable_bytes);
        // IsCordoned: sluice's one log directory always takes new partitions.
        buf.put_u8(0);
        put_no_tagged_fields(buf);
    }
    put_no_tagged_fields(buf);
    Ok(())
}

/// DeleteGroups v3: v2's response with a nullable `ErrorMessage` after each `ErrorCode`.
pub fn encode_delete_groups_v3(body: &ResponseKind, buf: &mut BytesMut) -> Result<()> {
    let ResponseKind::DeleteGroups(r) = body else {
        bail!("not a DeleteGroups response");
    };
    let DeleteGroupsResponse {
        throttle_time_ms,
        results,
        ..
    } = r;
    buf.put_i32(*throttle_time_ms);
    put_array_len(buf, results.len())?;
    for result in results {
        put_compact_string(buf, Some(result.group_id.as_str()))?;
        buf.put_i16(result.error_code);
        // ErrorMessage: null, as Kafka 4.4 answers for every error a classic group can have.
        put_compact_string(buf, None)?;
        put_no_tagged_fields(buf);
    }
    put_no_tagged_fields(buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
    use kafka_protocol::messages::describe_log_dirs_response::{
        DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use uuid::Uuid;

    #[test]
    fn api_versions_v5_request_reads_cluster_and_node() {
        let mut body = BytesMut::new();
        body.put_slice(&[6, b'j', b'a', b'v', b'a', b'-']);
        body.put_slice(&[2, b'4']);
        body.put_slice(&[3, b'i', b'd']);
        body.put_i32(7);
        // One unknown tagged field of 2 bytes.
        body.put_slice(&[1, 9, 2, 0xaa, 0xbb]);
        let (request, fields) = decode_api_versions_v5(&mut body.freeze()).unwrap();
        let RequestKind::ApiVersions(r) = request else {
            panic!("{request:?}");
        };
        assert_eq!(r.client_software_name.as_str(), "java-");
        assert_eq!(r.client_software_version.as_str(), "4");
        let expected = NewerFields::ApiVersions {
            cluster_id: Some("id".into()),
            node_id: 7,
        };
        assert_eq!(fields, expected);
        // Null cluster id; a tagged field longer than what is left fails; so does a null name.
        let mut null = Bytes::from_static(&[1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0]);
        let (_, fields) = decode_api_versions_v5(&mut null).unwrap();
        let expected = NewerFields::ApiVersions {
            cluster_id: None,
            node_id: -1,
        };
        assert_eq!(fields, expected);
        let mut short = Bytes::from_static(&[1, 1, 0, 0, 0, 0, 1, 1, 0, 200]);
        assert!(decode_api_versions_v5(&mut short).is_err());
        let mut null_name = Bytes::from_static(&[0, 1, 0, 0, 0, 0, 1, 0]);
        assert!(decode_api_versions_v5(&mut null_name).is_err());
    }

    fn uuid_bytes(body: &mut BytesMut, id: Uuid) {
        body.put_u128(id.as_u128());
    }

    #[test]
    fn offset_commit_v10_names_topics_by_id() {
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let mut body = BytesMut::new();
        body.put_slice(&[2, b'g']); // GroupId
        body.put_i32(5); // GenerationIdOrMemberEpoch
        body.put_slice(&[2, b'm']); // MemberId
        body.put_u8(0); // GroupInstanceId: null
        body.put_u8(2); // one topic
        uuid_bytes(&mut body, id);
        body.put_u8(2); // one partition
        body.put_i32(3);
        body.put_i64(42);
        body.put_i32(-1);
        body.put_slice(&[3, b'x', b'y']); // CommittedMetadata
        body.put_slice(&[0, 0, 0]); // tagged fields: partition, topic, request
        let (request, _) = decode_offset_commit_v10(&mut body.clone().freeze()).unwrap();
        let RequestKind::OffsetCommit(r) = request else {
            panic!("{request:?}");
        };
        assert_eq!(r.group_id.as_str(), "g");
        assert_eq!(
            (r.generation_id_or_member_epoch, r.member_id.as_str()),
            (5, "m")
        );
        assert_eq!(r.group_instance_id, None);
        assert_eq!(r.topics.len(), 1);
        assert_eq!(r.topics[0].topic_id, id);
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
        // Every cut of the body fails instead of reading past it.
        for len in 0..body.len() {
            let mut cut = Bytes::copy_from_slice(&body[..len]);
            assert!(decode_offset_commit_v10(&mut cut).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn offset_fetch_v10_names_topics_by_id() {
        let id = Uuid::from_u128(7);
        let mut body = BytesMut::new();
        body.put_u8(3); // two groups
        body.put_slice(&[2, b'a', 0]); // "a", MemberId null
        body.put_i32(-1);
        body.put_u8(2); // one topic
        uuid_bytes(&mut body, id);
        body.put_u8(3); // two partitions
        body.put_i32(0);
        body.put_i32(4);
        body.put_slice(&[0, 0]); // tagged fields: topic, group
        body.put_slice(&[2, b'b', 2, b'm']); // "b", MemberId "m"
        body.put_i32(9);
        body.put_slice(&[0, 0]); // topics: null; tagged fields
        body.put_slice(&[1, 0]); // RequireStable; tagged fields
        let (request, _) = decode_offset_fetch_v10(&mut body.clone().freeze()).unwrap();
        let RequestKind::OffsetFetch(r) = request else {
            panic!("{request:?}");
        };
        assert!(r.require_stable);
        assert_eq!(r.groups.len(), 2);
        let a = &r.groups[0];
        assert_eq!(
            (a.group_id.as_str(), a.member_id.as_deref(), a.member_epoch),
            ("a", None, -1)
        );
        let topics = a.topics.as_ref().unwrap();
        assert_eq!(
            (topics[0].topic_id, topics[0].partition_indexes.clone()),
            (id, vec![0, 4])
        );
        let b = &r.groups[1];
        assert_eq!(
            (b.member_id.as_deref(), b.member_epoch, b.topics.is_none()),
            (Some("m"), 9, true)
        );
        for len in 0..body.len() {
            let mut cut = Bytes::copy_from_slice(&body[..len]);
            assert!(decode_offset_fetch_v10(&mut cut).is_err(), "cut at {len}");
        }
        // A partition count the bytes cannot hold is refused before anything is allocated.
        let mut huge = BytesMut::new();
        huge.put_u8(2);
        huge.put_slice(&[2, b'a', 0]);
        huge.put_i32(-1);
        huge.put_u8(2);
        uuid_bytes(&mut huge, id);
        huge.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(decode_offset_fetch_v10(&mut huge.freeze()).is_err());
    }

    #[test]
    fn describe_log_dirs_v5_is_v4_plus_is_cordoned() {
        let partition = DescribeLogDirsPartition::default()
            .with_partition_index(3)
            .with_partition_size(85);
        let topic = DescribeLogDirsTopic::default()
            .with_name(StrBytes::from_static_str("t").into())
            .with_partitions(vec![partition]);
        let result = DescribeLogDirsResult::default()
            .with_log_dir(StrBytes::from_static_str("/d"))
            .with_topics(vec![topic])
            .with_total_bytes(100)
            .with_usable_bytes(50);
        let response = DescribeLogDirsResponse::default().with_results(vec![result]);
        let mut v4 = BytesMut::new();
        response.encode(&mut v4, 4).unwrap();
        let mut v5 = BytesMut::new();
        encode_describe_log_dirs_v5(&ResponseKind::DescribeLogDirs(response), &mut v5).unwrap();
        // v4's bytes with IsCordoned (false) before the result's tagged fields: the result ends
        // 2 bytes before the response (its tagged fields, then the response's).
        let mut expected = v4.to_vec();
        expected.insert(expected.len() - 2, 0);
        assert_eq!(v5.to_vec(), expected);
    }

    #[test]
    fn delete_groups_v3_is_v2_plus_a_null_error_message() {
        let result = DeletableGroupResult::default()
            .with_group_id(StrBytes::from_static_str("g").into())
            .with_error_code(69);
        let response = DeleteGroupsResponse::default()
            .with_throttle_time_ms(5)
            .with_results(vec![result]);
        let mut v3 = BytesMut::new();
        encode_delete_groups_v3(&ResponseKind::DeleteGroups(response), &mut v3).unwrap();
        // throttle, 1 result: "g", 69, null message, no tags; no tags.
        assert_eq!(&v3[..], &[0, 0, 0, 5, 2, 2, b'g', 0, 69, 0, 0, 0]);
    }
}
