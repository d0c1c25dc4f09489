//! Bytes ⇄ typed messages, and nothing else: the table of API versions sluice serves (and its
//! narrowing to an emulated Kafka release), request header decoding, response framing, the
//! hand-built ApiVersions fallback, and the few versions newer than kafka-protocol's codec,
//! carried in-tree (`newer_versions`). Pure functions, no I/O and no broker state. Record
//! batches pass through untouched as `Bytes`, and fetched records as chunks (`fetch_frame`)
//! that the network layer writes in place.

mod codec;
mod emulation;
mod fetch_frame;
#[rustfmt::skip]
mod kafka_releases;
mod newer_versions;
mod versions;

pub use codec::{
    api_versions_fallback, decode_request, encode_response, encode_response_kind, DecodeError,
    DecodedRequest,
};
pub use emulation::UnknownRelease;
pub use fetch_frame::{encode_fetch_response, Chunk, ResponseFrame};
pub use newer_versions::{topic_id_as_name, NewerFields};
pub use versions::{
    ApiSupport, Feature, VersionTable, FEATURES, FINALIZED_FEATURES_EPOCH, SUPPORTED_APIS,
};
