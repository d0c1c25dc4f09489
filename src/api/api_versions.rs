//! ApiVersions (18): the broker's `VersionTable` (`protocol::versions`: sluice's table, or that
//! table narrowed to an emulated Kafka release), advertised exactly. Versions above its max
//! never reach this handler; the connection answers them with the v0 fallback. From v3 the
//! features (`protocol::FEATURES`: `group.version`, `transaction.version`) go out as Kafka 4.4 advertises them:
//! every supported feature, except that v3 leaves out those whose supported minimum is 0
//! (KIP-1022: older clients reject such a range), and the finalized ones with their epoch. They
//! go through the same table (`VersionTable::supported_feature` and `finalized_feature`), so an
//! emulated release shows only the features it had.
//!
//! Errors are answered as Kafka 4.4 answers them, with the error code and no API list: invalid
//! client software fields (v3+, KIP-511) are INVALID_REQUEST; from v5 (KIP-1242) the client may
//! name the cluster and node it expects, and a broker that is not that node of that cluster
//! answers REBOOTSTRAP_REQUIRED, so a client whose address now reaches another broker starts over
//! from its bootstrap servers. Naming only one of the two is INVALID_REQUEST.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use crate::protocol::{NewerFields, VersionTable, FEATURES, FINALIZED_FEATURES_EPOCH};

/// Who this broker is, for the v5 check.
pub struct Identity<'a> {
    pub cluster_id: &'a str,
    pub node_id: i32,
}

pub fn handle(
    request: &ApiVersionsRequest,
    version: i16,
    newer: &NewerFields,
    identity: Identity<'_>,
    versions: &VersionTable,
) -> ApiVersionsResponse {
    if let Err(error) = check(request, version, newer, identity) {
        return ApiVersionsResponse::default().with_error_code(code(error));
    }
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
    if version >= 3 {
        add_features(&mut response, version, versions);
    }
    response
}

/// The supported and finalized features of a v3+ response, as `versions` advertises them.
fn add_features(response: &mut ApiVersionsResponse, version: i16, versions: &VersionTable) {
    response.supported_features = FEATURES
        .iter()
        .filter_map(|f| {
            let (min, max) =
                versions.supported_feature(f.name, f.supported_min, f.supported_max)?;
            (version >= 4 || min > 0).then(|| {
                SupportedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(f.name))
                    .with_min_version(min)
                    .with_max_version(max)
            })
        })
        .collect();
    response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
    response.finalized_features = FEATURES
        .iter()
        .filter_map(|f| {
            let level = versions.finalized_feature(f.name, f.finalized_level)?;
            Some(
                FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(f.name))
                    .with_min_version_level(level)
                    .with_max_version_level(level),
            )
        })
        .collect();
}

fn check(
    request: &ApiVersionsRequest,
    version: i16,
    newer: &NewerFields,
    identity: Identity<'_>,
) -> Result<(), ResponseError> {
    if version >= 3
        && !(valid_software_field(&request.client_software_name)
            && valid_software_field(&request.client_software_version))
    {
        return Err(ResponseError::InvalidRequest);
    }
    if let NewerFields::ApiVersions {
        cluster_id,
        node_id,
    } = newer
    {
        match (cluster_id, *node_id) {
            (None, -1) => {}
            (None, _) | (Some(_), -1) => return Err(ResponseError::InvalidRequest),
            (Some(cluster_id), node_id) => {
                if cluster_id != identity.cluster_id || node_id != identity.node_id {
                    return Err(ResponseError::RebootstrapRequired);
                }
            }
        }
    }
    Ok(())
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

    #[test]
    fn v5_checks_the_cluster_and_node_named() {
        let request = ApiVersionsRequest::default()
            .with_client_software_name("java".into())
            .with_client_software_version("4".into());
        let ask = |cluster_id: Option<&str>, node_id: i32| {
            let newer = NewerFields::ApiVersions {
                cluster_id: cluster_id.map(str::to_string),
                node_id,
            };
            let identity = Identity {
                cluster_id: "c1",
                node_id: 1,
            };
            handle(&request, 5, &newer, identity, &VersionTable::sluice())
        };
        let ok = ask(None, -1);
        assert_eq!(ok.error_code, 0);
        assert!(!ok.api_keys.is_empty());
        assert_eq!(ask(Some("c1"), 1).error_code, 0);
        let rebootstrap = ask(Some("c2"), 1);
        assert_eq!(rebootstrap.error_code, 129);
        assert!(rebootstrap.api_keys.is_empty());
        assert_eq!(ask(Some("c1"), 2).error_code, 129);
        assert_eq!(ask(Some("c1"), -1).error_code, 42);
        assert_eq!(ask(None, 1).error_code, 42);
    }
}
