//! The transaction coordinator of a single broker (Kafka's `TransactionCoordinator` and
//! `TransactionStateManager`): every transactional id's state machine (`state.rs`), made durable
//! in `__transaction_state` in Kafka's record formats (`log_record.rs`) through a
//! [`TxnLogStore`], and the markers that end transactions in the data partitions, written
//! through a [`MarkerSink`]. It serves InitProducerId with a transactional id (`init.rs`),
//! AddPartitionsToTxn and AddOffsetsToTxn and KIP-890's verification of produced batches
//! (`add.rs`), EndTxn in both transaction versions (`end.rs`), ListTransactions and
//! DescribeTransactions (`admin.rs`), and aborts transactions past their timeout and forgets
//! idle ids (`expire.rs`).
//!
//! It never touches files or partitions itself, and it does not own request framing or the
//! topic registry (the caller says which partitions exist). Every error it answers is Kafka's
//! code for the case.
//!
//! Concurrency: each id's metadata has its own lock, and a map lock guards only lookups. A
//! transition is prepared under the id's lock (marked pending), written to the log without
//! it, then completed under it; while it is pending, other requests for the id are answered
//! CONCURRENT_TRANSACTIONS, as in Kafka. Markers are written without any of the coordinator's
//! locks, while the transaction sits in PrepareCommit or PrepareAbort; the coordinator never
//! calls the group coordinator or a partition while holding a lock of its own.
//!
//! Recovery: `new` replays `__transaction_state` (later records win, tombstones delete); the
//! timer task's first pass re-sends the markers of every transaction found in PrepareCommit or
//! PrepareAbort, and ongoing transactions keep their start time, so each one ends committed or
//! aborted (by the producer, or by the timeout).

mod add;
mod admin;
mod end;
mod expire;
mod init;
pub mod log_record;
pub mod state;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::watch;

use crate::config::Config;
use crate::record_batch::control::TxnMarker;
use crate::time::Clock;
use state::{TxnMetadata, TxnRecord};

pub use add::PartitionCheck;
pub use admin::{ListedTransaction, TransactionDescription};
pub use state::{TxnState, TV_0, TV_2};

/// The transaction version this broker finalizes (the `transaction.version` feature level it
/// advertises in ApiVersions): the coordinator's own aborts (timeouts, fencing) follow it.
pub const SERVER_TRANSACTION_VERSION: i16 = TV_2;

/// Coordinator settings, with Kafka's names.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`
    pub remove_expired_interval_ms: i64,
}

impl TxnConfig {
    pub fn from_broker(config: &Config) -> TxnConfig {
        TxnConfig {
            max_timeout_ms: config.transaction_max_timeout_ms,
            id_expiration_ms: config.transactional_id_expiration_ms,
            abort_interval_ms: config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            remove_expired_interval_ms: config
                .transaction_remove_expired_transaction_cleanup_interval_ms,
        }
    }
}

/// Where the coordinator's state is made durable: `__transaction_state`, implemented by
/// `storage`, and the producer-id allocator.
pub trait TxnLogStore: Send + Sync {
    /// How many partitions `__transaction_state` has (or will have when created).
    fn partition_count(&self) -> i32;
    /// Durably appends one record (a tombstone when `value` is None) to `partition`.
    fn append(&self, partition: i32, key: Bytes, value: Option<Bytes>) -> Result<(), String>;
    /// Every record ever appended, in log order.
    fn load(&self) -> Result<Vec<(Bytes, Option<Bytes>)>, String>;
    /// A producer id never handed out before.
    fn next_producer_id(&self) -> Result<i64, String>;
    /// The coordinator epoch of `partition` (its leader epoch), written into every marker.
    fn coordinator_epoch(&self, partition: i32) -> i32;
}

/// What became of one marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerOutcome {
    Written,
    /// The partition no longer exists: nothing is left to end there.
    Gone,
    /// The partition refused it (its producer moved to a newer epoch, or a newer coordinator
    /// wrote there): this coordinator has nothing left to end there either.
    Refused,
    /// It could not be stored now: try again later.
    Retry,
}

/// Writes a COMMIT or ABORT marker for the producer to one partition (`storage`'s
/// `MarkerWriter`, which hands `__consumer_offsets` partitions to the group coordinator), under
/// the transaction's version (KIP-1228: it decides which marker epochs the partition takes).
pub trait MarkerSink: Send + Sync {
    fn write_marker(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: TxnMarker,
        transaction_version: i8,
    ) -> MarkerOutcome;
}

type Entry = Arc<Mutex<TxnMetadata>>;

pub struct TransactionCoordinator {
    config: TxnConfig,
    clock: Arc<dyn Clock>,
    log: Arc<dyn TxnLogStore>,
    markers: Arc<dyn MarkerSink>,
    txns: Mutex<HashMap<String, Entry>>,
    /// Set by `shutdown`: every request is then answered NOT_COORDINATOR.
    shut_down: std::sync::atomic::AtomicBool,
}

impl TransactionCoordinator {
    /// Builds the coordinator from the records of `__transaction_state`.
    pub fn new(
        config: TxnConfig,
        clock: Arc<dyn Clock>,
        log: Arc<dyn TxnLogStore>,
        markers: Arc<dyn MarkerSink>,
    ) -> Result<Arc<TransactionCoordinator>, String> {
        let mut loaded: HashMap<String, TxnRecord> = HashMap::new();
        for (key, value) in log.load()? {
            let id = log_record::decode_key(&key)?;
            match value {
                Some(value) => {
                    loaded.insert(id, log_record::decode_value(&value)?);
                }
                None => {
                    loaded.remove(&id);
                }
            }
        }
        tracing::info!(
            transactional_ids = loaded.len(),
            "loaded __transaction_state"
        );
        let txns = loaded
            .into_iter()
            .map(|(id, record)| {
                let entry = Arc::new(Mutex::new(TxnMetadata::loaded(&id, record)));
                (id, entry)
            })
            .collect();
        Ok(Arc::new(TransactionCoordinator {
            config,
            clock,
            log,
            markers,
            txns: Mutex::new(txns),
            shut_down: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The `__transaction_state` partition of a transactional id (Kafka's placement).
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        let partitions = self.log.partition_count().max(1);
        let hash = java_string_hash(transactional_id);
        // Kafka's `Utils.abs`: i32::MIN maps to 0.
        let abs = if hash == i32::MIN { 0 } else { hash.abs() };
        abs % partitions
    }

    /// The id's metadata, if it is known.
    fn get(&self, transactional_id: &str) -> Option<Entry> {
        self.lock_map().get(transactional_id).cloned()
    }

    fn lock_map(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.txns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_active(&self) -> Result<(), ResponseError> {
        if self.shut_down.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ResponseError::NotCoordinator);
        }
        Ok(())
    }

    /// Writes a prepared transition's record; a failure is Kafka's answer to a failed append
    /// to the transaction log (NOT_COORDINATOR: the client looks the coordinator up again).
    fn write(
        &self,
        transactional_id: &str,
        record: Option<&TxnRecord>,
    ) -> Result<(), ResponseError> {
        let key = log_record::encode_key(transactional_id).map_err(|e| {
            tracing::error!(transactional_id, "{e}");
            ResponseError::InvalidRequest
        })?;
        let value = record.map(log_record::encode_value);
        let partition = self.partition_for(transactional_id);
        self.log.append(partition, key, value).map_err(|e| {
            tracing::warn!(
                transactional_id,
                partition,
                "cannot write __transaction_state: {e}"
            );
            ResponseError::NotCoordinator
        })
    }

    /// Writes `record` for the id and completes the transition, or abandons it.
    fn persist(&self, entry: &Entry, record: TxnRecord) -> Result<TxnRecord, ResponseError> {
        let id = lock(entry).transactional_id.clone();
        let written = self.write(&id, Some(&record));
        let mut metadata = lock(entry);
        match written {
            Ok(()) => {
                metadata.complete(record.clone());
                Ok(record)
            }
            Err(error) => {
                metadata.abandon();
                Err(error)
            }
        }
    }

    /// Drives time: aborts transactions past their timeout, retries markers left unwritten,
    /// and forgets expired ids, each on its own interval; the first pass at once, which
    /// completes what start-up found half done.
    pub async fn run_timers(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let abort_every = Duration::from_millis(self.config.abort_interval_ms.max(1) as u64);
        let expire_every =
            Duration::from_millis(self.config.remove_expired_interval_ms.max(1) as u64);
        let mut abort = tokio::time::interval(abort_every);
        let mut expire =
            tokio::time::interval_at(tokio::time::Instant::now() + expire_every, expire_every);
        abort.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        expire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = abort.tick() => {
                    let coordinator = self.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        coordinator.complete_unfinished();
                        coordinator.abort_timed_out_transactions();
                    }).await;
                }
                _ = expire.tick() => {
                    let coordinator = self.clone();
                    let _ = tokio::task::spawn_blocking(move || coordinator.remove_expired_ids()).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Broker shutdown: later requests are answered NOT_COORDINATOR.
    pub fn shutdown(&self) {
        self.shut_down
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A panic while a lock was held leaves the metadata as it was then; carrying on serves the
/// other ids.
fn lock(entry: &Entry) -> MutexGuard<'_, TxnMetadata> {
    entry.lock().unwrap_or_else(|e| e.into_inner())
}

/// Java's `String.hashCode`: 31-polynomial over UTF-16 code units, wrapping.
fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}
