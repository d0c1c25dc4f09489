//! Fault injection from a Rust test: the embedded broker fails the next two produces with
//! NOT_LEADER_OR_FOLLOWER, the client retries through them, and the broker's log of served
//! requests shows what happened. Run with `cargo run --example embedded_faults`; README.md
//! shows this file and `tests/embedded_faults.rs` runs it.

use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use sluice::{EmbeddedBroker, FaultRule};

#[tokio::main]
pub async fn main() -> anyhow::Result<()> {
    let broker = EmbeddedBroker::builder()
        .config("sluice.fault.injection.enable", "true")
        .start()
        .await?;
    let faults = broker.faults().expect("enabled above");

    let client = ClientBuilder::new(vec![broker.bootstrap_servers()])
        .build()
        .await?;
    client
        .controller_client()?
        .create_topic("orders", 1, 1, 5_000)
        .await?;
    let partition = client
        .partition_client("orders", 0, UnknownTopicHandling::Retry)
        .await?;

    // The next two produces to orders-0 fail as if leadership had moved.
    faults.add(
        FaultRule::error("Produce", "NOT_LEADER_OR_FOLLOWER")
            .map_err(anyhow::Error::msg)?
            .topic("orders")
            .partition(0)
            .count(2),
    );
    let record = Record {
        key: None,
        value: Some(b"paid".to_vec()),
        headers: Default::default(),
        timestamp: Utc.timestamp_millis_opt(1_700_000_000_000).unwrap(),
    };
    // rskafka retries NOT_LEADER_OR_FOLLOWER: the third attempt is stored.
    let offsets = partition
        .produce(vec![record], Compression::NoCompression)
        .await?;
    assert_eq!(offsets, [0]);

    let produces: Vec<Option<i16>> = faults
        .recent()
        .into_iter()
        .filter(|served| served.api_key == 0)
        .map(|served| served.error_code)
        .collect();
    assert_eq!(produces, [Some(6), Some(6), None]);
    broker.shutdown().await?;
    Ok(())
}
