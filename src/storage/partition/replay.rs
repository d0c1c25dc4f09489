//! Rebuilding a partition's producer state when its log is loaded (`docs/log-format.md` §13.5,
//! "Read"): the newest snapshot at or below the log end offset, then every batch after it
//! replayed as a replica would apply it, without checks: data batches into each producer's
//! sequence window and open transaction, markers ending transactions. When loading recovered a
//! segment, the snapshot must lie at or below that segment (newer ones are deleted), so the
//! replay also indexes again every transaction aborted in the recovered segments.

use std::path::Path;

use crate::log::{AbortedTxn, LogError, PartitionLog};
use crate::producer::{snapshot, ProducerStateManager};
use crate::record_batch::control::parse_marker;
use crate::record_batch::header::BatchHeader;

/// Bytes read per step while replaying batches into producer state.
const REPLAY_READ_BYTES: usize = 1 << 20;

pub(super) fn rebuild_producer_state(
    dir: &Path,
    log: &mut PartitionLog,
) -> Result<ProducerStateManager, LogError> {
    let log_end_offset = log.log_end_offset();
    let snapshot_limit = log.txn_index_rebuild_from().unwrap_or(log_end_offset);
    let (snapshot_offset, entries) = snapshot::load_latest(log.disk(), dir, snapshot_limit);
    let mut producers = ProducerStateManager::from_entries(entries);
    let mut offset = snapshot_offset.max(log.log_start_offset());
    while offset < log_end_offset {
        let records = log
            .read(offset, REPLAY_READ_BYTES, true, log_end_offset)?
            .records;
        let mut position = 0;
        let mut advanced = false;
        while let Ok(header) = BatchHeader::parse(&records[position..]) {
            let size = header.total_size();
            if size == 0 || position + size > records.len() {
                break;
            }
            if header.last_offset() >= offset {
                replay_batch(
                    log,
                    &mut producers,
                    &header,
                    &records[position..position + size],
                )?;
                offset = header.last_offset() + 1;
                advanced = true;
            }
            position += size;
        }
        if !advanced {
            break;
        }
    }
    log.txn_index_rebuilt();
    Ok(producers)
}

fn replay_batch(
    log: &mut PartitionLog,
    producers: &mut ProducerStateManager,
    header: &BatchHeader,
    batch: &[u8],
) -> Result<(), LogError> {
    if header.producer_id < 0 {
        return Ok(());
    }
    if !header.is_control() {
        producers.update(header, header.base_offset);
        return Ok(());
    }
    // An empty control batch (left by the cleaner) or a type other than COMMIT/ABORT marks
    // nothing.
    let Some(marker) = parse_marker(header, batch)? else {
        return Ok(());
    };
    let completed = producers.apply_marker(
        header.producer_id,
        header.producer_epoch,
        marker.commit,
        marker.coordinator_epoch,
        header.base_offset,
        header.max_timestamp,
    );
    if let Some(completed) = completed.filter(|c| c.aborted) {
        log.index_replayed_aborted_txn(&AbortedTxn {
            producer_id: completed.producer_id,
            first_offset: completed.first_offset,
            last_offset: completed.last_offset,
            last_stable_offset: producers.last_stable_offset_after(&completed),
        })?;
    }
    Ok(())
}
