//! ApiVersions (18): the table in `protocol::versions`, advertised exactly. Versions above ours
//! never reach this handler; the connection answers them with the v0 fallback.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use crate::protocol::advertised_api_versions;

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
        add_features(&mut response, version);
    }
    if version >= 3
        && !(valid_software_field(&request.client_software_name)
            && valid_software_field(&request.client_software_version))
    {
        response.error_code = code(ResponseError::InvalidRequest);
    }
    response
}

/// The features a Kafka 4.4 broker finalizes that sluice implements: `group.version` 1 (the
/// KIP-848 consumer group protocol), as (name, supported min, supported max, finalized level).
const FEATURES: &[(&str, i16, i16, i16)] = &[("group.version", 0, 1, 1)];

/// The finalized features' epoch. Kafka's is the offset of the metadata record that last
/// changed them; sluice's never change, so it is constant.
const FINALIZED_FEATURES_EPOCH: i64 = 0;

/// ApiVersions v3+ lists supported and finalized features. As Kafka 4.4 does, a v3 answer
/// leaves out supported features whose minimum is 0, which clients before KIP-1113 misread.
fn add_features(response: &mut ApiVersionsResponse, version: i16) {
    for (name, min, max, level) in FEATURES {
        if version >= 4 || *min > 0 {
            response.supported_features.push(
                SupportedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_min_version(*min)
                    .with_max_version(*max),
            );
        }
        response.finalized_features.push(
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_max_version_level(*level)
                .with_min_version_level(*level),
        );
    }
    response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
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
