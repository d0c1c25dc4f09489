//! ApiVersions, Metadata, CreateTopics and DeleteTopics over real sockets.

mod common;

use common::{Client, TestBroker};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_every_version_and_the_fallback() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    for version in 0..=4 {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sluice-test"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let response: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, version, &request).await;
        assert_eq!(response.error_code, 0);
        let produce = response.api_keys.iter().find(|k| k.api_key == 0).unwrap();
        assert_eq!((produce.min_version, produce.max_version), (0, 13));
        let fetch = response.api_keys.iter().find(|k| k.api_key == 1).unwrap();
        assert_eq!(fetch.min_version, 4);
        let heartbeat = response.api_keys.iter().find(|k| k.api_key == 68).unwrap();
        assert_eq!(
            (heartbeat.min_version, heartbeat.max_version),
            (0, 1),
            "KIP-848"
        );
        // Features from v3, as Kafka 4.4 (of those sluice implements): group.version finalized
        // at 1 and transaction.version at 2 (KIP-890's part 2); their supported ranges, 0-1 and
        // 0-2, listed only from v4 (a v3 answer leaves out supported features whose minimum is
        // 0), in name order as Kafka lists them.
        let finalized: Vec<(&str, i16, i16)> = response
            .finalized_features
            .iter()
            .map(|f| (f.name.as_str(), f.min_version_level, f.max_version_level))
            .collect();
        let supported: Vec<(&str, i16, i16)> = response
            .supported_features
            .iter()
            .map(|f| (f.name.as_str(), f.min_version, f.max_version))
            .collect();
        let finalized_levels = vec![("group.version", 1, 1), ("transaction.version", 2, 2)];
        match version {
            0..=2 => assert!(finalized.is_empty() && supported.is_empty()),
            3 => assert_eq!((finalized, supported), (finalized_levels, vec![])),
            _ => assert_eq!(
                (finalized, supported),
                (
                    finalized_levels,
                    vec![("group.version", 0, 1), ("transaction.version", 0, 2)]
                )
            ),
        }
        if version >= 3 {
            assert_eq!(response.finalized_features_epoch, 0);
        }
    }
    // v3 with an invalid software name: INVALID_REQUEST, and (as Kafka 4.4) no API list.
    let bad = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("-bad name"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    let response: ApiVersionsResponse = client.call(ApiKey::ApiVersions, 3, &bad).await;
    assert_eq!((response.error_code, response.api_keys.len()), (42, 0));
    // A version from the future: v0-shaped UNSUPPORTED_VERSION listing ApiVersions only (0-5,
    // v5 being read in-tree: `kafka44_versions.rs`).
    client
        .send_raw(&[0, 0, 0, 10, 0, 18, 0, 77, 0, 0, 0, 9, 0xff, 0xff])
        .await;
    let frame = client.read_frame().await.unwrap();
    assert_eq!(
        &frame[..],
        &[0, 0, 0, 9, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 5]
    );
}

/// Metadata v12 for `topic`, creating it if it does not exist.
async fn auto_create(client: &mut Client, topic: &str) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(name(topic)))
            .with_topic_id(uuid::Uuid::nil())]))
        .with_allow_auto_topic_creation(true);
    client.call(ApiKey::Metadata, 12, &request).await
}

/// Metadata v12 for every topic.
async fn all_topics(client: &mut Client) -> MetadataResponse {
    let request = MetadataRequest::default().with_topics(None);
    client.call(ApiKey::Metadata, 12, &request).await
}

#[tokio::test]
async fn a_lost_partition_metadata_file_gets_the_topic_id_back() {
    let mut broker = TestBroker::start(&[("num.partitions", "3")]).await;
    let mut client = broker.client().await;
    let response = auto_create(&mut client, "lost").await;
    let id = response.topics[0].topic_id;
    assert!(!id.is_nil());
    drop(client);
    broker.shutdown().await;
    // Partition 0's file is the one read first; its siblings still hold the id.
    let file = broker.dir.path().join("lost-0").join("partition.metadata");
    std::fs::remove_file(&file).unwrap();
    broker.start_again().await;
    let mut client = broker.client().await;
    let all = all_topics(&mut client).await;
    assert_eq!(all.topics.len(), 1);
    assert_eq!(all.topics[0].topic_id, id, "the topic keeps its id");
    let sibling = broker.dir.path().join("lost-1").join("partition.metadata");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        std::fs::read_to_string(&sibling).unwrap(),
        "partition.metadata is written again with the same id"
    );
}

#[tokio::test]
async fn the_log_directory_holds_the_files_kafka_writes() {
    let mut broker = TestBroker::start(&[("num.partitions", "2")]).await;
    let mut client = broker.client().await;
    auto_create(&mut client, "files").await;
    let dir = broker.dir.path().to_path_buf();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    for partition in ["files-0", "files-1"] {
        // As Kafka 4.1 writes them for a partition it has just created.
        assert_eq!(
            read(&format!("{partition}/leader-epoch-checkpoint")),
            "0\n1\n0 0\n"
        );
        let metadata = read(&format!("{partition}/partition.metadata"));
        assert!(
            metadata.starts_with("version: 0\ntopic_id: "),
            "{metadata:?}"
        );
        assert!(!metadata.ends_with('\n'), "{metadata:?}");
    }
    assert_eq!(read("cleaner-offset-checkpoint"), "0\n0\n");
    drop(client);
    broker.shutdown().await;
    assert_eq!(
        read("replication-offset-checkpoint"),
        read("recovery-point-offset-checkpoint")
    );
    assert!(read("replication-offset-checkpoint").contains("files 1 0\n"));
    // Only logs whose start lies past their first segment are listed, as by Kafka.
    assert_eq!(read("log-start-offset-checkpoint"), "0\n0\n");
    assert!(!dir.join(".lock").exists(), "removed at a clean shutdown");
    broker.start_again().await;
    assert!(dir.join(".lock").exists());
    assert_eq!(read("files-0/leader-epoch-checkpoint"), "0\n1\n0 0\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creates_and_topic_ids_survive_restart() {
    let mut broker = TestBroker::start(&[("num.partitions", "3")]).await;
    let mut client = broker.client().await;
    let response = auto_create(&mut client, "auto").await;
    assert_eq!(response.controller_id, BrokerId(1));
    assert_eq!(response.brokers.len(), 1);
    assert_eq!(response.brokers[0].port, i32::from(broker.addr().port()));
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.partitions.len(), 3);
    assert!(!topic.topic_id.is_nil());
    let id = topic.topic_id;

    broker.restart().await;
    let mut client = broker.client().await;
    let all = all_topics(&mut client).await;
    assert_eq!(all.topics.len(), 1);
    assert_eq!(
        all.topics[0].topic_id, id,
        "topic id is stable across restarts"
    );
    // By topic id, with the empty (not null) name the Java admin client sends.
    let by_id = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(name("")))
        .with_topic_id(id)]));
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &by_id).await;
    assert_eq!(
        (
            response.topics[0].error_code,
            response.topics[0].name.as_ref().map(|n| n.to_string())
        ),
        (0, Some("auto".to_string()))
    );
    let unknown =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(name("")))
            .with_topic_id(uuid::Uuid::new_v4())]));
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &unknown).await;
    assert_eq!(
        (
            response.topics[0].error_code,
            response.topics[0].name.is_none()
        ),
        (100, true),
        "UNKNOWN_TOPIC_ID"
    );
    // v0 with an empty list means every topic.
    let v0: MetadataResponse = client
        .call(
            ApiKey::Metadata,
            0,
            &MetadataRequest::default().with_topics(Some(vec![])),
        )
        .await;
    assert_eq!(v0.topics.len(), 1);
    // Not allowed to create: UNKNOWN_TOPIC_OR_PARTITION.
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("other")))
        ]))
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    assert_eq!(response.topics[0].error_code, 3);
}

/// With `auto.create.topics.enable=false`, a Metadata request that allows auto-creation gets
/// UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, and no topic is created (Metadata v4+ and
/// v0-v3, which always asked to create).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_creates_nothing_when_auto_create_is_disabled() {
    let broker = TestBroker::start(&[("auto.create.topics.enable", "false")]).await;
    let mut client = broker.client().await;
    for version in [1, 4, 12] {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(name("unknown")))
                .with_topic_id(uuid::Uuid::nil())]))
            .with_allow_auto_topic_creation(true);
        let response: MetadataResponse = client.call(ApiKey::Metadata, version, &request).await;
        assert_eq!(response.topics.len(), 1);
        assert_eq!(
            response.topics[0].error_code, 3,
            "v{version}: UNKNOWN_TOPIC_OR_PARTITION"
        );
        assert!(response.topics[0].partitions.is_empty());
    }
    let all = all_topics(&mut client).await;
    assert!(all.topics.is_empty(), "no topic was created");
    assert!(!broker.dir.path().join("unknown-0").exists());
}

fn creatable(n: &str, partitions: i32, replication: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(n))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validates_like_kafka() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let with_config =
        creatable("configured", 2, 1).with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_value(Some(StrBytes::from_static_str("1000")))]);
    let bad_config = creatable("badconf", 1, 1).with_configs(vec![CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("no.such.config"))
        .with_value(Some(StrBytes::from_static_str("1")))]);
    let request = CreateTopicsRequest::default().with_topics(vec![
        with_config,
        creatable("rf3", 1, 3),
        creatable("zero", 0, 1),
        creatable("bad name!", 1, 1),
        bad_config,
        creatable("validated", 4, -1),
        creatable("enormous", 2_000_000_000, 1),
    ]);
    let mut validate_only = request.clone();
    validate_only.validate_only = true;
    validate_only.topics.truncate(1);
    validate_only.topics[0].name = name("only-validated");
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &validate_only).await;
    assert_eq!(response.topics[0].error_code, 0);
    assert!(
        !broker.dir.path().join("only-validated-0").exists(),
        "validate_only creates nothing"
    );

    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, 38, 37, 17, 40, 0, 37]);
    assert!(response.topics[1]
        .error_message
        .as_ref()
        .unwrap()
        .contains("replication factor"));
    assert_eq!(response.topics[5].num_partitions, 4);
    assert!(broker
        .dir
        .path()
        .join("configured-1/partition.metadata")
        .exists());
    let again: CreateTopicsResponse = client
        .call(
            ApiKey::CreateTopics,
            2,
            &CreateTopicsRequest::default().with_topics(vec![creatable("configured", 1, 1)]),
        )
        .await;
    assert_eq!(again.topics[0].error_code, 36, "TOPIC_ALREADY_EXISTS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_removes_files_and_retires_the_id() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let created: CreateTopicsResponse = client
        .call(
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default().with_topics(vec![creatable("gone", 2, 1)]),
        )
        .await;
    let old_id = created.topics[0].topic_id;
    assert!(broker.dir.path().join("gone-1").exists());
    let response: DeleteTopicsResponse = client
        .call(
            ApiKey::DeleteTopics,
            4,
            &DeleteTopicsRequest::default().with_topic_names(vec![name("gone"), name("never")]),
        )
        .await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(response.responses[1].error_code, 3);
    assert!(!broker.dir.path().join("gone-0").exists());
    assert!(!broker.dir.path().join("gone-1").exists());
    let recreated: CreateTopicsResponse = client
        .call(
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default().with_topics(vec![creatable("gone", 1, 1)]),
        )
        .await;
    assert_eq!(recreated.topics[0].error_code, 0);
    assert_ne!(
        recreated.topics[0].topic_id, old_id,
        "a recreated topic gets a new id"
    );
    // v6 deletes by id.
    let by_id = DeleteTopicsRequest::default()
        .with_topics(vec![delete_topics_request::DeleteTopicState::default()
            .with_topic_id(recreated.topics[0].topic_id)]);
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 6, &by_id).await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        response.responses[0].name.as_ref().map(|n| n.to_string()),
        Some("gone".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_group_lookup_creates_the_internal_offsets_topic() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let request = FindCoordinatorRequest::default()
        .with_key("my-group".into())
        .with_key_type(0);
    let response: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 3, &request).await;
    assert_eq!((response.error_code, response.node_id), (0, BrokerId(1)));
    assert_eq!(response.port, i32::from(broker.addr().port()));
    let all = all_topics(&mut client).await;
    let offsets = all
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some("__consumer_offsets"))
        .expect("offsets topic");
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions.len(), 50);
}
