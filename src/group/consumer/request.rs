//! What a ConsumerGroupHeartbeat asks and answers, owned and with its nulls kept (None means
//! "unchanged since the last heartbeat"), the error answered to the whole request with Kafka's
//! message, and the context one change to a group works with.

use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::reconcile::Owned;
use crate::group::context::Ctx;
use crate::group::topics::TopicImage;

/// An error answered to the whole request, with Kafka's message.
#[derive(Debug)]
pub(crate) struct GroupError {
    pub error: ResponseError,
    pub message: Option<String>,
}

impl GroupError {
    pub(crate) fn new(error: ResponseError, message: impl Into<String>) -> GroupError {
        GroupError {
            error,
            message: Some(message.into()),
        }
    }
    pub(crate) fn bare(error: ResponseError) -> GroupError {
        GroupError {
            error,
            message: None,
        }
    }
}

/// The request's fields, owned, with nulls kept as None.
pub(crate) struct Heartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub topic_names: Option<Vec<String>>,
    pub topic_regex: Option<String>,
    pub assignor: Option<String>,
    pub owned: Owned,
    pub client_id: String,
    pub client_host: String,
}

impl Heartbeat {
    pub(crate) fn new(
        r: &ConsumerGroupHeartbeatRequest,
        client_id: &str,
        client_host: &str,
    ) -> Heartbeat {
        Heartbeat {
            group_id: r.group_id.to_string(),
            member_id: r.member_id.to_string(),
            member_epoch: r.member_epoch,
            instance_id: r.instance_id.as_ref().map(|s| s.to_string()),
            rack_id: r.rack_id.as_ref().map(|s| s.to_string()),
            rebalance_timeout_ms: r.rebalance_timeout_ms,
            topic_names: r
                .subscribed_topic_names
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.to_string()).collect()),
            topic_regex: r.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
            assignor: r.server_assignor.as_ref().map(|s| s.to_string()),
            owned: r.topic_partitions.as_ref().map(|tps| {
                tps.iter()
                    .map(|tp| (tp.topic_id, tp.partitions.clone()))
                    .collect()
            }),
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
        }
    }

    /// Kafka's full request: everything a join carries is set.
    pub(crate) fn is_full(&self) -> bool {
        self.rebalance_timeout_ms != -1
            && (self.topic_names.is_some() || self.topic_regex.is_some())
            && self.owned.is_some()
    }
}

/// What the heartbeat answers on success.
pub(crate) struct Answer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<Vec<(Uuid, Vec<i32>)>>,
}

/// What one group change works with.
pub(crate) struct Step<'a> {
    pub ctx: &'a Ctx<'a>,
    pub topics: &'a dyn TopicImage,
    /// The topics the requesting principal may describe (all, without ACLs): regular
    /// expressions resolve to those only.
    pub describable: &'a dyn Fn(&str) -> bool,
    pub group_id: &'a str,
}
