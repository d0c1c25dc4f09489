//! Bytes ⇄ typed messages, and nothing else: the table of API versions sluice serves, request
//! header decoding, response framing, and the hand-built ApiVersions fallback. Pure functions,
//! no I/O and no broker state. Record batches pass through untouched as `Bytes`, and fetched
//! records as chunks (`fetch_frame`) that the network layer writes in place.

mod codec;
mod fetch_frame;
mod versions;

pub use codec::{
    api_versions_fallback, decode_request, encode_response, encode_response_kind, DecodeError,
    DecodedRequest,
};
pub use fetch_frame::{encode_fetch_response, Chunk, ResponseFrame};
pub use versions::{
    advertised_api_versions, served_range, ApiSupport, Feature, FEATURES, FINALIZED_FEATURES_EPOCH,
    SUPPORTED_APIS,
};
