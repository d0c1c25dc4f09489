//! Version emulation over real sockets (`sluice.emulate.kafka.version`): a broker emulating
//! Kafka 3.6 advertises 3.6's ranges and refuses newer versions as a 3.6 broker does (the v0
//! UNSUPPORTED_VERSION answer for ApiVersions, a closed connection for any other API), while
//! what 3.6 had keeps working; an unknown release is refused at start-up.

mod common;

use std::sync::Arc;

use common::data::{create_topic, produce, produce_request};
use common::{batch, now_ms, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use sluice::config::Config;
use sluice::time::SystemClock;

/// What a Kafka 3.6.2 broker (KRaft) advertises for each API sluice implements, as its
/// ApiVersions answer lists it (`compat-tests/kafka/check-release-api-versions.sh 3.6.2`),
/// narrowed to sluice's own table: (api key, min, max). CreateTopics, DeleteTopics,
/// ListOffsets, OffsetCommit, OffsetFetch, WriteTxnMarkers, DescribeConfigs, DescribeLogDirs
/// and the ACL APIs start where sluice (and Kafka 4) start, since sluice has no versions that
/// KIP-896 removed;
/// DescribeTopicPartitions (3.8) is absent.
const KAFKA_3_6: &[(i16, i16, i16)] = &[
    (0, 0, 9),  // Produce (served from v3)
    (1, 4, 15), // Fetch
    (2, 1, 8),  // ListOffsets
    (3, 0, 12), // Metadata
    (8, 2, 8),  // OffsetCommit: v9 was unstable in 3.6
    (9, 1, 8),  // OffsetFetch
    (10, 0, 4), // FindCoordinator
    (11, 0, 9), // JoinGroup
    (12, 0, 4), // Heartbeat
    (13, 0, 5), // LeaveGroup
    (14, 0, 5), // SyncGroup
    (15, 0, 5), // DescribeGroups
    (16, 0, 4), // ListGroups
    (17, 0, 1), // SaslHandshake
    (18, 0, 3), // ApiVersions
    (19, 2, 7), // CreateTopics
    (20, 1, 6), // DeleteTopics
    (21, 0, 2), // DeleteRecords
    (22, 0, 4), // InitProducerId
    (24, 0, 4), // AddPartitionsToTxn
    (25, 0, 3), // AddOffsetsToTxn
    (26, 0, 3), // EndTxn
    (27, 1, 1), // WriteTxnMarkers
    (28, 0, 3), // TxnOffsetCommit
    (29, 1, 3), // DescribeAcls
    (30, 1, 3), // CreateAcls
    (31, 1, 3), // DeleteAcls
    (32, 1, 4), // DescribeConfigs
    (33, 0, 2), // AlterConfigs
    (35, 1, 4), // DescribeLogDirs
    (36, 0, 2), // SaslAuthenticate
    (37, 0, 3), // CreatePartitions
    (42, 0, 2), // DeleteGroups
    (43, 0, 2), // ElectLeaders
    (44, 0, 1), // IncrementalAlterConfigs
    (47, 0, 0), // OffsetDelete
    (48, 0, 1), // DescribeClientQuotas
    (49, 0, 1), // AlterClientQuotas
    (50, 0, 0), // DescribeUserScramCredentials
    (51, 0, 0), // AlterUserScramCredentials
    (60, 0, 0), // DescribeCluster
    (61, 0, 0), // DescribeProducers
    (65, 0, 0), // DescribeTransactions
    (66, 0, 0), // ListTransactions
];

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sluice-test"))
        .with_client_software_version(StrBytes::from_static_str("1.0"))
}

fn advertised(response: &ApiVersionsResponse) -> Vec<(i16, i16, i16)> {
    let mut apis: Vec<_> = response
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    apis.sort();
    apis
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_3_6_advertises_3_6s_ranges() {
    let broker = TestBroker::start(&[("sluice.emulate.kafka.version", "3.6")]).await;
    let mut client = broker.client().await;
    for version in 0..=3 {
        let response: ApiVersionsResponse = client
            .call(ApiKey::ApiVersions, version, &api_versions_request())
            .await;
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(advertised(&response), KAFKA_3_6, "v{version}");
        // A 3.6 broker advertised no `transaction.version` (4.0 brought it): transactions v1.
        assert!(response.supported_features.is_empty(), "v{version}");
        assert!(response.finalized_features.is_empty(), "v{version}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_above_3_6s_gets_the_v0_fallback_with_3_6s_range() {
    let broker = TestBroker::start(&[("sluice.emulate.kafka.version", "3.6")]).await;
    let mut client = broker.client().await;
    // ApiVersions v4 (added in 3.9), as Kafka 4 clients send it first: size, key 18, v4,
    // correlation id 9, client id null, no tagged fields, empty software name and version.
    client
        .send_raw(&[0, 0, 0, 14, 0, 18, 0, 4, 0, 0, 0, 9, 0xff, 0xff, 0, 1, 1, 0])
        .await;
    let frame = client.read_frame().await.expect("an answer, not a close");
    // Header v0 (correlation id 9), UNSUPPORTED_VERSION (35), one entry: ApiVersions 0-3.
    assert_eq!(
        &frame[..],
        &[0, 0, 0, 9, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 3]
    );
    // The client retries at 3, on the same connection, and gets the full answer.
    let response: ApiVersionsResponse = client
        .call(ApiKey::ApiVersions, 3, &api_versions_request())
        .await;
    assert_eq!(advertised(&response), KAFKA_3_6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_3_6_lacks_closes_the_connection_and_3_6s_versions_work() {
    let broker = TestBroker::start(&[("sluice.emulate.kafka.version", "3.6")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "orders", 1).await;
    // Produce v9 is 3.6's newest: stored.
    let stored = produce(
        &mut client,
        9,
        "orders",
        0,
        batch(3, Compression::None, now_ms()),
    )
    .await;
    assert_eq!((stored.error_code, stored.base_offset), (0, 0));

    // Produce v10 (3.7) and v13 (4.1): sluice serves them, but Kafka 3.6 closes the
    // connection on a version it does not have, and so does the emulation.
    for version in [10, 13] {
        let mut client = broker.client().await;
        let (_, frame) = client.frame(
            ApiKey::Produce,
            version,
            &produce_request(-1, "orders", 0, batch(1, Compression::None, now_ms())),
        );
        let _ = client.try_send_raw(&frame).await;
        assert!(client.is_closed().await, "Produce v{version}");
    }
    // Metadata v13 (4.0) and DescribeTopicPartitions (3.8, an API 3.6 did not have) likewise.
    let mut client = broker.client().await;
    let (_, frame) = client.frame(ApiKey::Metadata, 13, &MetadataRequest::default());
    let _ = client.try_send_raw(&frame).await;
    assert!(client.is_closed().await, "Metadata v13");
    let mut client = broker.client().await;
    let request = DescribeTopicPartitionsRequest::default().with_response_partition_limit(10);
    let (_, frame) = client.frame(ApiKey::DescribeTopicPartitions, 0, &request);
    let _ = client.try_send_raw(&frame).await;
    assert!(client.is_closed().await, "DescribeTopicPartitions v0");

    // Nothing produced at a refused version was stored: the log still ends at 3.
    let mut client = broker.client().await;
    let stored = produce(
        &mut client,
        9,
        "orders",
        0,
        batch(1, Compression::None, now_ms()),
    )
    .await;
    assert_eq!((stored.error_code, stored.base_offset), (0, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulating_4_4_changes_nothing() {
    let own = TestBroker::start(&[]).await;
    let emulated = TestBroker::start(&[("sluice.emulate.kafka.version", "4.4")]).await;
    let request = api_versions_request();
    let own: ApiVersionsResponse = own
        .client()
        .await
        .call(ApiKey::ApiVersions, 3, &request)
        .await;
    let emulated: ApiVersionsResponse = emulated
        .client()
        .await
        .call(ApiKey::ApiVersions, 3, &request)
        .await;
    assert_eq!(advertised(&own), advertised(&emulated));
    assert_eq!(features(&own), features(&emulated));
}

/// (finalized, supported) features of an answer, as (name, min, max).
type Features = (Vec<(String, i16, i16)>, Vec<(String, i16, i16)>);

fn features(response: &ApiVersionsResponse) -> Features {
    let finalized = response
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.min_version_level, f.max_version_level))
        .collect();
    let supported = response
        .supported_features
        .iter()
        .map(|f| (f.name.to_string(), f.min_version, f.max_version))
        .collect();
    (finalized, supported)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn features_follow_the_emulated_release() {
    let feature = |name: &str, min, max| (name.to_string(), min, max);
    // Kafka 4.0 brought group.version (KIP-848) and transaction.version (KIP-890) and
    // finalizes them at 1 and 2, as 4.4 does: the emulation keeps both.
    let four = TestBroker::start(&[("sluice.emulate.kafka.version", "4.0")]).await;
    let response: ApiVersionsResponse = four
        .client()
        .await
        .call(ApiKey::ApiVersions, 4, &api_versions_request())
        .await;
    assert_eq!(
        features(&response),
        (
            vec![
                feature("group.version", 1, 1),
                feature("transaction.version", 2, 2)
            ],
            vec![
                feature("group.version", 0, 1),
                feature("transaction.version", 0, 2)
            ]
        )
    );
    // A 3.9 broker had neither (only kraft.version, which sluice does not advertise): a client
    // speaks transaction version 1 and the classic group protocol to it.
    let three = TestBroker::start(&[("sluice.emulate.kafka.version", "3.9")]).await;
    let response: ApiVersionsResponse = three
        .client()
        .await
        .call(ApiKey::ApiVersions, 3, &api_versions_request())
        .await;
    assert_eq!(features(&response), (vec![], vec![]));
    let end_txn = response.api_keys.iter().find(|k| k.api_key == 26);
    assert_eq!(
        end_txn.map(|k| k.max_version),
        Some(4),
        "EndTxn v5 is 4.0's"
    );
}

#[tokio::test]
async fn an_unknown_release_is_refused_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    for release in ["2.7", "3.10", "5.0"] {
        let pairs = [
            ("listeners", "PLAINTEXT://127.0.0.1:0".to_string()),
            ("log.dirs", dir.path().display().to_string()),
            ("sluice.emulate.kafka.version", release.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v));
        let config = Config::from_pairs(&pairs).expect("MAJOR.MINOR parses");
        let error = match sluice::server::start(config, Arc::new(SystemClock)).await {
            Ok(_) => panic!("emulating {release} started"),
            Err(e) => e.to_string(),
        };
        assert!(
            error.contains(&format!("sluice.emulate.kafka.version={release}"))
                && error.contains("2.8, 3.0, 3.1")
                && error.contains("4.4"),
            "{error}"
        );
    }
    // Not a release at all: refused when the settings are read.
    let pairs = [("sluice.emulate.kafka.version", "three")].map(|(k, v)| (k.into(), v.into()));
    let error = Config::from_pairs(&pairs).unwrap_err().to_string();
    assert!(error.contains("sluice.emulate.kafka.version"), "{error}");
}
