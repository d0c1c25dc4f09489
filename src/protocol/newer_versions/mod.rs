//! The versions Kafka 4.4 serves that kafka-protocol 0.18, the codec of every other version,
//! cannot read or write yet. Each is a small step from the codec's last version of its API,
//! taken from Kafka's published message schemas (`common/message/<Name>Request.json` and
//! `...Response.json`, shipped in the kafka-clients jar):
//!
//! - ListOffsets v11 (KIP-1023) has v10's bytes both ways; only timestamp -6 is new.
//! - OffsetCommit v10 and OffsetFetch v10 (KIP-848) name each topic by `TopicId` instead of by
//!   name; kafka-protocol writes their responses but reads their requests only up to v9.
//! - ApiVersions v5 (KIP-1242): the request adds `ClusterId` (compact nullable string) and
//!   `NodeId` (int32) after v4's fields; the response is v4's.
//! - DescribeLogDirs v5: the request is v4's; each result of the response adds `IsCordoned`
//!   (bool) after `UsableBytes`.
//! - DeleteGroups v3: the request is v2's; each result of the response adds `ErrorMessage`
//!   (compact nullable string) after `ErrorCode`.
//! - TxnOffsetCommit v6 (KIP-1319) names each topic by `TopicId` instead of by name, both ways.
//! - WriteTxnMarkers v2 (KIP-1228): each marker of the request adds `TransactionVersion` (int8)
//!   after `CoordinatorEpoch`; the response is v1's.
//!
//! A request is read into kafka-protocol's struct, with the fields that struct lacks in
//! `NewerFields`; a response is built as kafka-protocol's struct and written at the codec
//! version whose bytes it shares, or here (`messages`). Handlers see the version the client
//! sent. When kafka-protocol learns a version, its row goes and the codec takes over.

mod messages;
mod txn;
mod wire;

use anyhow::Result;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

pub use messages::NewerFields;
use messages::{
    decode_api_versions_v5, decode_offset_commit_v10, decode_offset_fetch_v10,
    encode_delete_groups_v3, encode_describe_log_dirs_v5,
};
pub use txn::topic_id_as_name;
use txn::{decode_txn_offset_commit_v6, decode_write_txn_markers_v2, encode_txn_offset_commit_v6};

/// Reads a request body of a version kafka-protocol cannot read.
type RequestDecoder = fn(&mut Bytes) -> Result<(RequestKind, NewerFields)>;
/// Writes a response body in a layout kafka-protocol does not have.
pub type ResponseEncoder = fn(&ResponseKind, &mut BytesMut) -> Result<()>;

/// How one side of a newer version is carried.
enum Layout<F> {
    /// The bytes of this version, which kafka-protocol reads or writes.
    Codec(i16),
    /// Read or written here.
    InTree(F),
}

/// One version beyond the codec.
struct Newer {
    key: ApiKey,
    version: i16,
    request: Layout<RequestDecoder>,
    response: Layout<ResponseEncoder>,
}

const NEWER: &[Newer] = &[
    Newer {
        key: ApiKey::ListOffsets,
        version: 11,
        request: Layout::Codec(10),
        response: Layout::Codec(10),
    },
    Newer {
        key: ApiKey::OffsetCommit,
        version: 10,
        request: Layout::InTree(decode_offset_commit_v10),
        response: Layout::Codec(10),
    },
    Newer {
        key: ApiKey::OffsetFetch,
        version: 10,
        request: Layout::InTree(decode_offset_fetch_v10),
        response: Layout::Codec(10),
    },
    Newer {
        key: ApiKey::ApiVersions,
        version: 5,
        request: Layout::InTree(decode_api_versions_v5),
        response: Layout::Codec(4),
    },
    Newer {
        key: ApiKey::DescribeLogDirs,
        version: 5,
        request: Layout::Codec(4),
        response: Layout::InTree(encode_describe_log_dirs_v5),
    },
    Newer {
        key: ApiKey::DeleteGroups,
        version: 3,
        request: Layout::Codec(2),
        response: Layout::InTree(encode_delete_groups_v3),
    },
    Newer {
        key: ApiKey::WriteTxnMarkers,
        version: 2,
        request: Layout::InTree(decode_write_txn_markers_v2),
        response: Layout::Codec(1),
    },
    Newer {
        key: ApiKey::TxnOffsetCommit,
        version: 6,
        request: Layout::InTree(decode_txn_offset_commit_v6),
        response: Layout::InTree(encode_txn_offset_commit_v6),
    },
];

fn newer(key: ApiKey, version: i16) -> Option<&'static Newer> {
    NEWER.iter().find(|n| n.key == key && n.version == version)
}

/// The highest version of `key` this module carries, if any.
#[cfg(test)]
pub(super) fn in_tree_max(key: ApiKey) -> Option<i16> {
    NEWER
        .iter()
        .filter(|n| n.key == key)
        .map(|n| n.version)
        .max()
}

/// Decodes a request body at `version`: through kafka-protocol when it reads the version,
/// else as this module's table says.
pub fn decode_body(
    key: ApiKey,
    body: &mut Bytes,
    version: i16,
) -> Result<(RequestKind, NewerFields)> {
    match newer(key, version).map(|n| &n.request) {
        None => Ok((RequestKind::decode(key, body, version)?, NewerFields::None)),
        Some(Layout::Codec(codec_version)) => Ok((
            RequestKind::decode(key, body, *codec_version)?,
            NewerFields::None,
        )),
        Some(Layout::InTree(decode)) => decode(body),
    }
}

/// The version whose layout kafka-protocol writes `body` at `version` with, and the in-tree
/// encoder that replaces it where the layouts differ. (The response header's version is the
/// same at both versions: every version here is flexible.)
pub fn response_layout(body: &ResponseKind, version: i16) -> (i16, Option<ResponseEncoder>) {
    let newer = response_key(body).and_then(|key| newer(key, version));
    match newer.map(|n| &n.response) {
        None => (version, None),
        Some(Layout::Codec(codec_version)) => (*codec_version, None),
        Some(Layout::InTree(encode)) => (version - 1, Some(*encode)),
    }
}

/// The API of a response, for the APIs in `NEWER` (`ResponseKind` does not name its key).
fn response_key(body: &ResponseKind) -> Option<ApiKey> {
    match body {
        ResponseKind::ListOffsets(_) => Some(ApiKey::ListOffsets),
        ResponseKind::OffsetCommit(_) => Some(ApiKey::OffsetCommit),
        ResponseKind::OffsetFetch(_) => Some(ApiKey::OffsetFetch),
        ResponseKind::ApiVersions(_) => Some(ApiKey::ApiVersions),
        ResponseKind::DescribeLogDirs(_) => Some(ApiKey::DescribeLogDirs),
        ResponseKind::DeleteGroups(_) => Some(ApiKey::DeleteGroups),
        ResponseKind::WriteTxnMarkers(_) => Some(ApiKey::WriteTxnMarkers),
        ResponseKind::TxnOffsetCommit(_) => Some(ApiKey::TxnOffsetCommit),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Message, VersionRange};

    /// The versions kafka-protocol's request and response structs of `key` read and write.
    fn codec_versions(key: ApiKey) -> (VersionRange, VersionRange) {
        match key {
            ApiKey::ListOffsets => (ListOffsetsRequest::VERSIONS, ListOffsetsResponse::VERSIONS),
            ApiKey::OffsetCommit => (
                OffsetCommitRequest::VERSIONS,
                OffsetCommitResponse::VERSIONS,
            ),
            ApiKey::OffsetFetch => (OffsetFetchRequest::VERSIONS, OffsetFetchResponse::VERSIONS),
            ApiKey::ApiVersions => (ApiVersionsRequest::VERSIONS, ApiVersionsResponse::VERSIONS),
            ApiKey::DescribeLogDirs => (
                DescribeLogDirsRequest::VERSIONS,
                DescribeLogDirsResponse::VERSIONS,
            ),
            ApiKey::DeleteGroups => (
                DeleteGroupsRequest::VERSIONS,
                DeleteGroupsResponse::VERSIONS,
            ),
            ApiKey::WriteTxnMarkers => (
                WriteTxnMarkersRequest::VERSIONS,
                WriteTxnMarkersResponse::VERSIONS,
            ),
            ApiKey::TxnOffsetCommit => (
                TxnOffsetCommitRequest::VERSIONS,
                TxnOffsetCommitResponse::VERSIONS,
            ),
            other => panic!("{other:?} has no row"),
        }
    }

    /// One side of a row: a layout kafka-protocol has is one it reads or writes, and a side is
    /// carried in-tree only where kafka-protocol cannot handle the version.
    fn check_side<F>(layout: &Layout<F>, version: i16, codec: VersionRange) {
        let has = |v: i16| codec.min <= v && v <= codec.max;
        match layout {
            Layout::Codec(v) => assert!(has(*v), "codec layout v{v} outside {codec:?}"),
            Layout::InTree(_) => assert!(!has(version), "v{version} in-tree, codec has {codec:?}"),
        }
    }

    #[test]
    fn each_newer_version_is_one_the_codec_lacks() {
        for n in NEWER {
            let (request, response) = codec_versions(n.key);
            assert!(
                n.version > request.max || n.version > response.max,
                "{:?} v{} is the codec's own",
                n.key,
                n.version
            );
            check_side(&n.request, n.version, request);
            check_side(&n.response, n.version, response);
            // An API's newer versions follow the codec's last without a gap.
            assert_eq!(n.version, request.max.min(response.max) + 1, "{:?}", n.key);
        }
    }

    #[test]
    fn responses_of_newer_versions_get_their_layout() {
        let list_offsets = ResponseKind::ListOffsets(Default::default());
        assert_eq!(response_layout(&list_offsets, 11).0, 10);
        assert!(response_layout(&list_offsets, 11).1.is_none());
        assert_eq!(response_layout(&list_offsets, 9).0, 9);
        let commit = ResponseKind::OffsetCommit(Default::default());
        assert_eq!(response_layout(&commit, 10).0, 10);
        let log_dirs = ResponseKind::DescribeLogDirs(Default::default());
        assert!(response_layout(&log_dirs, 5).1.is_some());
        assert!(response_layout(&log_dirs, 4).1.is_none());
        assert_eq!(in_tree_max(ApiKey::ListOffsets), Some(11));
        assert_eq!(in_tree_max(ApiKey::Fetch), None);
    }
}
