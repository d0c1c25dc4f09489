//! ApiVersions (18): the table in `protocol::versions`, advertised exactly, and from v3 the
//! features (`transaction.version`) as Kafka 4.4 advertises them: every supported feature, except
//! that v3 leaves out those whose supported minimum is 0 (KIP-1022: older clients reject such a
//! range), and the finalized ones with their epoch. Versions above ours never reach this
//! handler; the connection answers them with the v0 fallback.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use crate::protocol::{advertised_api_versions, FEATURES, FINALIZED_FEATURES_EPOCH};

pub fn handle(request: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    let api_keys = advertised_api_versions()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let mut response = ApiVersionsResponse::default().with_api_keys(api_keys);
    if version >= 3 {
        response.supported_features = FEATURES
            .iter()
            .filter(|f| version >= 4 || f.supported_min > 0)
            .map(|f| {
                SupportedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(f.name))
                    .with_min_version(f.supported_min)
                    .with_max_version(f.supported_max)
            })
            .collect();
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
        response.finalized_features = FEATURES
            .iter()
            .map(|f| {
                FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(f.name))
                    .with_min_version_level(f.finalized_level)
                    .with_max_version_level(f.finalized_level)
            })
            .collect();
    }
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
