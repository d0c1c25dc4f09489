//! The embedded broker as another crate's tests use it: only the public `sluice::EmbeddedBroker`
//! API and a real Kafka client from crates.io (`rskafka`, pure Rust). Records are produced and
//! fetched back with their offsets, a topic is created through the client's admin API, and every
//! way of stopping the broker (shutdown, drop on either runtime flavour, the blocking handle)
//! closes its port and removes its temporary log directory. The README's "Use in tests" example
//! is `examples/embedded.rs`, which runs here too.

#[path = "../examples/embedded.rs"]
mod readme_example;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use sluice::EmbeddedBroker;

fn record(key: &str, value: &str, timestamp_ms: i64) -> Record {
    Record {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: BTreeMap::from([("origin".to_string(), b"embedded-test".to_vec())]),
        timestamp: Utc.timestamp_millis_opt(timestamp_ms).unwrap(),
    }
}

async fn client(broker: &EmbeddedBroker) -> Client {
    ClientBuilder::new(vec![broker.bootstrap_servers()])
        .build()
        .await
        .expect("rskafka connects to the embedded broker")
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    since_epoch.as_millis() as i64
}

/// True when nothing accepts connections on `addr` any more.
fn refuses_connections(addr: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
}

/// Waits up to 10 s for `done`, polling the runtime in between.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > Duration::from_secs(10) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rskafka_creates_a_topic_produces_and_fetches_back_with_offsets() {
    let broker = EmbeddedBroker::builder()
        .config("num.partitions", "3")
        .start()
        .await
        .unwrap();
    let client = client(&broker).await;
    let controller = client.controller_client().unwrap();
    controller
        .create_topic("orders", 2, 1, 5_000)
        .await
        .unwrap();
    let topics = client.list_topics().await.unwrap();
    let orders = topics.iter().find(|t| t.name == "orders").expect("listed");
    assert_eq!(orders.partitions, [0, 1].into());

    let partition = client
        .partition_client("orders", 1, UnknownTopicHandling::Retry)
        .await
        .unwrap();
    let now_ms = now_ms();
    let first: Vec<Record> = (0..3)
        .map(|i| record(&format!("k{i}"), &format!("v{i}"), now_ms + i))
        .collect();
    let offsets = partition
        .produce(first.clone(), Compression::NoCompression)
        .await
        .unwrap();
    assert_eq!(offsets, [0, 1, 2]);
    let second = vec![
        record("k3", "v3", now_ms + 3),
        record("k4", "v4", now_ms + 4),
    ];
    let offsets = partition
        .produce(second.clone(), Compression::NoCompression)
        .await
        .unwrap();
    assert_eq!(offsets, [3, 4], "offsets continue from the log end offset");

    let (fetched, high_watermark) = partition
        .fetch_records(0, 1..1_000_000, 1_000)
        .await
        .unwrap();
    assert_eq!(high_watermark, 5);
    let fetched_offsets: Vec<i64> = fetched.iter().map(|r| r.offset).collect();
    assert_eq!(fetched_offsets, [0, 1, 2, 3, 4]);
    let fetched_records: Vec<Record> = fetched.into_iter().map(|r| r.record).collect();
    let produced: Vec<Record> = first.into_iter().chain(second).collect();
    assert_eq!(
        fetched_records, produced,
        "keys, values, headers, timestamps"
    );

    let (from_middle, _) = partition
        .fetch_records(3, 1..1_000_000, 1_000)
        .await
        .unwrap();
    assert_eq!(from_middle.first().map(|r| r.offset), Some(3));
    assert_eq!(partition.get_offset(OffsetAt::Earliest).await.unwrap(), 0);
    assert_eq!(partition.get_offset(OffsetAt::Latest).await.unwrap(), 5);

    // The other partition of the topic is untouched.
    let other = client
        .partition_client("orders", 0, UnknownTopicHandling::Error)
        .await
        .unwrap();
    assert_eq!(other.get_offset(OffsetAt::Latest).await.unwrap(), 0);

    // `num.partitions` reached the broker: a topic created with the broker's default count.
    controller
        .create_topic("defaults", -1, -1, 5_000)
        .await
        .unwrap();
    let topics = client.list_topics().await.unwrap();
    let defaults = topics
        .iter()
        .find(|t| t.name == "defaults")
        .expect("listed");
    assert_eq!(defaults.partitions, [0, 1, 2].into());

    broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_the_port_and_removes_the_log_directory() {
    let broker = EmbeddedBroker::builder().start().await.unwrap();
    let (addr, log_dir) = (broker.local_addr(), broker.log_dir().to_path_buf());
    assert_eq!(broker.bootstrap_servers(), addr.to_string());
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    let client = client(&broker).await;
    client
        .controller_client()
        .unwrap()
        .create_topic("t", 1, 1, 5_000)
        .await
        .unwrap();
    assert!(
        log_dir.join("t-0").is_dir(),
        "the broker writes into log_dir"
    );

    broker.shutdown().await.unwrap();
    assert!(!log_dir.exists(), "{} removed", log_dir.display());
    assert!(refuses_connections(addr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_broker_on_a_multi_thread_runtime_stops_it_before_returning() {
    let broker = EmbeddedBroker::builder().start().await.unwrap();
    let (addr, log_dir) = (broker.local_addr(), broker.log_dir().to_path_buf());
    assert!(log_dir.is_dir());
    drop(broker);
    assert!(!log_dir.exists(), "{} removed by drop", log_dir.display());
    assert!(refuses_connections(addr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_broker_on_a_multi_thread_runtime_waits_for_the_logs_to_close() {
    let dir = tempfile::tempdir().unwrap();
    let broker = EmbeddedBroker::builder()
        .config("log.dirs", dir.path().display().to_string())
        .start()
        .await
        .unwrap();
    let marker = dir.path().join(".kafka_cleanshutdown");
    assert!(!marker.exists(), "written only at a clean shutdown");
    drop(broker);
    assert!(
        marker.exists(),
        "the graceful shutdown finished within drop"
    );
}

#[tokio::test]
async fn dropping_the_broker_on_a_current_thread_runtime_stops_it_in_a_task() {
    let broker = EmbeddedBroker::builder().start().await.unwrap();
    let (addr, log_dir) = (broker.local_addr(), broker.log_dir().to_path_buf());
    drop(broker);
    assert!(
        eventually(|| !log_dir.exists()).await,
        "{} removed after drop",
        log_dir.display()
    );
    assert!(refuses_connections(addr));
}

#[test]
fn a_current_thread_runtime_dropped_with_the_broker_still_removes_the_directory() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let log_dir = runtime.block_on(async {
        let broker = EmbeddedBroker::builder().start().await.unwrap();
        broker.log_dir().to_path_buf()
        // Dropped here: the stopping task never gets to run before the runtime goes.
    });
    drop(runtime);
    assert!(!log_dir.exists(), "{} removed", log_dir.display());
}

#[test]
fn the_blocking_broker_serves_a_client_and_cleans_up_on_drop() {
    let broker = EmbeddedBroker::builder()
        .config("num.partitions", "2")
        .start_blocking()
        .unwrap();
    let (addr, log_dir) = (broker.local_addr(), broker.log_dir().to_path_buf());
    let bootstrap = broker.bootstrap_servers();
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let offsets = client_runtime.block_on(async {
        let client = ClientBuilder::new(vec![bootstrap]).build().await.unwrap();
        client
            .controller_client()
            .unwrap()
            .create_topic("blocking", 1, 1, 5_000)
            .await
            .unwrap();
        let partition = client
            .partition_client("blocking", 0, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        let now_ms = now_ms();
        partition
            .produce(vec![record("k", "v", now_ms)], Compression::NoCompression)
            .await
            .unwrap()
    });
    assert_eq!(offsets, [0]);
    drop(broker);
    assert!(!log_dir.exists(), "{} removed by drop", log_dir.display());
    assert!(refuses_connections(addr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_setting_fails_the_start() {
    let started = EmbeddedBroker::builder()
        .config("num.partitions", "many")
        .start()
        .await;
    let error = started.err().expect("num.partitions=many is refused");
    assert!(format!("{error:#}").contains("num.partitions"), "{error:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_directory_the_caller_chose_is_used_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let broker = EmbeddedBroker::builder()
        .config("log.dirs", dir.path().display().to_string())
        .start()
        .await
        .unwrap();
    assert_eq!(broker.log_dir(), dir.path());
    broker.shutdown().await.unwrap();
    assert!(
        dir.path().join("meta.properties").is_file(),
        "the caller's directory is kept, as the broker left it"
    );
}

#[test]
fn the_readme_shows_examples_embedded_rs_and_it_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("examples/embedded.rs")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("## Use in tests")
        .nth(1)
        .expect("README has a \"Use in tests\" section");
    assert!(
        section.contains(&format!("```rust\n{example}```")),
        "README's \"Use in tests\" example differs from examples/embedded.rs"
    );
    readme_example::main().unwrap();
}
