//! When the compacted logs are cleaned, and where each one's cleaning has reached: Kafka's
//! `LogCleanerManager` in small. Every `log.cleaner.backoff.ms` one pass gives each partition of
//! each topic whose `cleanup.policy` includes `compact` a chance at one round (`log::cleaner`
//! decides whether it is due); the first dirty offset of each is remembered in
//! `cleaner-offset-checkpoint`, written atomically after a pass that cleaned anything.
//!
//! A round holds its partition's lock while it rewrites segments, so appends and reads of that
//! one partition wait for it; other partitions are untouched. Kafka cleans without the lock and
//! takes it only for the swap.

use super::LogManager;
use crate::log::checkpoint::write_checkpoint;

pub(super) const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

impl LogManager {
    /// One pass of the log cleaner at `now_ms`; returns the number of rounds that ran.
    pub fn clean_logs(&self, now_ms: i64) -> usize {
        if !self.config.log_cleaner_enable {
            return 0;
        }
        let mut rounds = 0;
        for topic in self.topics() {
            let Some(cleaner) = topic.settings().cleaner else {
                continue;
            };
            for partition in &topic.partitions {
                let key = (topic.name.clone(), partition.index);
                let checkpoint = self.cleaner_checkpoint(&key);
                let result = partition.with_log(|log| {
                    // An offset past the log end belongs to a deleted topic of the same name.
                    let first_dirty = checkpoint.filter(|o| *o <= log.log_end_offset());
                    log.clean(first_dirty.unwrap_or(0), &cleaner, now_ms)
                });
                match result {
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
        write_checkpoint(&self.log_dir.join(CLEANER_OFFSET_CHECKPOINT), &entries)
    }
}
