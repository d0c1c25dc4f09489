//! Hostile and broken input: each connection gets Kafka's answer (usually a closed socket), the
//! process survives, other connections keep being served, and stored data is untouched.

mod common;

use common::data::{create_topic, fetch_all_offsets, produce, produce_request};
use common::groups::{self, join_request};
use common::{batch, now_ms, Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use tokio::io::AsyncWriteExt;

#[global_allocator]
static ALLOCATOR: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

async fn assert_still_serving(broker: &TestBroker) {
    let mut client = broker.client().await;
    let response: ApiVersionsResponse = client
        .call(
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default()
                .with_client_software_name("x".into())
                .with_client_software_version("1".into()),
        )
        .await;
    assert_eq!(response.error_code, 0);
}

/// Records stored before the bad input: topic "kept", offsets 0..20 on partition 0 (an
/// uncompressed and a zstd batch) and 0..5 on partition 1 (gzip).
async fn store_records(broker: &TestBroker) {
    let mut client = broker.client().await;
    create_topic(&mut client, "kept", 2).await;
    for (partition, count, codec) in [
        (0, 10, Compression::None),
        (0, 10, Compression::Zstd),
        (1, 5, Compression::Gzip),
    ] {
        let stored = produce(
            &mut client,
            9,
            "kept",
            partition,
            batch(count, codec, now_ms()),
        )
        .await;
        assert_eq!(stored.error_code, 0);
    }
}

/// Every record stored by `store_records` is still fetchable, and nothing was added.
async fn assert_nothing_lost(broker: &TestBroker, what: &str) {
    let mut client = broker.client().await;
    let offsets = fetch_all_offsets(&mut client, "kept", 0).await;
    assert_eq!(offsets, (0..20).collect::<Vec<_>>(), "after {what}");
    let offsets = fetch_all_offsets(&mut client, "kept", 1).await;
    assert_eq!(offsets, (0..5).collect::<Vec<_>>(), "after {what}");
}

/// The bad input closes its connection, the broker serves others, and stored data is intact.
async fn assert_closes(broker: &TestBroker, bytes: &[u8], what: &str) {
    let mut client = Client::connect(broker.addr()).await;
    client.send_raw(bytes).await;
    assert!(
        client.is_closed().await,
        "{what}: connection should be closed"
    );
    assert_still_serving(broker).await;
    assert_nothing_lost(broker, what).await;
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_only_their_connection() {
    let broker = TestBroker::start(&[("socket.request.max.bytes", "1048576")]).await;
    store_records(&broker).await;
    assert_closes(&broker, &[0x7f, 0xff, 0xff, 0xff], "oversized frame").await;
    assert_closes(&broker, &[0xff, 0xff, 0xff, 0xf0], "negative size").await;
    assert_closes(&broker, &framed(&[1, 2, 3]), "frame shorter than a header").await;
    assert_closes(
        &broker,
        &framed(&[0x12, 0x34, 0, 0, 0, 0, 0, 1, 0xff, 0xff]),
        "unknown api key",
    )
    .await;
    assert_closes(
        &broker,
        &framed(&[0, 0, 0, 2, 0, 0, 0, 1, 0xff, 0xff, 0, 1]),
        "produce v2",
    )
    .await;
    assert_closes(
        &broker,
        &framed(&[0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff]),
        "metadata v99",
    )
    .await;
    assert_closes(
        &broker,
        &framed(&[0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0x05]),
        "truncated metadata body",
    )
    .await;
    let garbage: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    assert_closes(&broker, &framed(&garbage), "garbage").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_announced_array_lengths_do_not_abort_the_broker() {
    let broker = TestBroker::start(&[]).await;
    store_records(&broker).await;
    // Metadata v4: header (key 3, v4, correlation 1, client id null), then topics count 2^31-1.
    let mut body = vec![0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff];
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    assert_closes(&broker, &framed(&body), "metadata with 2^31-1 topics").await;
    // Flexible Metadata v12: compact array with a count near u32::MAX.
    let mut body = vec![0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0x00];
    body.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
    assert_closes(&broker, &framed(&body), "compact array of 2^32-2").await;
    // Produce v9 (flexible): topic_data compact array near u32::MAX.
    let mut body = vec![
        0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff, 0, 0, 0x13, 0x88,
    ];
    body.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
    assert_closes(&broker, &framed(&body), "produce with a huge topic count").await;
}

/// Produce requests that never arrive whole: a frame larger than `socket.request.max.bytes`,
/// and a frame cut off mid-batch by the client closing its connection. Neither appends
/// anything, and what was stored before is all still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_truncated_produces_store_nothing() {
    let broker = TestBroker::start(&[("socket.request.max.bytes", "1048576")]).await;
    store_records(&broker).await;
    let mut client = broker.client().await;

    let oversized = produce_request(-1, "kept", 0, batch(60_000, Compression::None, now_ms()));
    let (_, frame) = client.frame(ApiKey::Produce, 9, &oversized);
    assert!(frame.len() > 1_048_576 + 4);
    // The broker closes after reading the size, so the rest of the write may fail.
    let sent = client.try_send_raw(&frame).await;
    assert!(
        sent.is_err() || client.is_closed().await,
        "oversized produce: connection should be closed"
    );
    assert_nothing_lost(&broker, "an oversized produce").await;

    for cut in [4, 30, 100] {
        let mut client = broker.client().await;
        let request = produce_request(-1, "kept", 1, batch(10, Compression::None, now_ms()));
        let (_, frame) = client.frame(ApiKey::Produce, 9, &request);
        client.send_raw(&frame[..frame.len() - cut]).await;
        client.stream.shutdown().await.unwrap();
        assert!(client.is_closed().await, "truncated by {cut}: closed");
        assert_nothing_lost(&broker, "a truncated produce").await;
    }
    assert_still_serving(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut expected = Vec::new();
    let mut bytes = Vec::new();
    for i in 0..20 {
        let (correlation_id, frame) = if i % 2 == 0 {
            client.frame(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default())
        } else {
            client.frame(
                ApiKey::Metadata,
                9,
                &MetadataRequest::default().with_topics(None),
            )
        };
        expected.push(correlation_id);
        bytes.extend_from_slice(&frame);
    }
    client.send_raw(&bytes).await;
    for correlation_id in expected {
        let frame = client.read_frame().await.unwrap();
        assert_eq!(
            i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]),
            correlation_id
        );
    }
}

/// A JoinGroup whose protocol metadata makes the frame larger than `socket.request.max.bytes`
/// closes its connection (as any oversized request does) and creates no group; a group on
/// another connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_group_larger_than_the_request_limit_closes_only_its_connection() {
    let broker = TestBroker::start(&[
        ("socket.request.max.bytes", "1048576"),
        ("group.initial.rebalance.delay.ms", "0"),
    ])
    .await;
    store_records(&broker).await;
    let mut other = broker.client().await;
    let (member_id, generation_id) = groups::form_group(&mut other, "other").await;

    let mut client = broker.client().await;
    let big = join_request("big", "").with_protocols(vec![
        join_group_request::JoinGroupRequestProtocol::default()
            .with_name("range".into())
            .with_metadata(bytes::Bytes::from(vec![7u8; 2 << 20])),
    ]);
    let (_, frame) = client.frame(ApiKey::JoinGroup, 5, &big);
    // The broker closes after reading the size, so the rest of the write may hit the closed
    // socket; either way the connection must be closed.
    let sent = client.try_send_raw(&frame).await;
    assert!(
        sent.is_err() || client.is_closed().await,
        "oversized JoinGroup: connection should be closed"
    );

    let described = groups::describe(&mut other, "big").await;
    assert_eq!(
        described.group_state.as_str(),
        "Dead",
        "no group was created"
    );
    let code = groups::heartbeat(&mut other, "other", &member_id, generation_id).await;
    assert_eq!(code, 0, "the other group is unaffected");
    assert_nothing_lost(&broker, "an oversized JoinGroup").await;
}

/// Kafka's answers when a group outgrows its limits: with `group.max.size` members already
/// waiting in the join phase, the next joiner gets GROUP_MAX_SIZE_REACHED (81) at its first
/// JoinGroup; protocol metadata that fits in a request but makes the group's metadata record
/// larger than `__consumer_offsets`' `max.message.bytes` fails the leader's SyncGroup with
/// UNKNOWN_SERVER_ERROR (-1) and the group rebalances. Other groups are unaffected throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_over_their_size_limits_get_kafkas_errors() {
    let broker = TestBroker::start(&[
        ("group.max.size", "2"),
        ("group.initial.rebalance.delay.ms", "1500"),
    ])
    .await;
    // Two members park in the initial join phase of "full".
    let mut parked = Vec::new();
    for _ in 0..2 {
        let mut client = broker.client().await;
        let first: JoinGroupResponse = client
            .call(ApiKey::JoinGroup, 5, &join_request("full", ""))
            .await;
        assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
        let rejoin = join_request("full", first.member_id.as_str());
        parked.push(tokio::spawn(async move {
            let response: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &rejoin).await;
            response.error_code
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut third = broker.client().await;
    let refused: JoinGroupResponse = third
        .call(ApiKey::JoinGroup, 5, &join_request("full", ""))
        .await;
    assert_eq!(refused.error_code, 81, "GROUP_MAX_SIZE_REACHED");
    assert_eq!(refused.member_id.as_str(), "");
    let mut other = broker.client().await;
    let (member_id, generation_id) = groups::form_group(&mut other, "other").await;
    for join in parked {
        assert_eq!(
            join.await.unwrap(),
            0,
            "the two members form their generation"
        );
    }

    // 1.5 MB of metadata: a legal request, but a record over max.message.bytes (1048588).
    let mut big = broker.client().await;
    let request = join_request("big", "").with_protocols(vec![
        join_group_request::JoinGroupRequestProtocol::default()
            .with_name("range".into())
            .with_metadata(bytes::Bytes::from(vec![7u8; 1_500_000])),
    ]);
    let first: JoinGroupResponse = big.call(ApiKey::JoinGroup, 5, &request).await;
    let member = first.member_id.clone();
    let joined: JoinGroupResponse = big
        .call(
            ApiKey::JoinGroup,
            5,
            &request.with_member_id(member.clone()),
        )
        .await;
    assert_eq!(joined.error_code, 0);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(
            kafka_protocol::protocol::StrBytes::from_static_str("big"),
        ))
        .with_member_id(member.clone())
        .with_generation_id(joined.generation_id);
    let synced: SyncGroupResponse = big.call(ApiKey::SyncGroup, 3, &sync).await;
    assert_eq!(synced.error_code, -1, "UNKNOWN_SERVER_ERROR");
    let code = groups::heartbeat(&mut big, "big", &member, joined.generation_id).await;
    assert_eq!(code, 27, "REBALANCE_IN_PROGRESS");

    let code = groups::heartbeat(&mut other, "other", &member_id, generation_id).await;
    assert_eq!(code, 0, "the other group is unaffected");
    assert_still_serving(&broker).await;
}
