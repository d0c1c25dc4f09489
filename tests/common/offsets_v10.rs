//! Raw requests at versions kafka-protocol 0.18 cannot write: OffsetCommit and OffsetFetch v10
//! (topics named by id) written field by field from Kafka's schemas, and `call_raw`, which
//! sends any flexible version's body bytes under a v2 request header.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::Client;

/// Sends `body` (a flexible version's bytes) as a request at `version`, and returns the
/// response body after its header (v1, or v0 for ApiVersions); None if the broker closed the
/// connection.
pub async fn call_raw(
    client: &mut Client,
    api_key: ApiKey,
    version: i16,
    body: &[u8],
) -> Option<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(4242)
        .with_client_id(Some(StrBytes::from_static_str("kafka44-test")));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header.encode(&mut frame, 2).unwrap();
    frame.put_slice(body);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    client.send_raw(&frame).await;
    let mut response = client.read_frame().await?;
    let header_version = if api_key == ApiKey::ApiVersions { 0 } else { 1 };
    let header = ResponseHeader::decode(&mut response, header_version).unwrap();
    assert_eq!(header.correlation_id, 4242);
    Some(response)
}

/// A compact nullable string: its length plus one (0: null), then its bytes.
pub fn compact(body: &mut BytesMut, s: Option<&str>) {
    match s {
        None => body.put_u8(0),
        Some(s) => {
            body.put_u8(s.len() as u8 + 1);
            body.put_slice(s.as_bytes());
        }
    }
}

/// An OffsetCommit v10 request, written field by field from Kafka's schema (kafka-protocol 0.18
/// writes requests only up to v9): a simple commit (generation -1) of offset 2 with metadata
/// "m" to each partition.
pub fn commit_v10(group: &str, topics: &[(Uuid, &[i32])]) -> Bytes {
    let mut body = BytesMut::new();
    compact(&mut body, Some(group));
    body.put_i32(-1); // GenerationIdOrMemberEpoch
    compact(&mut body, Some("")); // MemberId
    compact(&mut body, None); // GroupInstanceId
    body.put_u8(topics.len() as u8 + 1);
    for (id, partitions) in topics {
        body.put_u128(id.as_u128());
        body.put_u8(partitions.len() as u8 + 1);
        for p in *partitions {
            body.put_i32(*p);
            body.put_i64(2); // CommittedOffset
            body.put_i32(-1); // CommittedLeaderEpoch
            compact(&mut body, Some("m"));
            body.put_u8(0);
        }
        body.put_u8(0);
    }
    body.put_u8(0);
    body.freeze()
}

/// An OffsetFetch v10 request for one group (topics None: everything it committed).
pub fn fetch_v10(group: &str, topics: Option<&[(Uuid, &[i32])]>) -> Bytes {
    let mut body = BytesMut::new();
    body.put_u8(2); // one group
    compact(&mut body, Some(group));
    compact(&mut body, None); // MemberId
    body.put_i32(-1); // MemberEpoch
    match topics {
        None => body.put_u8(0),
        Some(topics) => {
            body.put_u8(topics.len() as u8 + 1);
            for (id, partitions) in topics {
                body.put_u128(id.as_u128());
                body.put_u8(partitions.len() as u8 + 1);
                for p in *partitions {
                    body.put_i32(*p);
                }
                body.put_u8(0);
            }
        }
    }
    body.put_u8(0);
    body.put_u8(0); // RequireStable
    body.put_u8(0);
    body.freeze()
}

pub async fn call_v10<R: Decodable>(client: &mut Client, api_key: ApiKey, body: &[u8]) -> R {
    let mut response = call_raw(client, api_key, 10, body)
        .await
        .expect("an answer");
    let decoded = R::decode(&mut response, 10).unwrap();
    assert!(!response.has_remaining());
    decoded
}
