//! Hostile and broken input: each connection gets Kafka's answer (usually a closed socket), the
//! process survives, other connections keep being served, and stored data is untouched.

mod common;

use common::{Client, TestBroker};
use kafka_protocol::messages::*;

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

async fn assert_closes(broker: &TestBroker, bytes: &[u8], what: &str) {
    let mut client = Client::connect(broker.addr()).await;
    client.send_raw(bytes).await;
    assert!(
        client.is_closed().await,
        "{what}: connection should be closed"
    );
    assert_still_serving(broker).await;
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_only_their_connection() {
    let broker = TestBroker::start(&[("socket.request.max.bytes", "1048576")]).await;
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
