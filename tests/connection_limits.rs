//! The per-connection read-ahead bound (`sluice.max.in.flight.requests.per.connection`) and the
//! broker's connection limit (`max.connections`), observed from outside through real sockets.
//!
//! Whether the broker has read a request is made visible through `queued.max.request.bytes`: a
//! request holds its size of that pool from the moment it is read until it is answered, so a
//! large request another connection has read makes a second large request wait.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::data::{create_topic, fetch_request, produce_request};
use common::{Client, TestBroker};
use kafka_protocol::messages::*;

/// One record with a value of `value_bytes`.
fn large_batch(value_bytes: usize) -> Bytes {
    common::sized_batch(1, value_bytes)
}

/// True when a response starts arriving within `wait`; consumes nothing.
async fn answered_within(client: &Client, wait: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(wait, client.stream.peek(&mut byte)).await,
        Ok(Ok(1))
    )
}

/// Reads one response frame and returns its correlation id.
async fn next_correlation_id(client: &mut Client) -> i32 {
    let frame = client.read_frame().await.expect("a response");
    i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]])
}

/// Sends `frames` in one write and returns their correlation ids.
async fn pipeline(client: &mut Client, frames: Vec<(i32, Bytes)>) -> Vec<i32> {
    let mut bytes = Vec::new();
    let ids = frames
        .into_iter()
        .map(|(id, frame)| {
            bytes.extend_from_slice(&frame);
            id
        })
        .collect();
    client.send_raw(&bytes).await;
    ids
}

/// With the bound at 2, a connection whose two requests are parked fetches has its third
/// request left unread in the socket; a request within the bound is read at once. Either way
/// the responses come back in request order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_stops_being_read_at_its_in_flight_bound() {
    let broker = TestBroker::start(&[
        ("sluice.max.in.flight.requests.per.connection", "2"),
        ("socket.request.max.bytes", "600000"),
        ("queued.max.request.bytes", "1000000"),
    ])
    .await;
    let mut admin = broker.client().await;
    create_topic(&mut admin, "idle", 1).await;
    create_topic(&mut admin, "bulk", 1).await;
    // Each large produce holds about half of the pool: two cannot be read at the same time.
    let large = || produce_request(1, "bulk", 0, large_batch(500_000));
    let parked_fetch = || fetch_request("idle", 0, 0, 2000, 1 << 20);

    // Within the bound: a parked fetch and a large produce are both read, so another
    // connection's large produce waits for memory until they are answered.
    let mut client = broker.client().await;
    let parked = client.frame(ApiKey::Fetch, 12, &parked_fetch());
    let read = client.frame(ApiKey::Produce, 9, &large());
    let expected = pipeline(&mut client, vec![parked, read]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut other = broker.client().await;
    let waiting = other.frame(ApiKey::Produce, 9, &large());
    pipeline(&mut other, vec![waiting]).await;
    assert!(
        !answered_within(&other, Duration::from_millis(800)).await,
        "the second request within the bound was read and holds its memory"
    );
    for id in expected {
        assert_eq!(next_correlation_id(&mut client).await, id);
    }
    other
        .read_frame()
        .await
        .expect("answered once memory is free");

    // Past the bound: two parked fetches fill it, so the large produce behind them stays in
    // the socket, holds no memory, and another connection's large produce is served at once.
    let first = client.frame(ApiKey::Fetch, 12, &parked_fetch());
    let second = client.frame(ApiKey::Fetch, 12, &parked_fetch());
    let unread = client.frame(ApiKey::Produce, 9, &large());
    let expected = pipeline(&mut client, vec![first, second, unread]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let served = other.frame(ApiKey::Produce, 9, &large());
    pipeline(&mut other, vec![served]).await;
    assert!(
        answered_within(&other, Duration::from_millis(1500)).await,
        "the request past the bound must not have been read"
    );
    assert!(
        !answered_within(&client, Duration::ZERO).await,
        "the first fetch is still parked"
    );
    other.read_frame().await.unwrap();
    for id in expected {
        assert_eq!(next_correlation_id(&mut client).await, id, "request order");
    }
}

async fn api_versions_answered(client: &mut Client) {
    let response: ApiVersionsResponse = client
        .call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default())
        .await;
    assert_eq!(response.error_code, 0);
}

/// As in Kafka, a client past `max.connections` is not refused: it waits, unserved, until a
/// connection closes, while the connections being served carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_max_connections_wait_for_a_free_slot() {
    let broker = TestBroker::start(&[("max.connections", "2")]).await;
    let mut first = broker.client().await;
    let mut second = broker.client().await;
    api_versions_answered(&mut first).await;
    api_versions_answered(&mut second).await;

    let mut third = broker.client().await;
    let request = third.frame(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    pipeline(&mut third, vec![request]).await;
    assert!(
        !answered_within(&third, Duration::from_millis(800)).await,
        "a third connection is not served while two are open"
    );
    api_versions_answered(&mut first).await;
    api_versions_answered(&mut second).await;

    drop(first);
    third
        .read_frame()
        .await
        .expect("served once a slot is free");
    api_versions_answered(&mut third).await;
    api_versions_answered(&mut second).await;
}
