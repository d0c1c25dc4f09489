//! A topic's `compression.type`: batches in another codec are stored re-encoded in the
//! topic's (or the broker default's), and read back whole with that codec's attribute.

mod common;

use common::configs::{incremental_alter_configs, BROKER, SET};
use common::data::{self, create_topic_with_configs};
use common::{Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

async fn create(client: &mut Client, name: &str, configs: &[(&str, &str)]) {
    let error_code = create_topic_with_configs(client, name, 1, configs).await;
    assert_eq!(error_code, 0, "{name}");
}

async fn produce(client: &mut Client, topic: &str, compression: Compression) -> i64 {
    let records = common::batch(50, compression, common::now_ms());
    let p = data::produce(client, 9, topic, 0, records).await;
    assert_eq!(p.error_code, 0, "{topic}");
    p.base_offset
}

/// The codec of each stored batch, checking that its records are intact.
async fn stored_codecs(client: &mut Client, topic: &str) -> Vec<u8> {
    let fetch = FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = client.call(ApiKey::Fetch, 12, &fetch).await;
    let mut bytes = response.responses[0].partitions[0].records.clone().unwrap();
    let mut codecs = Vec::new();
    let mut offset = 0;
    while !bytes.is_empty() {
        codecs.push(bytes[22] & 0x07);
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        for (i, record) in set.records.iter().enumerate() {
            assert_eq!(record.offset, offset);
            assert_eq!(record.value.as_deref(), Some(format!("v{i}").as_bytes()));
            offset += 1;
        }
    }
    codecs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_stored_in_the_topic_codec() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create(&mut client, "zstd-topic", &[("compression.type", "zstd")]).await;
    create(
        &mut client,
        "plain-topic",
        &[("compression.type", "uncompressed")],
    )
    .await;
    create(&mut client, "as-sent", &[]).await;

    let sent = [
        Compression::Gzip,
        Compression::Zstd,
        Compression::None,
        Compression::Snappy,
        Compression::Lz4,
    ];
    for (i, compression) in sent.iter().enumerate() {
        for topic in ["zstd-topic", "plain-topic", "as-sent"] {
            assert_eq!(
                produce(&mut client, topic, *compression).await,
                50 * i as i64
            );
        }
    }
    assert_eq!(stored_codecs(&mut client, "zstd-topic").await, [4; 5]);
    assert_eq!(stored_codecs(&mut client, "plain-topic").await, [0; 5]);
    assert_eq!(stored_codecs(&mut client, "as-sent").await, [1, 4, 0, 2, 3]);

    // A broker default applies to topics without an override.
    let ops = [("compression.type", SET, Some("lz4"))];
    let (error_code, _) = incremental_alter_configs(&mut client, BROKER, "", &ops).await;
    assert_eq!(error_code, 0);
    produce(&mut client, "as-sent", Compression::Gzip).await;
    assert_eq!(
        stored_codecs(&mut client, "as-sent").await,
        [1, 4, 0, 2, 3, 3]
    );
}
