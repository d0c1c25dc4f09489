//! What a refused check answers with, and what `checks::before` takes out of a request for
//! `checks::after` to answer as errors.

use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

pub(crate) const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
pub(crate) const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
pub(crate) const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;
pub(crate) const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;

/// What `before` took out of a request, to be answered as errors by `after`.
#[derive(Default)]
pub enum Denied {
    #[default]
    Nothing,
    CreateTopics(Vec<create_topics_response::CreatableTopicResult>),
    DeleteTopics(Vec<delete_topics_response::DeletableTopicResult>),
    CreatePartitions(Vec<create_partitions_response::CreatePartitionsTopicResult>),
    DeleteRecords(Vec<delete_records_response::DeleteRecordsTopicResult>),
    ListOffsets(Vec<list_offsets_response::ListOffsetsTopicResponse>),
    AlterConfigs(Vec<alter_configs_response::AlterConfigsResourceResponse>),
    IncrementalAlterConfigs(Vec<incremental_alter_configs_response::AlterConfigsResourceResponse>),
    DescribeConfigs(Vec<describe_configs_response::DescribeConfigsResult>),
    OffsetCommit(Vec<offset_commit_response::OffsetCommitResponseTopic>),
    OffsetDelete(Vec<offset_delete_response::OffsetDeleteResponseTopic>),
    DeleteGroups(Vec<delete_groups_response::DeletableGroupResult>),
    /// Described groups not authorized, and whether operations were asked for.
    DescribeGroups(Vec<GroupId>, bool),
    ConsumerGroupDescribe(Vec<GroupId>, bool),
    /// OffsetFetch: topics not described are refused when `named`, else dropped; `by_id` (v10+):
    /// a topic without a name is an id that names no topic, answered UNKNOWN_TOPIC_ID as it is.
    OffsetFetch {
        named: bool,
        by_id: bool,
    },
    FindCoordinator(Vec<find_coordinator_response::Coordinator>),
    ListGroups,
    DescribeCluster(bool),
    /// Refused entries, and the request's order to answer them in.
    DescribeProducers {
        refused: Vec<describe_producers_response::TopicResponse>,
        order: Vec<TopicName>,
    },
    DescribeTransactions {
        refused: Vec<describe_transactions_response::TransactionState>,
        order: Vec<TransactionalId>,
    },
    ListTransactions,
}
