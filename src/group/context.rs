//! The context one group operation works with: the clock reading, the coordinator's settings,
//! and the store its records go to. Shared by the rebalance state machine and persistence.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::{GroupConfig, OffsetStore, StoreError};

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

    /// The session timeout of a consumer group's consumer-protocol members.
    pub(crate) fn consumer_session_timeout_ms(&self, _group_id: &str) -> i32 {
        self.config.consumer_session_timeout_ms
    }

    /// The least time between two target assignments of a consumer group.
    pub(crate) fn consumer_assignment_interval_ms(&self, _group_id: &str) -> i32 {
        self.config.consumer_assignment_interval_ms
    }
}
