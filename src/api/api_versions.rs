//! ApiVersions (18): the broker's `VersionTable` (`protocol::versions`: sluice's table, or that
//! table narrowed to an emulated Kafka release), advertised exactly. Versions above its max
//! never reach this handler; the connection answers them with the v0 fallback. Features, when
//! advertised, go through the same table (`VersionTable::supported_feature` and
//! `finalized_feature`), so an emulated release shows only the features it had.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::errors::code;
use crate::protocol::VersionTable;

pub fn handle(
    request: &ApiVersionsRequest,
    version: i16,
    versions: &VersionTable,
) -> ApiVersionsResponse {
    let api_keys = versions
        .advertised()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let mut response = ApiVersionsResponse::default().with_api_keys(api_keys);
    if version >= 3
        && !(valid_software_field(&request.client_software_name)
            && valid_software_field(&request.client_software_version))
    {
        response.error_code = code(ResponseError::InvalidRequest);
    }
    response
}

/// KIP-511: `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`
fn valid_software_field(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            edge(first)
                && edge(last)
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_fields_follow_kip_511() {
        assert!(valid_software_field("apache-kafka-java"));
        assert!(valid_software_field("4.1.0"));
        assert!(!valid_software_field(""));
        assert!(!valid_software_field("-x"));
        assert!(!valid_software_field("a b"));
    }
}
