//! The coordinator's timers: a transaction open longer than its timeout is aborted by the
//! broker (its epoch fenced first, so the producer's later requests fail with PRODUCER_FENCED
//! or INVALID_PRODUCER_EPOCH), and a transactional id with no transaction open, idle for
//! `transactional.id.expiration.ms`, is forgotten (a tombstone in `__transaction_state`).

use super::state::TxnState;
use super::{lock, Entry, TransactionCoordinator, SERVER_TRANSACTION_VERSION};

impl TransactionCoordinator {
    /// Kafka's `abortTimedOutTransactions`: every Ongoing transaction whose start plus timeout
    /// has passed, with no transition pending.
    pub fn abort_timed_out_transactions(&self) {
        if self.check_active().is_err() {
            return;
        }
        let now_ms = self.clock.now_ms();
        let candidates: Vec<(String, Entry)> = self
            .lock_map()
            .iter()
            .map(|(id, entry)| (id.clone(), entry.clone()))
            .collect();
        for (id, entry) in candidates {
            let fenced = {
                let mut metadata = lock(&entry);
                let record = &metadata.record;
                let timed_out = record.state == TxnState::Ongoing
                    && record.start_ms.saturating_add(i64::from(record.timeout_ms)) < now_ms;
                if !timed_out || metadata.pending.is_some() {
                    continue;
                }
                match metadata.prepare_fence_producer_epoch() {
                    Ok(fenced) => fenced,
                    Err(_) => continue,
                }
            };
            tracing::info!(transactional_id = %id, producer_id = fenced.producer_id, "aborting a transaction past its timeout");
            if let Err(error) = self.end_transaction(
                &id,
                fenced.producer_id,
                fenced.producer_epoch,
                false,
                false,
                SERVER_TRANSACTION_VERSION,
            ) {
                tracing::warn!(transactional_id = %id, ?error, "aborting a timed-out transaction failed; retried later");
            }
        }
    }

    /// Kafka's `removeExpiredTransactionalIds`: ids in Empty, CompleteCommit or CompleteAbort
    /// whose last update is `transactional.id.expiration.ms` old get a tombstone and go.
    pub fn remove_expired_ids(&self) {
        if self.check_active().is_err() {
            return;
        }
        let now_ms = self.clock.now_ms();
        let expiration_ms = self.config.id_expiration_ms;
        let candidates: Vec<(String, Entry)> = self
            .lock_map()
            .iter()
            .map(|(id, entry)| (id.clone(), entry.clone()))
            .collect();
        for (id, entry) in candidates {
            {
                let mut metadata = lock(&entry);
                let record = &metadata.record;
                let expired = matches!(
                    record.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) && record.last_update_ms.saturating_add(expiration_ms) <= now_ms;
                if !expired || metadata.pending.is_some() || metadata.prepare_dead().is_err() {
                    continue;
                }
            }
            let written = self.write(&id, None);
            let mut map = self.lock_map();
            let mut metadata = lock(&entry);
            match written {
                Ok(()) => {
                    tracing::info!(transactional_id = %id, "transactional id expired");
                    map.remove(&id);
                }
                Err(_) => metadata.abandon(),
            }
        }
    }
}
