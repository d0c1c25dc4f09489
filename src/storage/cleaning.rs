//! When the compacted logs are cleaned, and where each one's cleaning has reached: Kafka's
//! `LogCleanerManager` in small. Every `log.cleaner.backoff.ms` one pass gives each partition of
//! each topic whose `cleanup.policy` includes `compact` a chance at one round (`log::cleaner`
//! decides whether it is due); the first dirty offset of each is remembered in
//! `cleaner-offset-checkpoint`, written atomically after a pass that cleaned anything.
//!
//! As in Kafka, a round takes its partition's lock only to plan and to swap the rewritten
//! segments in; reading the old segments and writing the new ones happens without it, so
//! appends and fetches carry on meanwhile.

use std::sync::atomic::Ordering;

use super::{LogManager, Partition, PartitionError};
use crate::log::checkpoint::write_checkpoint;
use crate::log::{CleanOutcome, CleanerConfig};

use crate::disk::names::CLEANER_OFFSET_CHECKPOINT;

impl LogManager {
    /// One pass of the log cleaner at `now_ms`; returns the number of rounds that ran.
    pub fn clean_logs(&self, now_ms: i64) -> usize {
        if !self.config.log_cleaner_enable || self.is_offline() {
            return 0;
        }
        // One pass at a time: the background task's and `RunningBroker::run_cleaner_pass`'s.
        let _pass = self.cleaner_pass.lock().unwrap_or_else(|e| e.into_inner());
        let mut rounds = 0;
        for topic in self.topics() {
            let Some(cleaner) = topic.settings().cleaner else {
                continue;
            };
            for partition in &topic.partitions {
                if self.cleaner_stopping.load(Ordering::Relaxed) {
                    break;
                }
                let key = (topic.name.clone(), partition.index);
                let checkpoint = self.cleaner_checkpoint(&key);
                match clean_partition(partition, &cleaner, checkpoint, now_ms) {
                    Ok(Some(outcome)) => {
                        self.cleaner_checkpoints
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key, outcome.next_dirty_offset);
                        rounds += 1;
                    }
                    Ok(None) => {}
                    Err(e) => tracing::error!(partition = %partition, "cleaning failed: {e}"),
                }
            }
        }
        if rounds > 0 {
            if let Err(e) = self.write_cleaner_checkpoint() {
                tracing::error!("writing {CLEANER_OFFSET_CHECKPOINT} failed: {e}");
            }
        }
        rounds
    }

    /// Ends the current pass after the partition it is cleaning, and stops later ones: shutdown
    /// then waits for one round at most.
    pub fn stop_cleaning(&self) {
        self.cleaner_stopping.store(true, Ordering::Relaxed);
    }

    /// Forgets a deleted topic's cleaning, so a new topic of the same name starts from offset 0.
    pub(super) fn forget_cleaner_checkpoints(&self, topic: &str) {
        self.cleaner_checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(name, _), _| name != topic);
        if let Err(e) = self.write_cleaner_checkpoint() {
            tracing::error!("writing {CLEANER_OFFSET_CHECKPOINT} failed: {e}");
        }
    }

    fn cleaner_checkpoint(&self, key: &(String, i32)) -> Option<i64> {
        self.cleaner_checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
    }

    /// The first dirty offset of every compacted partition that still exists.
    fn write_cleaner_checkpoint(&self) -> std::io::Result<()> {
        let entries: Vec<(String, i32, i64)> = {
            let checkpoints = self
                .cleaner_checkpoints
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.topics()
                .iter()
                .flat_map(|topic| topic.partitions.iter())
                .filter_map(|p| {
                    let offset = checkpoints.get(&(p.topic.clone(), p.index))?;
                    Some((p.topic.clone(), p.index, *offset))
                })
                .collect()
        };
        write_checkpoint(
            &self.disk,
            &self.log_dir.join(CLEANER_OFFSET_CHECKPOINT),
            &entries,
        )
    }
}

/// One round on one partition: planned and swapped in under the partition's lock, written
/// without it. None when it was not due or nothing could be swapped in.
fn clean_partition(
    partition: &Partition,
    cleaner: &CleanerConfig,
    checkpoint: Option<i64>,
    now_ms: i64,
) -> Result<Option<CleanOutcome>, PartitionError> {
    let planned = partition.with_state(|state| {
        // A checkpoint past the log end is stale (recovery truncated the log below it): start
        // from the beginning, as Kafka does with an out-of-range checkpoint.
        let first_dirty = checkpoint.filter(|o| *o <= state.log.log_end_offset());
        let producer_last_offsets = state
            .producers
            .entries()
            .filter_map(|entry| entry.batches.back().map(|b| b.last_offset))
            .collect();
        Ok(state.log.plan_cleaning(
            first_dirty.unwrap_or(0),
            cleaner,
            producer_last_offsets,
            state.last_stable_offset(),
            now_ms,
        )?)
    })?;
    let Some(round) = planned else {
        return Ok(None);
    };
    match round.write()? {
        Some(cleaned) => {
            partition.with_state(|state| Ok(state.log.finish_cleaning(cleaned, now_ms)?))
        }
        None => Ok(None),
    }
}
