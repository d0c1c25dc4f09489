//! The transaction APIs' versions beyond kafka-protocol 0.18, over a socket, with request bytes
//! written field by field from Kafka 4.4's schemas: WriteTxnMarkers v2 (KIP-1228: each marker
//! carries its transaction version, and a version 2 marker at the epoch of the transaction open
//! on the partition is a late one and refused) and TxnOffsetCommit v6 (KIP-1319: topics named by
//! id, unknown ids answered UNKNOWN_TOPIC_ID).

mod common;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::data::{create_topic, topic_name};
use common::txn::*;
use common::{Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

const TOPIC: &str = "txn-versions";
const INVALID_PRODUCER_EPOCH: i16 = 47;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_TOPIC_ID: i16 = 100;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

/// Sends `body` as a request at `version` and returns the response body after its header (v1).
async fn call_raw(client: &mut Client, api_key: ApiKey, version: i16, body: &[u8]) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(77)
        .with_client_id(Some(StrBytes::from_static_str("txn-versions")));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header.encode(&mut frame, 2).unwrap();
    frame.put_slice(body);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    client.send_raw(&frame).await;
    let mut response = client.read_frame().await.expect("an answer, not a close");
    let header = ResponseHeader::decode(&mut response, 1).unwrap();
    assert_eq!(header.correlation_id, 77);
    response
}

fn compact(body: &mut BytesMut, s: &str) {
    body.put_u8(s.len() as u8 + 1);
    body.put_slice(s.as_bytes());
}

/// WriteTxnMarkers v2 of one marker for partition 0 of TOPIC; its error code.
async fn marker_v2(
    client: &mut Client,
    (producer_id, epoch): (i64, i16),
    commit: bool,
    transaction_version: i8,
) -> i16 {
    let mut body = BytesMut::new();
    body.put_u8(2); // one marker
    body.put_i64(producer_id);
    body.put_i16(epoch);
    body.put_u8(u8::from(commit));
    body.put_u8(2); // one topic
    compact(&mut body, TOPIC);
    body.put_u8(2); // one partition
    body.put_i32(0);
    body.put_u8(0); // topic tagged fields
    body.put_i32(0); // CoordinatorEpoch
    body.put_i8(transaction_version);
    body.put_u8(0); // marker tagged fields
    body.put_u8(0);
    let mut response = call_raw(client, ApiKey::WriteTxnMarkers, 2, &body).await;
    // The v2 response is v1's.
    let decoded = WriteTxnMarkersResponse::decode(&mut response, 1).unwrap();
    assert!(!response.has_remaining());
    assert_eq!(decoded.markers[0].producer_id.0, producer_id);
    decoded.markers[0].topics[0].partitions[0].error_code
}

async fn last_stable_offset(client: &mut Client) -> i64 {
    fetch_at(client, TOPIC, 0, 0, READ_COMMITTED)
        .await
        .last_stable_offset
}

#[tokio::test]
async fn write_txn_markers_v2_refuses_a_late_marker_of_the_previous_transaction() {
    let broker = TestBroker::start(&[("transaction.partition.verification.enable", "false")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let producer = 4000;
    // A transaction at epoch 3 opens at offset 0.
    let produced = produce_txn(
        &mut client,
        9,
        Some("tx"),
        TOPIC,
        0,
        txn_batch(producer, 3, 0, 2, "a"),
    )
    .await;
    assert_eq!(produced.error_code, 0);
    assert_eq!(last_stable_offset(&mut client).await, 0);

    // Under transaction version 2, its markers carry epoch 4: one at 3 is the late marker of
    // the transaction before, and must not end this one.
    assert_eq!(
        marker_v2(&mut client, (producer, 3), true, 2).await,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(marker_v2(&mut client, (producer, 2), false, 0).await, 47);
    assert_eq!(last_stable_offset(&mut client).await, 0, "still open");
    assert_eq!(marker_v2(&mut client, (producer, 4), true, 2).await, 0);
    assert_eq!(last_stable_offset(&mut client).await, 3);
    // The coordinator re-sending the same marker (after a restart, or a lost answer) is taken.
    assert_eq!(marker_v2(&mut client, (producer, 4), true, 2).await, 0);
    let committed = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(
        committed_view(&committed).len(),
        2,
        "both records committed"
    );

    // Version 0/1 markers (and WriteTxnMarkers v1's, which carry none) take the open
    // transaction's own epoch, as `kafka-transactions abort` sends it.
    let produced = produce_txn(
        &mut client,
        9,
        Some("tx"),
        TOPIC,
        0,
        txn_batch(producer, 4, 0, 1, "b"),
    )
    .await;
    assert_eq!(produced.error_code, 0);
    assert_eq!(
        marker_v2(&mut client, (producer, 4), false, 2).await,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(marker_v2(&mut client, (producer, 4), false, 1).await, 0);
    assert_eq!(last_stable_offset(&mut client).await, 6);
    let committed = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(aborted(&committed), Some(vec![(producer, 4)]));
}

async fn topic_id(client: &mut Client, topic: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
    ]));
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    response.topics[0].topic_id
}

/// A TxnOffsetCommit v6 request (a simple commit: generation -1, no member) of offset 5 for
/// each (topic id, partitions).
fn txn_offset_commit_v6(
    transactional_id: &str,
    group: &str,
    (producer_id, epoch): (i64, i16),
    topics: &[(Uuid, &[i32])],
) -> Bytes {
    let mut body = BytesMut::new();
    compact(&mut body, transactional_id);
    compact(&mut body, group);
    body.put_i64(producer_id);
    body.put_i16(epoch);
    body.put_i32(-1); // GenerationIdOrMemberEpoch
    compact(&mut body, ""); // MemberId
    body.put_u8(0); // GroupInstanceId: null
    body.put_u8(topics.len() as u8 + 1);
    for (id, partitions) in topics {
        body.put_u128(id.as_u128());
        body.put_u8(partitions.len() as u8 + 1);
        for p in *partitions {
            body.put_i32(*p);
            body.put_i64(5); // CommittedOffset
            body.put_i32(-1); // CommittedLeaderEpoch
            body.put_u8(0); // CommittedMetadata: null
            body.put_u8(0);
        }
        body.put_u8(0);
    }
    body.put_u8(0);
    body.freeze()
}

/// A v6 response: (topic id, partition, error code) of every partition, in order.
fn v6_answers(mut body: Bytes) -> Vec<(Uuid, i32, i16)> {
    assert_eq!(body.get_i32(), 0, "throttle time");
    let mut answers = Vec::new();
    for _ in 0..body.get_u8() - 1 {
        let id = Uuid::from_u128(body.get_u128());
        for _ in 0..body.get_u8() - 1 {
            answers.push((id, body.get_i32(), body.get_i16()));
            assert_eq!(body.get_u8(), 0);
        }
        assert_eq!(body.get_u8(), 0);
    }
    assert_eq!(body.get_u8(), 0);
    assert!(!body.has_remaining());
    answers
}

#[tokio::test]
async fn txn_offset_commit_v6_names_topics_by_id() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;
    let id = topic_id(&mut client, TOPIC).await;
    let (group, txn_id) = ("v6-group", "v6-txn");
    let producer = init_txn_ok(&mut client, txn_id, 60_000).await;
    let unknown = Uuid::from_u128(0xdead_beef);
    // v6 adds the offsets partition to the transaction itself (transaction version 2).
    let request = txn_offset_commit_v6(
        txn_id,
        group,
        producer,
        &[(id, &[0, 7]), (Uuid::nil(), &[0]), (unknown, &[1])],
    );
    let response = call_raw(&mut client, ApiKey::TxnOffsetCommit, 6, &request).await;
    assert_eq!(
        v6_answers(response),
        vec![
            (id, 0, 0),
            (id, 7, UNKNOWN_TOPIC_OR_PARTITION),
            (Uuid::nil(), 0, UNKNOWN_TOPIC_ID),
            (unknown, 1, UNKNOWN_TOPIC_ID),
        ]
    );
    assert_eq!(
        fetch_offset(&mut client, group, TOPIC, true).await,
        (-1, UNSTABLE_OFFSET_COMMIT)
    );
    let (error, ..) = end_txn(&mut client, 5, txn_id, producer, true).await;
    assert_eq!(error, 0);
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (5, 0));
    // EndTxn v5 bumped the epoch: the old one is fenced, for every partition it names.
    let request = txn_offset_commit_v6(txn_id, group, producer, &[(id, &[1])]);
    let response = call_raw(&mut client, ApiKey::TxnOffsetCommit, 6, &request).await;
    assert_eq!(v6_answers(response), vec![(id, 1, INVALID_PRODUCER_EPOCH)]);
}
