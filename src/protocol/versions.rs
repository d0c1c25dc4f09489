//! The one table of APIs and versions sluice implements, and the `VersionTable` a broker
//! serves: this table, or this table narrowed to an emulated Kafka release
//! (`sluice.emulate.kafka.version`, `emulation`). ApiVersions advertises exactly the broker's
//! `VersionTable` and the request path refuses anything outside it, so the two cannot drift
//! apart.

use kafka_protocol::messages::ApiKey;

/// One API: the versions advertised in ApiVersions and the versions actually served.
///
/// `advertised_min` may be below `served_min` only where Kafka 4 does the same on purpose
/// (KAFKA-18659: Produce advertises 0 so librdkafka < 2.11.1 keeps compression on, while
/// requests at v0-2 still get their connection closed).
#[derive(Clone, Copy, Debug)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub advertised_min: i16,
    pub served_min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, advertised_min: i16, served_min: i16, max: i16) -> ApiSupport {
    ApiSupport {
        key,
        advertised_min,
        served_min,
        max,
    }
}

/// Kafka 4.4's ranges (what a Kafka 4.4 broker's ApiVersions response lists) for the APIs
/// sluice implements. A version above what kafka-protocol encodes is carried in-tree by
/// `newer_versions`. `compat-tests/kafka/compare-api-versions.sh` compares this table with a
/// running Kafka's in CI; `compat-tests/FINDINGS.md` lists what differs from Kafka 4.4 and why.
pub const SUPPORTED_APIS: &[ApiSupport] = &[
    api(ApiKey::Produce, 0, 3, 13),
    api(ApiKey::Fetch, 4, 4, 18),
    api(ApiKey::ListOffsets, 1, 1, 11),
    api(ApiKey::Metadata, 0, 0, 13),
    api(ApiKey::OffsetCommit, 2, 2, 10),
    api(ApiKey::OffsetFetch, 1, 1, 10),
    api(ApiKey::FindCoordinator, 0, 0, 6),
    api(ApiKey::JoinGroup, 0, 0, 9),
    api(ApiKey::Heartbeat, 0, 0, 4),
    api(ApiKey::LeaveGroup, 0, 0, 5),
    api(ApiKey::SyncGroup, 0, 0, 5),
    api(ApiKey::DescribeGroups, 0, 0, 6),
    api(ApiKey::ListGroups, 0, 0, 5),
    api(ApiKey::SaslHandshake, 0, 0, 1),
    api(ApiKey::ApiVersions, 0, 0, 5),
    api(ApiKey::CreateTopics, 2, 2, 7),
    api(ApiKey::DeleteTopics, 1, 1, 6),
    api(ApiKey::InitProducerId, 0, 0, 5),
    api(ApiKey::DeleteRecords, 0, 0, 2),
    api(ApiKey::DescribeConfigs, 1, 1, 4),
    api(ApiKey::DescribeLogDirs, 1, 1, 5),
    api(ApiKey::AlterConfigs, 0, 0, 2),
    api(ApiKey::CreatePartitions, 0, 0, 3),
    api(ApiKey::IncrementalAlterConfigs, 0, 0, 1),
    api(ApiKey::DescribeCluster, 0, 0, 2),
    api(ApiKey::SaslAuthenticate, 0, 0, 2),
    api(ApiKey::DeleteGroups, 0, 0, 3),
    api(ApiKey::OffsetDelete, 0, 0, 0),
    api(ApiKey::DescribeTopicPartitions, 0, 0, 0),
    api(ApiKey::DescribeClientQuotas, 0, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0, 0),
    api(ApiKey::AddPartitionsToTxn, 0, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 0, 4),
    api(ApiKey::EndTxn, 0, 0, 5),
    api(ApiKey::WriteTxnMarkers, 1, 1, 2),
    api(ApiKey::TxnOffsetCommit, 0, 0, 6),
    api(ApiKey::DescribeAcls, 1, 1, 3),
    api(ApiKey::CreateAcls, 1, 1, 3),
    api(ApiKey::DeleteAcls, 1, 1, 3),
    api(ApiKey::ElectLeaders, 0, 0, 2),
    api(ApiKey::DescribeProducers, 0, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0, 0),
    api(ApiKey::ListTransactions, 0, 0, 2),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 0, 1),
    api(ApiKey::ListConfigResources, 0, 0, 1),
];

/// A feature (KIP-584) this broker supports and has finalized, as ApiVersions v3+ advertises
/// it: the supported levels, and the level in force cluster-wide (a single node decides it).
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    pub name: &'static str,
    pub supported_min: i16,
    pub supported_max: i16,
    pub finalized_level: i16,
}

/// The features sluice implements, advertised as Kafka 4.4 advertises them. A feature is listed
/// only when what it stands for works: `group.version` 1 is the KIP-848 consumer group protocol;
/// `transaction.version` 2 is KIP-890 part 2 (Produce v12+ and TxnOffsetCommit v5 add
/// partitions, EndTxn v5 bumps the epoch), which Java clients use only when it is finalized at 2.
pub const FEATURES: &[Feature] = &[
    Feature {
        name: "group.version",
        supported_min: 0,
        supported_max: 1,
        finalized_level: 1,
    },
    Feature {
        name: "transaction.version",
        supported_min: 0,
        supported_max: 2,
        finalized_level: 2,
    },
];

/// The epoch of the finalized features: Kafka's is the metadata log offset of their last change;
/// sluice's never change while it runs. Clients take finalized features only from an epoch of
/// 0 or more.
pub const FINALIZED_FEATURES_EPOCH: i64 = 0;

/// What one broker advertises and serves: `SUPPORTED_APIS`, or that table narrowed to what a
/// Kafka release's broker advertised (`VersionTable::emulating`). Built once at start-up;
/// ApiVersions (`advertised`, the v0 fallback) and the request path (`served_range`) read the
/// same one.
#[derive(Clone, Debug)]
pub struct VersionTable {
    pub(super) apis: Vec<ApiSupport>,
    /// The emulated release's column in `kafka_releases`, if any.
    pub(super) release: Option<usize>,
}

impl VersionTable {
    /// sluice's own table, as implemented.
    pub fn sluice() -> VersionTable {
        VersionTable {
            apis: SUPPORTED_APIS.to_vec(),
            release: None,
        }
    }

    /// The served version range of an API key, or None when it is not served.
    pub fn served_range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.api(api_key).map(|a| (a.served_min, a.max))
    }

    /// The advertised version range of an API key, or None when it is not advertised.
    pub fn advertised_range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.api(api_key).map(|a| (a.advertised_min, a.max))
    }

    /// `(api_key, min, max)` triples for the ApiVersions response.
    pub fn advertised(&self) -> impl Iterator<Item = (i16, i16, i16)> + '_ {
        self.apis
            .iter()
            .map(|a| (a.key as i16, a.advertised_min, a.max))
    }

    fn api(&self, api_key: i16) -> Option<&ApiSupport> {
        self.apis.iter().find(|a| a.key as i16 == api_key)
    }
}

impl Default for VersionTable {
    fn default() -> Self {
        VersionTable::sluice()
    }
}

#[cfg(test)]
mod tests {
    use super::super::newer_versions::in_tree_max;
    use super::*;

    #[test]
    fn every_served_version_has_an_encoding() {
        // `valid_versions` is the API's range; kafka-protocol's request struct may stop short
        // of it (OffsetCommit and OffsetFetch v10), which `newer_versions` checks row by row.
        for a in SUPPORTED_APIS {
            let codec = a.key.valid_versions();
            let max = in_tree_max(a.key).unwrap_or(codec.max);
            assert!(a.served_min >= codec.min && a.max <= max, "{:?}", a.key);
            assert!(a.advertised_min <= a.served_min);
        }
    }
}
