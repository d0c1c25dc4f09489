//! A broker inside the program (or test) that uses it: start, produce, fetch back, stop.
//! Run with `cargo run --example embedded`; README.md shows this file.

use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use sluice::EmbeddedBroker;

#[tokio::main]
pub async fn main() -> anyhow::Result<()> {
    // An ephemeral port and a temporary log directory; settings by Kafka's names.
    let broker = EmbeddedBroker::builder()
        .config("num.partitions", "3")
        .start()
        .await?;

    // Any Kafka client, pointed at the broker's bootstrap address.
    let client = ClientBuilder::new(vec![broker.bootstrap_servers()])
        .build()
        .await?;
    client
        .controller_client()?
        .create_topic("greetings", 1, 1, 5_000)
        .await?;
    let partition = client
        .partition_client("greetings", 0, UnknownTopicHandling::Retry)
        .await?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let record = Record {
        key: Some(b"hello".to_vec()),
        value: Some(b"world".to_vec()),
        headers: Default::default(),
        timestamp: Utc.timestamp_millis_opt(now.as_millis() as i64).unwrap(),
    };
    let offsets = partition
        .produce(vec![record.clone()], Compression::NoCompression)
        .await?;
    assert_eq!(offsets, [0]);

    let (fetched, high_watermark) = partition.fetch_records(0, 1..1_000_000, 1_000).await?;
    assert_eq!(high_watermark, 1);
    assert_eq!(fetched[0].offset, 0);
    assert_eq!(fetched[0].record.value, record.value);

    // Stops serving and removes the log directory (dropping the broker does too).
    broker.shutdown().await?;
    Ok(())
}
