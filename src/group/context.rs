//! The context one group operation works with: the clock reading, the coordinator's settings,
//! and the store its records go to. Shared by the rebalance state machine and persistence.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::{GroupConfig, OffsetStore, StoreError};
use crate::config::group::configs::GroupOverrides;

/// One `__consumer_offsets` record: key and value (None for a tombstone).
pub(crate) type Record = (Bytes, Option<Bytes>);

/// Appends one group's records, mapping a failure to the error its client sees. Kafka's
/// `appendGroupMetadataErrorToResponseError`: a record that does not fit is an internal error,
/// anything else a coordinator that is not available for now (clients retry that).
pub(crate) fn append(
    store: &dyn OffsetStore,
    group_id: &str,
    records: Vec<Record>,
) -> Result<(), ResponseError> {
    store.append(group_id, records).map_err(|e| {
        tracing::warn!(group_id, "cannot store __consumer_offsets records: {e}");
        match e {
            StoreError::TooLarge { .. } => ResponseError::UnknownServerError,
            StoreError::ProducerFenced => ResponseError::InvalidProducerEpoch,
            StoreError::CoordinatorFenced | StoreError::Io(_) => {
                ResponseError::CoordinatorNotAvailable
            }
        }
    })
}

/// The clock reading, settings and store one operation works with.
pub(crate) struct Ctx<'a> {
    pub config: &'a GroupConfig,
    /// The group configs of the groups that have any (`group_configs.rs`), as they were when the
    /// operation began.
    pub overrides: Arc<HashMap<String, GroupOverrides>>,
    pub now_ms: i64,
    /// Where group-metadata records go; written under the coordinator's lock, like offsets.
    pub store: &'a dyn OffsetStore,
}

impl Ctx<'_> {
    /// A deadline `delay_ms` from now. A delay of zero (or a client's negative rebalance timeout)
    /// still lands strictly after now, so a timer that re-arms itself waits for the next tick
    /// instead of spinning inside this one.
    pub(crate) fn after(&self, delay_ms: i64) -> i64 {
        self.now_ms.saturating_add(delay_ms.max(1))
    }

    pub(crate) fn session_deadline(&self, session_timeout_ms: i32) -> i64 {
        self.after(i64::from(session_timeout_ms))
    }

    /// The session timeout of a consumer group's consumer-protocol members: the group's
    /// `consumer.session.timeout.ms`, else `group.consumer.session.timeout.ms`.
    pub(crate) fn consumer_session_timeout_ms(&self, group_id: &str) -> i32 {
        self.group_value(group_id, |o| o.consumer_session_timeout_ms)
            .unwrap_or(self.config.consumer_session_timeout_ms)
    }

    /// The heartbeat interval a consumer group's members are told: the group's
    /// `consumer.heartbeat.interval.ms`, else `group.consumer.heartbeat.interval.ms`.
    pub(crate) fn consumer_heartbeat_interval_ms(&self, group_id: &str) -> i32 {
        self.group_value(group_id, |o| o.consumer_heartbeat_interval_ms)
            .unwrap_or(self.config.consumer_heartbeat_interval_ms)
    }

    /// The least time between two target assignments of a consumer group: the group's
    /// `consumer.assignment.interval.ms`, else `group.consumer.assignment.interval.ms`.
    pub(crate) fn consumer_assignment_interval_ms(&self, group_id: &str) -> i32 {
        self.group_value(group_id, |o| o.consumer_assignment_interval_ms)
            .unwrap_or(self.config.consumer_assignment_interval_ms)
    }

    fn group_value(
        &self,
        group_id: &str,
        value: impl Fn(&GroupOverrides) -> Option<i32>,
    ) -> Option<i32> {
        self.overrides.get(group_id).and_then(value)
    }
}
