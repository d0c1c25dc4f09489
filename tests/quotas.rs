//! Client quotas and request memory over real sockets: AlterClientQuotas / DescribeClientQuotas
//! (round trip, restart, Kafka's error codes), a produce flood, a fetch and a stream of small
//! requests (`request_percentage`) that get throttled and muted, and connections that stop
//! being read when `queued.max.request.bytes` is in use.

mod common;

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use common::data;
use common::quotas::{alter, entity, remove, s, set};
use common::{Client, TestBroker};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

/// The client id `common::Client` sends.
const CLIENT_ID: &str = "sluice-test";

fn component(kind: &str, match_type: i8, name: Option<&str>) -> ComponentData {
    ComponentData::default()
        .with_entity_type(s(kind))
        .with_match_type(match_type)
        .with_match(name.map(s))
}

/// Entities as `type=name` (`<default>` for null) joined by commas, with their values.
type Described = Vec<(String, Vec<(String, f64)>)>;

async fn describe(
    client: &mut Client,
    version: i16,
    components: Vec<ComponentData>,
    strict: bool,
) -> Result<Described, (i16, String)> {
    let request = DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(strict);
    let response: DescribeClientQuotasResponse = client
        .call(ApiKey::DescribeClientQuotas, version, &request)
        .await;
    if response.error_code != 0 {
        assert!(response.entries.is_none());
        return Err((
            response.error_code,
            response.error_message.unwrap().to_string(),
        ));
    }
    let mut entries: Described = response
        .entries
        .unwrap()
        .into_iter()
        .map(|e| {
            let name = e
                .entity
                .iter()
                .map(|d| {
                    let n = d.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                    format!("{}={n}", d.entity_type.as_str())
                })
                .collect::<Vec<_>>()
                .join(",");
            let values = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (name, values)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_then_describe_round_trips_and_survives_restart() {
    let mut broker = TestBroker::start(&[]).await;
    for version in [0, 1] {
        let mut client = broker.client().await;
        let app = entity(&[("client-id", Some("app"))]);
        let defaults = entity(&[("user", None), ("client-id", None)]);
        let results = alter(
            &mut client,
            version,
            vec![
                (app.clone(), vec![set("producer_byte_rate", 1_048_576.0)]),
                (app.clone(), vec![]),
                (defaults.clone(), vec![set("request_percentage", 25.5)]),
            ],
            false,
        )
        .await;
        assert_eq!(results[0], (0, None));
        assert_eq!(results[1].0, 42, "duplicate entity: {results:?}");
        assert_eq!(results[2], (0, None));
        let all = describe(&mut client, version, vec![], false).await.unwrap();
        assert_eq!(
            all,
            vec![
                (
                    "client-id=app".into(),
                    vec![("producer_byte_rate".into(), 1_048_576.0)]
                ),
                (
                    "user=<default>,client-id=<default>".into(),
                    vec![("request_percentage".into(), 25.5)]
                ),
            ]
        );
        let exact = vec![component("client-id", 0, Some("app"))];
        let found = describe(&mut client, version, exact, true).await.unwrap();
        assert_eq!(found.len(), 1);
        let default_user = vec![component("user", 1, None)];
        let found = describe(&mut client, version, default_user, false)
            .await
            .unwrap();
        assert_eq!(found[0].0, "user=<default>,client-id=<default>");

        broker.restart().await;
        let mut client = broker.client().await;
        let after = describe(&mut client, version, vec![], false).await.unwrap();
        assert_eq!(after, all, "quotas survive a restart");
        let results = alter(
            &mut client,
            version,
            vec![
                (app, vec![remove("producer_byte_rate")]),
                (defaults, vec![remove("request_percentage")]),
            ],
            false,
        )
        .await;
        assert_eq!(results, vec![(0, None), (0, None)]);
        assert!(describe(&mut client, version, vec![], false)
            .await
            .unwrap()
            .is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_kafkas_error_codes() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let app = || entity(&[("client-id", Some("app"))]);
    let cases = vec![
        (
            app(),
            vec![set("bogus_rate", 1.0)],
            "Invalid configuration key bogus_rate",
        ),
        (
            app(),
            vec![set("producer_byte_rate", -5.0)],
            "must be greater than 0",
        ),
        (app(), vec![set("consumer_byte_rate", 10.5)], "fractional"),
        (app(), vec![set("producer_byte_rate", 1e30)], "too large"),
        (
            app(),
            vec![set("producer_byte_rate", f64::INFINITY)],
            "too large for a LONG",
        ),
        // Kafka stores NaN; sluice refuses it (no rate compares with it).
        (
            app(),
            vec![set("request_percentage", f64::NAN)],
            "must be a number",
        ),
        (
            app(),
            vec![set("connection_creation_rate", 1.0)],
            "Invalid configuration key connection_creation_rate",
        ),
        (
            entity(&[("group", Some("g"))]),
            vec![set("producer_byte_rate", 1.0)],
            "entity type",
        ),
        (entity(&[]), vec![set("producer_byte_rate", 1.0)], "empty"),
        (
            entity(&[("user", Some(""))]),
            vec![set("producer_byte_rate", 1.0)],
            "Empty user",
        ),
    ];
    for (entity, ops, expected) in cases {
        let results = alter(&mut client, 1, vec![(entity, ops)], false).await;
        assert_eq!(results[0].0, 42, "{results:?}");
        let message = results[0].1.clone().unwrap();
        assert!(message.contains(expected), "{message} lacks {expected}");
    }
    // validate_only checks but does not apply.
    let results = alter(
        &mut client,
        1,
        vec![(app(), vec![set("producer_byte_rate", 5.0)])],
        true,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);
    // An infinite DOUBLE quota is no limit, and Kafka accepts it.
    let results = alter(
        &mut client,
        1,
        vec![(app(), vec![set("request_percentage", f64::INFINITY)])],
        true,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);
    assert!(describe(&mut client, 1, vec![], false)
        .await
        .unwrap()
        .is_empty());

    let (code, message) = describe(&mut client, 1, vec![component("group", 2, None)], false)
        .await
        .unwrap_err();
    assert_eq!(code, 35, "{message}");
    for bad in [
        vec![component("user", 0, None)],
        vec![component("user", 1, Some("x"))],
        vec![component("user", 9, None)],
        vec![component("user", 2, None), component("user", 2, None)],
    ] {
        let (code, message) = describe(&mut client, 0, bad, false).await.unwrap_err();
        assert_eq!(code, 42, "{message}");
    }
}

/// Sends ApiVersions and returns how long its response took.
async fn api_versions_round_trip(client: &mut Client) -> Duration {
    let started = Instant::now();
    let _: ApiVersionsResponse = client
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_produce_flood_is_throttled_and_its_connection_muted() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    data::create_topic(&mut client, "flood", 1).await;
    let quota = entity(&[("client-id", Some(CLIENT_ID))]);
    let results = alter(
        &mut client,
        1,
        vec![(quota, vec![set("producer_byte_rate", 10_000.0)])],
        false,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);

    // ~110 kB at 10 kB/s over the 10 s minimum window.
    let (correlation_id, frame) = client.frame(
        ApiKey::Produce,
        9,
        &data::produce_request(-1, "flood", 0, common::sized_batch(1000, 100)),
    );
    let request_bytes = (frame.len() - 4) as f64;
    client.send_raw(&frame).await;
    let mut raw = client.read_frame().await.unwrap();
    let header = ResponseHeader::decode(&mut raw, 1).unwrap();
    assert_eq!(header.correlation_id, correlation_id);
    let response = ProduceResponse::decode(&mut raw, 9).unwrap();
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(
        partition.error_code, 0,
        "a throttled produce is still appended"
    );
    // Kafka's formula: (observed - quota) / quota × window, the window being 10 s here.
    let expected_ms = ((request_bytes / 10.0 - 10_000.0) / 10_000.0 * 10_000.0).round() as i32;
    assert!(expected_ms > 500, "{request_bytes} bytes");
    assert_eq!(response.throttle_time_ms, expected_ms);

    // Muted: the next request waits out the throttle time.
    let waited = api_versions_round_trip(&mut client).await;
    let throttle = Duration::from_millis(expected_ms as u64);
    assert!(waited + Duration::from_millis(50) >= throttle, "{waited:?}");
    assert!(waited < throttle + Duration::from_secs(2), "{waited:?}");
    // Another connection of the same client id shares the rate but is not muted.
    let mut other = broker.client().await;
    assert!(api_versions_round_trip(&mut other).await < Duration::from_millis(500));
    let response: ProduceResponse = other
        .call(
            ApiKey::Produce,
            9,
            &data::produce_request(-1, "flood", 0, common::sized_batch(10, 100)),
        )
        .await;
    assert!(response.throttle_time_ms > 0, "the rate is per client id");
}

/// Sends Metadata v12 (which has `throttle_time_ms`); returns the throttle and the round trip.
async fn metadata_round_trip(client: &mut Client) -> (i32, Duration) {
    let started = Instant::now();
    let response: MetadataResponse = client
        .call(ApiKey::Metadata, 12, &MetadataRequest::default())
        .await;
    (response.throttle_time_ms, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_percentage_throttles_any_response_and_mutes() {
    let broker = TestBroker::start(&[]).await;
    let mut admin = broker.client().await;
    // 0.001% of a thread: 10 µs of handler time per second, 100 µs over the 10 s window.
    let quota = entity(&[("client-id", Some("hammer"))]);
    let results = alter(
        &mut admin,
        1,
        vec![(quota, vec![set("request_percentage", 0.001)])],
        false,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);

    let mut hammer = broker.client().await;
    hammer.client_id = "hammer";
    let mut first_throttle_ms = 0;
    let mut throttle_ms = 0;
    for _ in 0..5_000 {
        (throttle_ms, _) = metadata_round_trip(&mut hammer).await;
        if first_throttle_ms == 0 {
            first_throttle_ms = throttle_ms;
        }
        // Kafka caps a request-time throttle at one quota window; the rate only grows.
        assert!(throttle_ms <= 1000, "{throttle_ms}");
        if throttle_ms == 1000 {
            break;
        }
    }
    assert!(first_throttle_ms > 0, "never throttled");
    assert_eq!(throttle_ms, 1000, "the throttle reaches the one-window cap");

    // The response came at once; the connection is muted: the next one waits out the throttle,
    // and, still over the quota, carries a throttle time of its own.
    let started = Instant::now();
    let response: ApiVersionsResponse = hammer
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    let waited = started.elapsed();
    let throttle = Duration::from_millis(throttle_ms as u64);
    assert!(waited + Duration::from_millis(50) >= throttle, "{waited:?}");
    assert!(waited < throttle + Duration::from_secs(2), "{waited:?}");
    assert!(
        response.throttle_time_ms > 0,
        "ApiVersions v3 carries it too"
    );

    // Another client id is neither throttled nor muted.
    let mut bystander = broker.client().await;
    bystander.client_id = "bystander";
    for _ in 0..20 {
        let (throttle, waited) = metadata_round_trip(&mut bystander).await;
        assert_eq!(throttle, 0);
        assert!(waited < Duration::from_millis(500), "{waited:?}");
    }
}

fn fetch_request(offset: i64, partition_max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s("drip")))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(offset)
                .with_current_leader_epoch(-1)
                .with_partition_max_bytes(partition_max_bytes)])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_fetch_is_empty_capped_and_muted() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    data::create_topic(&mut client, "drip", 1).await;
    for _ in 0..20 {
        let response: ProduceResponse = client
            .call(
                ApiKey::Produce,
                9,
                &data::produce_request(-1, "drip", 0, common::sized_batch(1, 900)),
            )
            .await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
    let quota = entity(&[("client-id", Some(CLIENT_ID))]);
    let results = alter(
        &mut client,
        1,
        vec![(quota, vec![set("consumer_byte_rate", 1000.0)])],
        false,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);

    // Two ~1 kB batches: within 1,000 B/s over 10 s.
    let first: FetchResponse = client
        .call(ApiKey::Fetch, 12, &fetch_request(0, 2500))
        .await;
    assert_eq!(first.throttle_time_ms, 0);
    let records = first.responses[0].partitions[0].records.clone().unwrap();
    assert!(
        records.len() > 1500 && records.len() <= 2500,
        "{}",
        records.len()
    );

    // Asking for everything: max_bytes is capped at 1,000 B/s × 10 s, so the throttle is about
    // (2 kB + 10 kB) / 10 s against 1 kB/s, not the ~9.6 s that all 18 batches would cost.
    let second: FetchResponse = client
        .call(ApiKey::Fetch, 12, &fetch_request(2, 50 << 20))
        .await;
    assert!(
        second.responses.is_empty(),
        "a throttled fetch returns nothing"
    );
    let throttle_ms = second.throttle_time_ms;
    assert!((1000..3000).contains(&throttle_ms), "{throttle_ms}");

    // Muted for that long; the dropped bytes were taken back, so the retry is not throttled.
    let started = Instant::now();
    let third: FetchResponse = client
        .call(ApiKey::Fetch, 12, &fetch_request(2, 2500))
        .await;
    let waited = started.elapsed();
    assert!(waited + Duration::from_millis(50) >= Duration::from_millis(throttle_ms as u64));
    assert_eq!(third.throttle_time_ms, 0);
    assert!(!third.responses[0].partitions[0]
        .records
        .as_ref()
        .unwrap()
        .is_empty());
}

/// An ApiVersions v0 request frame padded to `size` bytes after the prefix (the broker ignores
/// bytes after the body).
fn padded_api_versions(correlation_id: i32, size: usize) -> Vec<u8> {
    let mut frame = BytesMut::new();
    frame.put_i32(size as i32);
    frame.put_i16(ApiKey::ApiVersions as i16);
    frame.put_i16(0);
    frame.put_i32(correlation_id);
    frame.put_i16(-1);
    frame.resize(4 + size, 0);
    frame.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_stop_reading_while_request_memory_is_in_use() {
    let limit = "65536";
    let broker = TestBroker::start(&[
        ("socket.request.max.bytes", limit),
        ("queued.max.request.bytes", limit),
    ])
    .await;
    // A frame of the whole limit, announced but not finished, holds all the memory.
    let mut hog = broker.client().await;
    let frame = padded_api_versions(7, 65536);
    hog.send_raw(&frame[..frame.len() - 100]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut waiting = broker.client().await;
    let (_, request) = waiting.frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    waiting.send_raw(&request).await;
    let early = tokio::time::timeout(Duration::from_millis(500), waiting.read_frame()).await;
    assert!(early.is_err(), "answered while the memory was in use");

    hog.send_raw(&frame[frame.len() - 100..]).await;
    let mut answer = hog
        .read_frame()
        .await
        .expect("the large request is answered");
    assert_eq!(
        ResponseHeader::decode(&mut answer, 0)
            .unwrap()
            .correlation_id,
        7
    );
    assert!(
        waiting.read_frame().await.is_some(),
        "answered once memory was free"
    );

    let mut pairs = vec![("socket.request.max.bytes".to_string(), "1000".to_string())];
    pairs.push(("queued.max.request.bytes".to_string(), "999".to_string()));
    let error = sluice::config::Config::from_pairs(&pairs).unwrap_err();
    assert!(error.0.contains("queued.max.request.bytes"), "{error}");
}
