//! `throttle_time_ms` on every response that has it. Kafka sets the throttle time of a quota
//! violation on any response whose version carries the field (KIP-219), so the setter covers
//! every response type of kafka-protocol that declares one, not only the APIs sluice serves
//! today. A version without the field simply does not encode it (Kafka marks it ignorable, and
//! so does kafka-protocol); the connection is muted all the same.

use kafka_protocol::messages::ResponseKind;

macro_rules! set_throttle_time_ms {
    ($body:expr, $throttle_ms:expr; $($variant:ident),* $(,)?) => {
        match $body {
            $(ResponseKind::$variant(response) => response.throttle_time_ms = $throttle_ms,)*
            // SaslHandshake, SaslAuthenticate, the KRaft-internal and share-group-state
            // responses have no throttle time.
            _ => {}
        }
    };
}

/// Sets `throttle_time_ms` on `body` when its type has the field.
pub fn set_throttle_time_ms(body: &mut ResponseKind, throttle_ms: i32) {
    set_throttle_time_ms!(body, throttle_ms;
        Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch, FindCoordinator,
        JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups, ApiVersions,
        CreateTopics, DeleteTopics, DeleteRecords, InitProducerId, OffsetForLeaderEpoch,
        AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeAcls, CreateAcls,
        DeleteAcls, DescribeConfigs, AlterConfigs, AlterReplicaLogDirs, DescribeLogDirs,
        CreatePartitions, CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken,
        DescribeDelegationToken, DeleteGroups, ElectLeaders, IncrementalAlterConfigs,
        AlterPartitionReassignments, ListPartitionReassignments, OffsetDelete,
        DescribeClientQuotas, AlterClientQuotas, DescribeUserScramCredentials,
        AlterUserScramCredentials, AlterPartition, UpdateFeatures, FetchSnapshot, DescribeCluster,
        DescribeProducers, BrokerRegistration, BrokerHeartbeat, UnregisterBroker,
        DescribeTransactions, ListTransactions, AllocateProducerIds, ConsumerGroupHeartbeat,
        ConsumerGroupDescribe, ControllerRegistration, GetTelemetrySubscriptions, PushTelemetry,
        AssignReplicasToDirs, ListConfigResources, DescribeTopicPartitions, ShareGroupHeartbeat,
        ShareGroupDescribe, ShareFetch, ShareAcknowledge, AddRaftVoter, RemoveRaftVoter,
        UpdateRaftVoter, DescribeShareGroupOffsets, AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, DescribeClientQuotasResponse, MetadataResponse,
    };

    fn throttle_of(body: ResponseKind, api_key: ApiKey, version: i16) -> Option<i32> {
        let mut body = body;
        set_throttle_time_ms(&mut body, 1234);
        let mut buf = bytes::BytesMut::new();
        body.encode(&mut buf, version).unwrap();
        let decoded = ResponseKind::decode(api_key, &mut buf.freeze(), version).unwrap();
        match decoded {
            ResponseKind::Metadata(r) => Some(r.throttle_time_ms),
            ResponseKind::ApiVersions(r) => Some(r.throttle_time_ms),
            ResponseKind::DescribeClientQuotas(r) => Some(r.throttle_time_ms),
            _ => None,
        }
    }

    #[test]
    fn sets_the_field_where_the_version_has_it() {
        let metadata = || ResponseKind::Metadata(MetadataResponse::default());
        assert_eq!(throttle_of(metadata(), ApiKey::Metadata, 12), Some(1234));
        // Metadata v0-2 has no throttle time: it is left out, not an encoding error.
        assert_eq!(throttle_of(metadata(), ApiKey::Metadata, 2), Some(0));
        let versions = ResponseKind::ApiVersions(ApiVersionsResponse::default());
        assert_eq!(throttle_of(versions, ApiKey::ApiVersions, 3), Some(1234));
        let quotas = ResponseKind::DescribeClientQuotas(DescribeClientQuotasResponse::default());
        assert_eq!(
            throttle_of(quotas, ApiKey::DescribeClientQuotas, 1),
            Some(1234)
        );
    }
}
