//! The context one group operation works with: the clock reading, the coordinator's settings,
//! and the store its records go to. Shared by the rebalance state machine and persistence.

use super::{GroupConfig, OffsetStore};

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
}
