//! The broker's periodic work on every partition: flushes that `flush.ms` makes due, delete
//! retention, expiry of idle idempotent producers, and the log directory's checkpoint files
//! (recovery points, high watermarks, log start offsets), read back at start-up.

use std::collections::HashMap;

use super::LogManager;
use crate::disk::names::{
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
};
use crate::disk::Disk;
use crate::log::checkpoint::write_checkpoint;

// While the log directory is offline these passes do nothing: every partition would only
// refuse (and log) again; the failure was logged once when the directory went offline.
impl LogManager {
    /// Flushes logs whose `flush.ms` interval has passed (the flush scheduler's tick).
    pub fn flush_due(&self, now_ms: i64) {
        if self.is_offline() {
            return;
        }
        for partition in self.all_partitions() {
            if let Err(e) = partition.with_state(|state| Ok(state.log.flush_if_due(now_ms)?)) {
                tracing::error!(partition = %partition, "flush failed: {e}");
            }
        }
    }

    /// Deletes segments past their topic's retention (Kafka's retention check), and any whose
    /// `.deleted` files have waited `file.delete.delay.ms`. Returns the segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> usize {
        if self.is_offline() {
            return 0;
        }
        let mut deleted = 0;
        for topic in self.topics() {
            let retention = topic.settings().retention;
            for partition in &topic.partitions {
                match partition.enforce_retention(&retention, now_ms) {
                    Ok(count) => deleted += count,
                    Err(e) => tracing::error!(partition = %partition, "retention failed: {e}"),
                }
            }
        }
        if deleted > 0 {
            tracing::info!(segments = deleted, "deleted segments past retention");
            if let Err(e) = self.write_checkpoints() {
                tracing::error!("writing checkpoints after retention failed: {e}");
            }
        }
        deleted
    }

    /// Forgets idempotent producers idle for `producer.id.expiration.ms`.
    pub fn expire_producers(&self, now_ms: i64) {
        let expiration_ms = self.config.producer_id_expiration_ms;
        for partition in self.all_partitions() {
            partition.expire_producers(now_ms, expiration_ms);
        }
    }

    /// Writes the recovery-point, high-watermark and log-start-offset checkpoints (atomically,
    /// fsynced), with Kafka's entries: every log in the first two, and in the last only the logs
    /// whose log start offset lies above their first segment's base offset (for the others
    /// loading finds it from the segments).
    pub fn write_checkpoints(&self) -> std::io::Result<()> {
        if self.disk.is_offline() {
            // Offline partitions answer no offsets: an empty checkpoint would lose them.
            return Err(Disk::offline_error());
        }
        let _writing = self
            .checkpoint_write
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut recovery = Vec::new();
        let mut high_watermarks = Vec::new();
        let mut starts = Vec::new();
        for partition in self.all_partitions() {
            if let Ok(offsets) = partition.checkpoint_offsets() {
                let (topic, index) = (partition.topic.clone(), partition.index);
                recovery.push((topic.clone(), index, offsets.recovery_point));
                high_watermarks.push((topic.clone(), index, offsets.high_watermark));
                // Kafka lists only logs whose start has moved past their first segment.
                if offsets.log_start_offset > offsets.first_segment_base_offset {
                    starts.push((topic, index, offsets.log_start_offset));
                }
            }
        }
        write_checkpoint(
            &self.disk,
            &self.log_dir.join(RECOVERY_POINT_CHECKPOINT),
            &recovery,
        )?;
        write_checkpoint(
            &self.disk,
            &self.log_dir.join(REPLICATION_OFFSET_CHECKPOINT),
            &high_watermarks,
        )?;
        write_checkpoint(
            &self.disk,
            &self.log_dir.join(LOG_START_OFFSET_CHECKPOINT),
            &starts,
        )
    }
}

pub(super) fn checkpoint_map(
    entries: std::io::Result<Vec<(String, i32, i64)>>,
) -> HashMap<(String, i32), i64> {
    match entries {
        Ok(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), o)).collect(),
        Err(e) => {
            // Kafka resets an unreadable checkpoint: recovery starts from offset 0.
            tracing::warn!("unreadable checkpoint, recovering from the start: {e}");
            HashMap::new()
        }
    }
}
