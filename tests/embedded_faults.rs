//! Fault injection through the public embedded API, seen by a real client (`rskafka`): an
//! error the client retries, one it reports, a closed connection it recovers from, a delay, and
//! refused connections; then `/ready` and `/metrics` on `sluice.http.listener`. The README's
//! example (`examples/embedded_faults.rs`) runs here too.

#[path = "../examples/embedded_faults.rs"]
mod readme_example;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use sluice::{EmbeddedBroker, FaultRule};

fn record(value: &str) -> Record {
    Record {
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: Default::default(),
        timestamp: Utc.timestamp_millis_opt(1_700_000_000_000).unwrap(),
    }
}

async fn broker_and_partition(topic: &str) -> (EmbeddedBroker, PartitionClient) {
    let broker = EmbeddedBroker::builder()
        .config("sluice.fault.injection.enable", "true")
        .config("sluice.http.listener", "127.0.0.1:0")
        .start()
        .await
        .expect("broker starts");
    let client = ClientBuilder::new(vec![broker.bootstrap_servers()])
        .build()
        .await
        .expect("client connects");
    client
        .controller_client()
        .unwrap()
        .create_topic(topic, 1, 1, 5_000)
        .await
        .expect("topic created");
    let partition = client
        .partition_client(topic, 0, UnknownTopicHandling::Retry)
        .await
        .expect("partition client");
    (broker, partition)
}

/// GET `path` on the broker's HTTP listener: (status, body).
fn http_get(broker: &EmbeddedBroker, path: &str) -> (u16, String) {
    let addr = broker.http_addr().expect("sluice.http.listener is set");
    let mut stream = std::net::TcpStream::connect(addr).expect("http connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().expect("status code");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

#[test]
fn the_readme_fault_injection_example_runs() {
    readme_example::main().expect("examples/embedded_faults.rs passes");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/embedded_faults.rs"
    ))
    .unwrap();
    assert!(
        readme.contains(example.trim()),
        "README.md shows examples/embedded_faults.rs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_error_reaches_the_client_and_the_next_request_succeeds() {
    let (broker, partition) = broker_and_partition("denied").await;
    let faults = broker.faults().unwrap();
    faults.add(FaultRule::error("Produce", "TOPIC_AUTHORIZATION_FAILED").unwrap());
    let refused = partition
        .produce(vec![record("a")], Compression::NoCompression)
        .await
        .expect_err("the injected error is not retriable");
    assert!(
        format!("{refused:?}").contains("TopicAuthorizationFailed"),
        "{refused:?}"
    );
    let stored = partition
        .produce(vec![record("b")], Compression::NoCompression)
        .await
        .expect("the rule is used up");
    assert_eq!(stored, [0], "the refused produce stored nothing");
    assert!(faults.rules().is_empty());
    broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_is_retried_and_a_delay_is_waited_out() {
    let (broker, partition) = broker_and_partition("flaky").await;
    let faults = broker.faults().unwrap();
    faults.add(FaultRule::close(Some("Produce")).unwrap());
    let stored = partition
        .produce(vec![record("a")], Compression::NoCompression)
        .await
        .expect("rskafka reconnects and retries");
    assert_eq!(stored, [0]);
    let closed = faults
        .recent()
        .iter()
        .filter(|s| s.error_code == Some(-2))
        .count();
    assert_eq!(closed, 1, "one produce lost its connection");

    faults.add(
        FaultRule::delay(Some("Fetch"), Duration::from_millis(300))
            .unwrap()
            .count(1),
    );
    let started = Instant::now();
    let (records, high_watermark) = partition
        .fetch_records(0, 1..1_000_000, 1_000)
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the fetch waited"
    );
    assert_eq!((records.len(), high_watermark), (1, 1));
    broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_come_back_after_reset() {
    let (broker, _partition) = broker_and_partition("closed").await;
    let faults = broker.faults().unwrap();
    faults.set_refuse_connections(true);
    let refused = ClientBuilder::new(vec![broker.bootstrap_servers()])
        .max_message_size(1 << 20)
        .build();
    let refused = tokio::time::timeout(Duration::from_secs(2), refused).await;
    assert!(!matches!(refused, Ok(Ok(_))), "no new client gets in");
    faults.reset();
    ClientBuilder::new(vec![broker.bootstrap_servers()])
        .build()
        .await
        .expect("a client connects after reset");
    broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_and_metrics_over_http_count_the_produced_records() {
    let (broker, partition) = broker_and_partition("counted").await;
    for i in 0..3 {
        partition
            .produce(
                vec![record(&format!("r{i}")), record("x")],
                Compression::NoCompression,
            )
            .await
            .unwrap();
    }
    assert_eq!(http_get(&broker, "/ready"), (200, "ready\n".to_string()));
    let (status, metrics) = http_get(&broker, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("kafka_server_brokertopicmetrics_messagesin_total{topic=\"counted\"} 6\n"),
        "{metrics}"
    );
    broker.shutdown().await.unwrap();
}
