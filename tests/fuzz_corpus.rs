//! The fuzz targets' inputs on stable Rust: every file of the checked-in corpus
//! (`fuzz/corpus/<target>/`) and every crash regression (`fuzz/regressions/<target>/`) goes
//! through the same `sluice::fuzzing` function the target calls, so a regression is caught by
//! `cargo test` without nightly or cargo-fuzz (docs/fuzzing.md).
//!
//! `cargo test --test fuzz_corpus -- --ignored write_seed_corpus` rewrites the seed corpus from
//! real encoders: requests as clients encode them (kafka-protocol), batches as producers and the
//! broker write them, a partition directory the log wrote, and coordinator records in Kafka's
//! formats.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::Compression;
use sluice::disk::Disk;
use sluice::group::group_record::{
    encode_group_metadata_value, GroupMetadataValue, MemberMetadata,
};
use sluice::group::records::{
    encode_group_metadata_key, encode_offset_commit_key, encode_offset_commit_value,
    OffsetCommitValue,
};
use sluice::log::{LogConfig, OpenOptions, PartitionLog};
use sluice::record_batch::control::{marker_batch, TxnMarker};
use sluice::record_batch::encode::{
    batch, transactional_batch, PlainRecord, TransactionalProducer,
};
use sluice::txn::log_record;
use sluice::txn::state::{TxnRecord, TxnState};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 5] = [
    ("request_frame", sluice::fuzzing::request_frame),
    ("record_batch", sluice::fuzzing::record_batch),
    ("segment_recovery", sluice::fuzzing::segment_recovery),
    ("consumer_offsets", sluice::fuzzing::consumer_offsets),
    ("transaction_state", sluice::fuzzing::transaction_state),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("read corpus dir").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_and_regression_input_runs_cleanly() {
    for (name, target) in TARGETS {
        let corpus = files_in(&fuzz_dir().join("corpus").join(name));
        assert!(
            corpus.len() >= 3,
            "fuzz/corpus/{name} has {} seeds; write them with write_seed_corpus",
            corpus.len()
        );
        let regressions = files_in(&fuzz_dir().join("regressions").join(name));
        for file in corpus.iter().chain(&regressions) {
            let data = std::fs::read(file).expect("read input");
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name}: {} panicked", file.display());
        }
    }
}

/// The seeds must be real, valid inputs: each request seed decodes.
#[test]
fn request_seeds_decode() {
    let versions = sluice::protocol::VersionTable::sluice();
    let dir = fuzz_dir().join("corpus").join("request_frame");
    for file in files_in(&dir) {
        let frame = Bytes::from(std::fs::read(&file).expect("read seed"));
        let decoded = sluice::protocol::decode_request(frame, &versions);
        assert!(decoded.is_ok(), "{}: {decoded:?}", file.display());
    }
}

#[test]
#[ignore = "rewrites fuzz/corpus; run by hand"]
fn write_seed_corpus() {
    let corpus = fuzz_dir().join("corpus");
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(name), bytes).expect("write seed");
    };
    for (name, frame) in request_frames() {
        write("request_frame", &name, &frame);
    }
    for (name, batch) in batches() {
        write("record_batch", name, &batch);
    }
    for (name, input) in segment_inputs() {
        write("segment_recovery", name, &input);
    }
    write(
        "consumer_offsets",
        "offsets-and-group",
        &consumer_offsets_input(),
    );
    write(
        "consumer_offsets",
        "consumer-group-epoch",
        &consumer_group_input(),
    );
    write("consumer_offsets", "txn-offsets", &txn_offsets_input());
    for (name, input) in transaction_state_inputs() {
        write("transaction_state", name, &input);
    }
}

fn frame<R: Encodable>(key: ApiKey, version: i16, body: &R) -> (String, Vec<u8>) {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("fuzz-seed")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("encode header");
    body.encode(&mut buf, version).expect("encode body");
    (format!("{key:?}-v{version}"), buf.to_vec())
}

fn plain_batch(compression: Compression) -> Bytes {
    let records = (0..3).map(|i| {
        PlainRecord::new(
            Some(Bytes::from(format!("key-{i}"))),
            Some(Bytes::from(format!("value-{i} ").repeat(8))),
            1_700_000_000_000 + i,
        )
    });
    batch(records, compression).expect("encode batch")
}

fn topic(name: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(name))
}

fn request_frames() -> Vec<(String, Vec<u8>)> {
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic("events"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(plain_batch(Compression::Lz4)))])]);
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(52_428_800)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic("events"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1_048_576)])]);
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic("events"))),
    ]));
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_session_timeout_ms(45_000)
        .with_rebalance_timeout_ms(300_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(
                b"\0\x03\0\0\0\x01\0\x06events\xff\xff\xff\xff",
            ))]);
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id_or_member_epoch(1)
        .with_member_id(StrBytes::from_static_str("m"))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic("events"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(42)])]);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic("events"))
            .with_num_partitions(3)
            .with_replication_factor(1)]);
    let heartbeat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_member_id(StrBytes::from_static_str("m"))
        .with_rebalance_timeout_ms(300_000)
        .with_subscribed_topic_names(Some(vec![topic("events")]));
    vec![
        frame(
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("fuzz"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
        frame(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default()),
        frame(ApiKey::Metadata, 12, &metadata),
        frame(ApiKey::Metadata, 1, &metadata),
        frame(ApiKey::Produce, 9, &produce),
        frame(ApiKey::Produce, 3, &produce),
        frame(ApiKey::Fetch, 12, &fetch),
        frame(ApiKey::Fetch, 4, &fetch),
        frame(
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
        ),
        frame(ApiKey::JoinGroup, 9, &join),
        frame(ApiKey::OffsetCommit, 8, &commit),
        frame(ApiKey::CreateTopics, 7, &create),
        frame(ApiKey::ConsumerGroupHeartbeat, 0, &heartbeat),
        frame(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("t"))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
    ]
}

fn batches() -> Vec<(&'static str, Bytes)> {
    let txn = transactional_batch(
        [PlainRecord::new(
            None,
            Some(Bytes::from_static(b"in a transaction")),
            1_700_000_000_000,
        )],
        TransactionalProducer {
            producer_id: 1000,
            producer_epoch: 0,
        },
    )
    .expect("transactional batch");
    let marker = TxnMarker {
        commit: true,
        coordinator_epoch: 3,
    };
    vec![
        ("none", plain_batch(Compression::None)),
        ("gzip", plain_batch(Compression::Gzip)),
        ("snappy", plain_batch(Compression::Snappy)),
        ("lz4", plain_batch(Compression::Lz4)),
        ("zstd", plain_batch(Compression::Zstd)),
        ("transactional", txn),
        (
            "commit-marker",
            marker_batch(1000, 0, marker, 1_700_000_000_000).expect("marker"),
        ),
    ]
}

/// A partition directory the log wrote (three batches, indexes every batch), as the target's
/// input: flags, index length, time index length, index, time index, log.
fn segment_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
        index_interval_bytes: 1,
        max_index_size_bytes: 1 << 16,
        flush_interval_messages: u64::MAX,
        flush_interval_ms: i64::MAX,
    };
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    };
    let mut log = PartitionLog::open(&Disk::real(), dir.path(), config, options, 0).expect("open");
    for compression in [Compression::None, Compression::Zstd, Compression::Gzip] {
        log.append(&plain_batch(compression), 0, 1_700_000_000_000, false)
            .expect("append");
    }
    log.close().expect("close");
    let read = |suffix: &str| {
        std::fs::read(dir.path().join(format!("{:020}{suffix}", 0))).expect("read segment file")
    };
    let (log_bytes, index, time_index) = (read(".log"), read(".index"), read(".timeindex"));
    let input = |flags: u8, index: &[u8], time_index: &[u8], log_bytes: &[u8]| {
        let mut out = vec![flags];
        out.extend_from_slice(&(index.len() as u16).to_be_bytes());
        out.extend_from_slice(&(time_index.len() as u16).to_be_bytes());
        out.extend_from_slice(index);
        out.extend_from_slice(time_index);
        out.extend_from_slice(log_bytes);
        out
    };
    let torn = &log_bytes[..log_bytes.len() - 7];
    vec![
        ("clean-shutdown", input(1, &index, &time_index, &log_bytes)),
        (
            "unclean-shutdown",
            input(0, &index, &time_index, &log_bytes),
        ),
        ("torn-tail", input(0, &index, &time_index, torn)),
        ("no-indexes", input(0, &[], &[], &log_bytes)),
    ]
}

/// One record of a coordinator target's input (see `sluice::fuzzing`).
fn record(kind: u8, key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(key.len() as i16).to_be_bytes());
    out.extend_from_slice(key);
    match value {
        Some(value) => {
            out.extend_from_slice(&(value.len() as i16).to_be_bytes());
            out.extend_from_slice(value);
        }
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
    out
}

fn consumer_offsets_input() -> Vec<u8> {
    let key = encode_offset_commit_key("g", "events", 0).expect("key");
    let value = encode_offset_commit_value(&OffsetCommitValue {
        offset: 42,
        leader_epoch: 0,
        metadata: "meta".into(),
        commit_timestamp_ms: 1_700_000_000_000,
        expire_timestamp_ms: None,
    })
    .expect("value");
    let group = encode_group_metadata_value(&GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 1,
        protocol: Some("range".into()),
        leader: Some("m-1".into()),
        current_state_timestamp_ms: 1_700_000_000_000,
        members: vec![MemberMetadata {
            member_id: "m-1".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(b"\0\x03\0\0\0\x01\0\x06events\xff\xff\xff\xff"),
            assignment: Bytes::from_static(b"\0\x03\0\0\0\x01\0\x06events\0\0\0\x01\0\0\0\0"),
        }],
    })
    .expect("group value");
    let group_key = encode_group_metadata_key("g").expect("group key");
    let mut out = record(0, &key, Some(&value));
    out.extend(record(0, &group_key, Some(&group)));
    out.extend(record(0, &key, None));
    out
}

/// A KIP-848 group: its epoch record (type 3) and a target assignment metadata record (type 6),
/// each an i16 type and the group as an i16-length string; values at version 0, flexible.
fn consumer_group_input() -> Vec<u8> {
    let key = |record_type: i16| {
        let mut key = record_type.to_be_bytes().to_vec();
        key.extend_from_slice(&1i16.to_be_bytes());
        key.push(b'g');
        key
    };
    let epoch_value = [0, 0, 0, 0, 0, 5, 0];
    let target_value = [0, 0, 0, 0, 0, 5, 0];
    let mut out = record(0, &key(3), Some(&epoch_value));
    out.extend(record(0, &key(6), Some(&target_value)));
    out
}

/// A transactional offset commit of producer 5 and its commit marker.
fn txn_offsets_input() -> Vec<u8> {
    let key = encode_offset_commit_key("g", "events", 1).expect("key");
    let value = encode_offset_commit_value(&OffsetCommitValue {
        offset: 7,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 1_700_000_000_000,
        expire_timestamp_ms: None,
    })
    .expect("value");
    let partition = sluice::storage::consumer_offsets::partition_for("g") as u8;
    let mut out = record(1 | (5 << 3), &key, Some(&value));
    out.extend(record(3 | 4 | (5 << 3), &[partition], None));
    out
}

fn transaction_state_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let txn = |state: TxnState, partitions: &[(&str, i32)]| TxnRecord {
        producer_id: 1000,
        prev_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 1,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state,
        partitions: partitions
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .collect::<BTreeSet<_>>(),
        start_ms: 1_700_000_000_000,
        last_update_ms: 1_700_000_000_000,
        client_tv: 2,
    };
    let key = log_record::encode_key("t").expect("key");
    let value = |record: &TxnRecord| log_record::encode_value(record).to_vec();
    let ongoing = record(
        0,
        &key,
        Some(&value(&txn(TxnState::Ongoing, &[("events", 0)]))),
    );
    let mut committed = ongoing.clone();
    committed.extend(record(
        0,
        &key,
        Some(&value(&txn(TxnState::PrepareCommit, &[("events", 0)]))),
    ));
    committed.extend(record(
        0,
        &key,
        Some(&value(&txn(TxnState::CompleteCommit, &[]))),
    ));
    let mut deleted = record(0, &key, Some(&value(&txn(TxnState::Empty, &[]))));
    deleted.extend(record(0, &key, None));
    vec![
        ("ongoing", ongoing),
        ("commit", committed),
        ("empty-then-tombstone", deleted),
    ]
}
