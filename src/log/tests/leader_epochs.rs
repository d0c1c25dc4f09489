//! The leader-epoch cache as the log keeps it: started by `become_leader` and by the first batch
//! of a new epoch, cut from the start when the log start offset rises (DeleteRecords,
//! retention) and from the end when recovery truncates the log, and read back on reopening.

use std::fs;

use super::*;
use crate::disk::Disk;
use crate::log::leader_epoch::{EpochEntry, LEADER_EPOCH_CHECKPOINT};
use crate::log::RetentionConfig;

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs
        .iter()
        .map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        })
        .collect()
}

fn checkpoint_text(dir: &Path) -> String {
    fs::read_to_string(dir.join(LEADER_EPOCH_CHECKPOINT)).expect("leader-epoch-checkpoint")
}

/// One-record batches, three to a segment.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 3 * batch(1, 0, 20).len() as u64,
        ..small_config()
    }
}

fn append(log: &mut PartitionLog, epoch: i32, count: usize) {
    for _ in 0..count {
        log.append(&batch(1, 1_000, 20), epoch, 0, false)
            .expect("append");
    }
}

#[test]
fn becoming_leader_and_new_epochs_write_the_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config(), true, 0);
    assert!(log.leader_epochs().is_empty());
    assert!(!dir.path().join(LEADER_EPOCH_CHECKPOINT).exists());
    log.become_leader(0).expect("leader");
    // What Kafka 4.1 writes for a partition it has just created.
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 0\n");
    append(&mut log, 0, 4);
    log.become_leader(0).expect("again");
    assert_eq!(log.leader_epochs(), entries(&[(0, 0)]));
    append(&mut log, 2, 2);
    assert_eq!(log.leader_epochs(), entries(&[(0, 0), (2, 4)]));
    assert_eq!(checkpoint_text(dir.path()), "0\n2\n0 0\n2 4\n");
    log.close().expect("close");
    drop(log);
    let log = open(dir.path(), &config(), true, 0);
    assert_eq!(log.leader_epochs(), entries(&[(0, 0), (2, 4)]));
}

#[test]
fn delete_records_and_retention_cut_the_epochs_from_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config(), true, 0);
    log.become_leader(0).expect("leader");
    append(&mut log, 0, 4);
    append(&mut log, 1, 5);
    assert_eq!(log.leader_epochs(), entries(&[(0, 0), (1, 4)]));
    log.advance_log_start_offset(2).expect("delete records");
    assert_eq!(checkpoint_text(dir.path()), "0\n2\n0 2\n1 4\n");
    log.advance_log_start_offset(5).expect("delete records");
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n1 5\n");
    // Retention's log start offset (the first remaining segment's base) cuts them too.
    fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT), "0\n2\n0 0\n1 4\n").expect("write");
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    drop(log);
    let mut log =
        PartitionLog::open(&Disk::real(), dir.path(), config(), options, 0).expect("reopen");
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.leader_epochs(), entries(&[(0, 0), (1, 4)]));
    let retention = RetentionConfig {
        retention_ms: 0,
        retention_bytes: -1,
        file_delete_delay_ms: 0,
    };
    let deleted = log
        .delete_old_segments(&retention, 6, 10_000)
        .expect("retention");
    assert_eq!(deleted, 2);
    assert_eq!(log.log_start_offset(), 6);
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n1 6\n");
}

#[test]
fn reopening_cuts_the_epochs_to_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config(), true, 0);
    log.become_leader(0).expect("leader");
    append(&mut log, 0, 4);
    append(&mut log, 1, 2);
    drop(log);
    // Recovery loses the last segment's batches (offsets 3..6): epoch 1 started in what is lost.
    let last = *segment_files(dir.path()).last().expect("segment");
    assert_eq!(last, 3);
    fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(file_name(last, ".log")))
        .expect("open")
        .set_len(0)
        .expect("truncate");
    let log = open(dir.path(), &config(), false, 0);
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.leader_epochs(), entries(&[(0, 0)]));
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 0\n");
    drop(log);
    // A checkpointed log start offset above the first epoch's start moves it up.
    let options = OpenOptions {
        recovery_point: 3,
        log_start_offset: 2,
        clean_shutdown: true,
    };
    let log = PartitionLog::open(&Disk::real(), dir.path(), config(), options, 0).expect("reopen");
    assert_eq!(log.leader_epochs(), entries(&[(0, 2)]));
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 2\n");
}

#[test]
fn an_unreadable_checkpoint_is_started_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config(), true, 0);
    append(&mut log, 0, 2);
    log.close().expect("close");
    drop(log);
    fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT), "garbage").expect("write");
    let mut log = open(dir.path(), &config(), true, 0);
    assert!(log.leader_epochs().is_empty());
    log.become_leader(0).expect("leader");
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 2\n");
}
