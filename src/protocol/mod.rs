//! Bytes ⇄ typed messages, and nothing else: the table of API versions sluice serves, request
//! header decoding, response framing, and the hand-built ApiVersions fallback. Pure functions,
//! no I/O and no broker state. Record batches pass through untouched as `Bytes`.

mod codec;
pub mod record_walk;
mod versions;

pub use codec::{
    api_versions_fallback, decode_request, encode_response, DecodeError, DecodedRequest,
};
pub use versions::{advertised_api_versions, served_range, ApiSupport, SUPPORTED_APIS};
