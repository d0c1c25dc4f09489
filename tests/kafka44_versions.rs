//! The versions Kafka 4.4 serves beyond sluice's earlier maxima, over a socket: ListOffsets v10
//! and v11, OffsetCommit and OffsetFetch v10 (topic ids), ApiVersions v5, DescribeLogDirs v5 and
//! DeleteGroups v3. kafka-protocol encodes some of them (ListOffsets v10, OffsetCommit and
//! OffsetFetch v10); for the others these tests write and read the bytes of Kafka's published
//! schemas themselves. Every expected answer is the one Apache Kafka 4.4.0 gave to the same raw
//! request (`compat-tests/python/test_wire_versions.py` asserts the same against both brokers).

mod common;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::data::{create_topic, produce, topic_name};
use common::groups::form_group;
use common::offsets_v10::{call_raw, call_v10, commit_v10, compact, fetch_v10};
use common::{batch, Client, TestBroker};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::Compression;
use uuid::Uuid;

fn encoded<R: Encodable>(body: &R, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

async fn topic_id(client: &mut Client, topic: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
    ]));
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    response.topics[0].topic_id
}

fn list_offsets_request(timestamp: i64) -> ListOffsetsRequest {
    let partitions = |indexes: &[i32]| {
        indexes
            .iter()
            .map(|i| {
                ListOffsetsPartition::default()
                    .with_partition_index(*i)
                    .with_timestamp(timestamp)
            })
            .collect()
    };
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_timeout_ms(1000)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name("lo"))
                .with_partitions(partitions(&[0, 1])),
            ListOffsetsTopic::default()
                .with_name(topic_name("nope"))
                .with_partitions(partitions(&[0])),
        ])
}

/// (partition or -1 for the unknown topic, error, timestamp, offset, leader epoch) per answer.
fn list_offsets_answers(response: &ListOffsetsResponse) -> Vec<(i32, i16, i64, i64, i32)> {
    let mut out: Vec<_> = response
        .topics
        .iter()
        .flat_map(|t| {
            let known = t.name.as_str() == "lo";
            t.partitions.iter().map(move |p| {
                let index = if known { p.partition_index } else { -1 };
                (index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
            })
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_v10_and_v11_answer_as_kafka_4_4() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "lo", 2).await;
    let records = batch(3, Compression::None, 1_700_000_000_000);
    assert_eq!(
        produce(&mut client, 9, "lo", 0, records).await.error_code,
        0
    );

    for version in [9, 10, 11] {
        for timestamp in [-1, -2, -3, -4, -5, -6, -7, 0] {
            let request = list_offsets_request(timestamp);
            // v11's bytes are v10's: kafka-protocol writes v10, the header says v11.
            let layout = version.min(10);
            let mut body = call_raw(
                &mut client,
                ApiKey::ListOffsets,
                version,
                &encoded(&request, layout),
            )
            .await
            .expect("an answer");
            let response = ListOffsetsResponse::decode(&mut body, layout).unwrap();
            assert!(!body.has_remaining());
            // Kafka 4.4.0's answers: partition 0 holds 3 records, partition 1 none.
            let expected: Vec<(i32, i16, i64, i64, i32)> = match timestamp {
                -6 if version < 11 => vec![
                    (-1, 35, -1, -1, -1),
                    (0, 35, -1, -1, -1),
                    (1, 35, -1, -1, -1),
                ],
                -7 => vec![
                    (-1, 35, -1, -1, -1),
                    (0, 35, -1, -1, -1),
                    (1, 35, -1, -1, -1),
                ],
                -1 => vec![(-1, 3, -1, -1, -1), (0, 0, -1, 3, 0), (1, 0, -1, 0, 0)],
                -2 | -4 => vec![(-1, 3, -1, -1, -1), (0, 0, -1, 0, 0), (1, 0, -1, 0, 0)],
                // The records' timestamps are T, T+1, T+2: the largest is the third's.
                -3 => vec![
                    (-1, 3, -1, -1, -1),
                    (0, 0, 1_700_000_000_002, 2, 0),
                    (1, 0, -1, -1, -1),
                ],
                0 => vec![
                    (-1, 3, -1, -1, -1),
                    (0, 0, 1_700_000_000_000, 0, 0),
                    (1, 0, -1, -1, -1),
                ],
                // -5 (latest tiered) and, from v11, -6 (earliest pending upload): nothing is
                // tiered, so no offset.
                _ => vec![(-1, 3, -1, -1, -1), (0, 0, -1, -1, -1), (1, 0, -1, -1, -1)],
            };
            assert_eq!(
                list_offsets_answers(&response),
                expected,
                "ListOffsets v{version} timestamp {timestamp}"
            );
        }
    }
}

fn api_versions_v5(name: &str, cluster_id: Option<&str>, node_id: i32) -> Bytes {
    let mut body = BytesMut::new();
    compact(&mut body, Some(name));
    compact(&mut body, Some("4.4.0"));
    compact(&mut body, cluster_id);
    body.put_i32(node_id);
    body.put_u8(0);
    body.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_v5_checks_the_cluster_and_node_as_kafka_4_4() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let cluster: DescribeClusterResponse = client
        .call(
            ApiKey::DescribeCluster,
            0,
            &DescribeClusterRequest::default(),
        )
        .await;
    let cluster_id = cluster.cluster_id.to_string();
    let other = "G71osem_SLSX-dnOv3M3Sw";

    let cases: [(&str, Option<&str>, i32, i16); 8] = [
        ("java", None, -1, 0),
        ("java", Some(&cluster_id), 1, 0),
        ("java", Some(&cluster_id), 7, 129),
        ("java", Some(other), 1, 129),
        ("java", Some(&cluster_id), -1, 42),
        ("java", Some(""), -1, 42),
        ("java", None, 1, 42),
        // Invalid software names are refused before the cluster is looked at.
        ("-bad", Some(other), 1, 42),
    ];
    for (name, cluster_id, node_id, error) in cases {
        let body = api_versions_v5(name, cluster_id, node_id);
        let mut response = call_raw(&mut client, ApiKey::ApiVersions, 5, &body)
            .await
            .expect("an answer, and the connection stays open");
        // v5's response is v4's.
        let response = ApiVersionsResponse::decode(&mut response, 4).unwrap();
        let case = format!("{name} {cluster_id:?} {node_id}");
        assert_eq!(response.error_code, error, "{case}");
        // Kafka lists the APIs only in a successful answer.
        assert_eq!(response.api_keys.is_empty(), error != 0, "{case}");
        if error == 0 {
            let own = response.api_keys.iter().find(|k| k.api_key == 18).unwrap();
            assert_eq!((own.min_version, own.max_version), (0, 5));
        }
    }
    // At v4 too, invalid software names get the error and no API list.
    let request = ApiVersionsRequest::default()
        .with_client_software_name("-bad".into())
        .with_client_software_version("1".into());
    let response: ApiVersionsResponse = client.call(ApiKey::ApiVersions, 4, &request).await;
    assert_eq!((response.error_code, response.api_keys.len()), (42, 0));

    // A v5 body cut short is unparsable: the connection is closed, as Kafka closes it.
    let body = api_versions_v5("java", Some(&cluster_id), 1);
    let cut = &body[..body.len() - 3];
    assert!(call_raw(&mut client, ApiKey::ApiVersions, 5, cut)
        .await
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_log_dirs_v5_adds_is_cordoned_false() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "dirs", 2).await;
    let request = DescribeLogDirsRequest::default().with_topics(None);
    // v5's request is v4's.
    let mut body = call_raw(
        &mut client,
        ApiKey::DescribeLogDirs,
        5,
        &encoded(&request, 4),
    )
    .await
    .expect("an answer")
    .to_vec();
    // One log directory: its IsCordoned (false) precedes the result's tagged fields and the
    // response's, the last two bytes. Without it the bytes are v4's.
    let len = body.len();
    assert_eq!(&body[len - 3..], &[0, 0, 0]);
    body.remove(len - 3);
    let response = DescribeLogDirsResponse::decode(&mut Bytes::from(body), 4).unwrap();
    assert_eq!((response.error_code, response.results.len()), (0, 1));
    let result = &response.results[0];
    assert_eq!(result.error_code, 0);
    assert!(result.total_bytes > 0 && result.usable_bytes > 0);
    let topic = result
        .topics
        .iter()
        .find(|t| t.name.as_str() == "dirs")
        .unwrap();
    let mut partitions: Vec<i32> = topic.partitions.iter().map(|p| p.partition_index).collect();
    partitions.sort();
    assert_eq!(partitions, vec![0, 1]);
}

/// DeleteGroups v3's response: (group id, error code, error message) per result.
fn delete_groups_v3(mut body: Bytes) -> Vec<(String, i16, Option<String>)> {
    let compact_string = |body: &mut Bytes| -> Option<String> {
        let len = body.get_u8() as usize;
        (len > 0).then(|| String::from_utf8(body.split_to(len - 1).to_vec()).unwrap())
    };
    let _throttle_time_ms = body.get_i32();
    let count = body.get_u8() as usize - 1;
    let mut results: Vec<_> = (0..count)
        .map(|_| {
            let group_id = compact_string(&mut body).unwrap();
            let error = body.get_i16();
            let message = compact_string(&mut body);
            assert_eq!(body.get_u8(), 0, "no tagged fields");
            (group_id, error, message)
        })
        .collect();
    assert_eq!(body.get_u8(), 0, "no tagged fields");
    assert!(!body.has_remaining());
    results.sort();
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_groups_v3_answers_a_null_error_message() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    // "committed": an Empty group with an offset; "active": a member; "never": no such group.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("committed")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default().with_committed_offset(1)
            ])]);
    let committed: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 9, &commit).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    form_group(&mut client, "active").await;

    let names = ["committed", "never", "", "active", "committed"];
    let request = DeleteGroupsRequest::default().with_groups_names(
        names
            .iter()
            .map(|n| GroupId(StrBytes::from_static_str(n)))
            .collect(),
    );
    // v3's request is v2's.
    let body = call_raw(&mut client, ApiKey::DeleteGroups, 3, &encoded(&request, 2))
        .await
        .expect("an answer");
    // A group named twice is answered once, as Kafka does; the empty id is no group.
    let expected = vec![
        (String::new(), 69, None),
        ("active".to_string(), 68, None),
        ("committed".to_string(), 0, None),
        ("never".to_string(), 69, None),
    ];
    assert_eq!(delete_groups_v3(body), expected);
}

/// (topic id, partition, offset, metadata, error) of each partition of the one group answered.
fn fetched(response: &OffsetFetchResponse) -> Vec<(Uuid, i32, i64, String, i16)> {
    assert_eq!(response.groups.len(), 1);
    assert_eq!(response.groups[0].error_code, 0);
    let mut out: Vec<_> = response.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let metadata = p.metadata.as_deref().unwrap_or("<null>").to_string();
                (
                    t.topic_id,
                    p.partition_index,
                    p.committed_offset,
                    metadata,
                    p.error_code,
                )
            })
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commit_and_fetch_v10_name_topics_by_id() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "byid", 2).await;
    let id = topic_id(&mut client, "byid").await;
    let unknown = Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
    let zero = Uuid::nil();

    // Kafka 4.4.0: partition 0 stored; partition 5 does not exist (3); ids that name no topic,
    // the zero id too, UNKNOWN_TOPIC_ID (100).
    let request = commit_v10("g10", &[(id, &[0, 5]), (unknown, &[0]), (zero, &[0])]);
    let response: OffsetCommitResponse =
        call_v10(&mut client, ApiKey::OffsetCommit, &request).await;
    let mut answers: Vec<(Uuid, i32, i16)> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_id, p.partition_index, p.error_code))
        })
        .collect();
    answers.sort();
    let mut expected = vec![(id, 0, 0), (id, 5, 3), (unknown, 0, 100), (zero, 0, 100)];
    expected.sort();
    assert_eq!(answers, expected);

    // By id: the commit, no commit (-1, empty metadata), and unknown ids per partition.
    let request = fetch_v10(
        "g10",
        Some(&[(id, &[0, 1, 7]), (unknown, &[0]), (zero, &[0])]),
    );
    let response: OffsetFetchResponse = call_v10(&mut client, ApiKey::OffsetFetch, &request).await;
    let mut expected = vec![
        (id, 0, 2, "m".to_string(), 0),
        (id, 1, -1, String::new(), 0),
        (id, 7, -1, String::new(), 0),
        (unknown, 0, -1, String::new(), 100),
        (zero, 0, -1, String::new(), 100),
    ];
    expected.sort();
    assert_eq!(fetched(&response), expected);

    // Everything the group committed, by id; and the same commit by name at v9.
    let response: OffsetFetchResponse =
        call_v10(&mut client, ApiKey::OffsetFetch, &fetch_v10("g10", None)).await;
    assert_eq!(fetched(&response), vec![(id, 0, 2, "m".to_string(), 0)]);
    let by_name =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g10")))
            .with_topics(None)]);
    let response: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 9, &by_name).await;
    let topics = &response.groups[0].topics;
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].name.as_str(), "byid");
    assert_eq!(topics[0].partitions[0].committed_offset, 2);

    // A group that committed nothing: no offsets, no error.
    let request = fetch_v10("nothing", Some(&[(id, &[0])]));
    let response: OffsetFetchResponse = call_v10(&mut client, ApiKey::OffsetFetch, &request).await;
    assert_eq!(fetched(&response), vec![(id, 0, -1, String::new(), 0)]);

    // A commit by name to a partition the topic lacks fails at v9 as well, as on Kafka 4.4.
    let partition = |index| {
        OffsetCommitRequestPartition::default()
            .with_partition_index(index)
            .with_committed_offset(2)
    };
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g9")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("byid"))
            .with_partitions(vec![partition(1), partition(5)])]);
    let response: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 9, &request).await;
    let mut codes: Vec<(i32, i16)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    codes.sort();
    assert_eq!(codes, vec![(1, 0), (5, 3)]);
}
