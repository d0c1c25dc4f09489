//! Every served version of every API, requested over a socket: the broker must answer each one
//! with a response that decodes at that version (and never close the connection). Responses
//! that set a field absent at a version fail to encode, which this catches. The versions
//! kafka-protocol cannot encode (ListOffsets v11, ApiVersions v5, DescribeLogDirs v5,
//! DeleteGroups v3) are requested in `kafka44_versions.rs`.

mod common;

use bytes::Bytes;
use common::{batch, now_ms, Client, TestBroker};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use uuid::Uuid;

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_string()))
}

async fn topic_id(client: &mut Client, topic: &str) -> Uuid {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(true);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    response.topics[0].topic_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_version_answers() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let id = topic_id(&mut client, "versions").await;

    for v in 0..=4 {
        let r: ApiVersionsResponse = client
            .call(
                ApiKey::ApiVersions,
                v,
                &ApiVersionsRequest::default()
                    .with_client_software_name("t".into())
                    .with_client_software_version("1".into()),
            )
            .await;
        assert_eq!(r.error_code, 0, "ApiVersions v{v}");
    }
    for v in 0..=13 {
        let topic = if v >= 10 {
            MetadataRequestTopic::default()
                .with_topic_id(id)
                .with_name(Some(name("versions")))
        } else {
            MetadataRequestTopic::default().with_name(Some(name("versions")))
        };
        let r: MetadataResponse = client
            .call(
                ApiKey::Metadata,
                v,
                &MetadataRequest::default().with_topics(Some(vec![topic])),
            )
            .await;
        assert_eq!(r.topics[0].error_code, 0, "Metadata v{v}");
    }
    for v in 3..=13 {
        let codec = if v >= 7 {
            Compression::Zstd
        } else {
            Compression::Gzip
        };
        let data =
            TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch(3, codec, now_ms())))]);
        let data = if v >= 13 {
            data.with_topic_id(id)
        } else {
            data.with_name(name("versions"))
        };
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![data]);
        let r: ProduceResponse = client.call(ApiKey::Produce, v, &request).await;
        assert_eq!(
            r.responses[0].partition_responses[0].error_code, 0,
            "Produce v{v}"
        );
    }
    for v in 4..=18 {
        let topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
            .with_fetch_offset(0)
            .with_partition_max_bytes(1 << 20)]);
        let topic = if v >= 13 {
            topic.with_topic_id(id)
        } else {
            topic.with_topic(name("versions"))
        };
        let request = FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![topic]);
        let r: FetchResponse = client.call(ApiKey::Fetch, v, &request).await;
        let p = &r.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 33), "Fetch v{v}");
        assert!(
            !p.records.as_ref().map(Bytes::is_empty).unwrap_or(true),
            "Fetch v{v} returns records"
        );
    }
    for v in 1..=10 {
        for timestamp in [-1, -2, now_ms() - 60_000] {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("versions"))
                    .with_partitions(vec![
                        ListOffsetsPartition::default().with_timestamp(timestamp)
                    ])]);
            let r: ListOffsetsResponse = client.call(ApiKey::ListOffsets, v, &request).await;
            assert_eq!(
                r.topics[0].partitions[0].error_code, 0,
                "ListOffsets v{v} ts {timestamp}"
            );
        }
    }
    for v in 0..=5 {
        let r: InitProducerIdResponse = client
            .call(
                ApiKey::InitProducerId,
                v,
                &InitProducerIdRequest::default().with_transactional_id(None),
            )
            .await;
        assert_eq!(r.error_code, 0, "InitProducerId v{v}");
    }
    for v in 1..=4 {
        let request = DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name("versions".into()),
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name("1".into()),
            ]);
        let r: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, v, &request).await;
        assert!(
            r.results
                .iter()
                .all(|x| x.error_code == 0 && !x.configs.is_empty()),
            "DescribeConfigs v{v}"
        );
    }
    for v in 0..=2 {
        let request = AlterConfigsRequest::default().with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name("versions".into())
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name("retention.ms".into())
                    .with_value(Some("100000".into()))]),
        ]);
        let r: AlterConfigsResponse = client.call(ApiKey::AlterConfigs, v, &request).await;
        assert_eq!(r.responses[0].error_code, 0, "AlterConfigs v{v}");
    }
    for v in 0..=1 {
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name("versions".into())
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name("retention.ms".into())
                        .with_value(Some("200000".into())),
                ]),
        ]);
        let r: IncrementalAlterConfigsResponse = client
            .call(ApiKey::IncrementalAlterConfigs, v, &request)
            .await;
        assert_eq!(r.responses[0].error_code, 0, "IncrementalAlterConfigs v{v}");
    }
    for v in 0..=3 {
        let request = CreatePartitionsRequest::default().with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(name("versions"))
                .with_count(2 + i32::from(v)),
        ]);
        let r: CreatePartitionsResponse = client.call(ApiKey::CreatePartitions, v, &request).await;
        assert_eq!(r.results[0].error_code, 0, "CreatePartitions v{v}");
    }
    for v in 1..=4 {
        let r: DescribeLogDirsResponse = client
            .call(
                ApiKey::DescribeLogDirs,
                v,
                &DescribeLogDirsRequest::default().with_topics(None),
            )
            .await;
        assert_eq!(
            (r.error_code, r.results.len()),
            (0, 1),
            "DescribeLogDirs v{v}"
        );
    }
    for v in 0..=2 {
        let request = DeleteRecordsRequest::default().with_topics(vec![
            delete_records_request::DeleteRecordsTopic::default()
                .with_name(name("versions"))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_offset(i64::from(v)),
                ]),
        ]);
        let r: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, v, &request).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code, 0,
            "DeleteRecords v{v}"
        );
    }
    for v in 0..=2 {
        let r: DescribeClusterResponse = client
            .call(
                ApiKey::DescribeCluster,
                v,
                &DescribeClusterRequest::default(),
            )
            .await;
        assert_eq!(
            (r.error_code, r.brokers.len()),
            (0, 1),
            "DescribeCluster v{v}"
        );
    }
    for v in 2..=7 {
        let topic = format!("created-v{v}");
        let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name(&topic))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
        let r: CreateTopicsResponse = client.call(ApiKey::CreateTopics, v, &request).await;
        assert_eq!(r.topics[0].error_code, 0, "CreateTopics v{v}");
        let request = if v >= 6 {
            DeleteTopicsRequest::default()
                .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                    .with_name(Some(name(&topic)))])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![name(&topic)])
        };
        let dv = v.clamp(1, 6);
        let r: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, dv, &request).await;
        assert_eq!(r.responses[0].error_code, 0, "DeleteTopics v{dv}");
    }
}
