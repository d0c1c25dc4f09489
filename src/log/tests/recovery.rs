//! Reopening after clean and unclean shutdowns, with files damaged on purpose. Each case checks
//! that the log serves exactly the valid prefix and that appending continues at the right offset.

use std::fs::{self, OpenOptions as FileOptions};
use std::io::Write;
use std::path::Path;

use super::*;

/// A log of `count` two-record batches over several segments, dropped without close: a crash
/// (the mapped index pages survive in the page cache, untrimmed). Returns its log end offset.
fn crashed_log(dir: &Path, count: usize) -> i64 {
    let mut log = open(dir, &small_config(), true, 0);
    append_batches(&mut log, count, 2, 40);
    log.log_end_offset()
}

fn append_to_file(path: &Path, bytes: &[u8]) {
    let mut file = FileOptions::new()
        .append(true)
        .open(path)
        .expect("open for append");
    file.write_all(bytes).expect("append");
}

/// Reopens uncleanly with recovery point 0, then checks the valid prefix and the next append.
fn reopen_and_check(dir: &Path, expected_end: i64, expected_batches: usize) -> PartitionLog {
    let mut log = open(dir, &small_config(), false, 0);
    assert_eq!(log.log_end_offset(), expected_end);
    assert_eq!(log.recovery_point(), 0);
    let headers = read_all(&log);
    assert_eq!(headers.len(), expected_batches);
    assert_eq!(
        headers.last().map_or(0, |h| h.last_offset() + 1),
        expected_end
    );
    let info = log
        .append(&batch(1, 9_999, 10), 0, 0, false)
        .expect("append after recovery");
    assert_eq!(info.base_offset, expected_end);
    assert_eq!(read_all(&log).len(), expected_batches + 1);
    log
}

fn last_segment(dir: &Path) -> std::path::PathBuf {
    let base = *segment_files(dir).last().expect("a segment");
    dir.join(file_name(base, ".log"))
}

#[test]
fn garbage_appended_to_the_tail_is_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = crashed_log(dir.path(), 20);
    let path = last_segment(dir.path());
    let valid_len = fs::metadata(&path).expect("log").len();
    append_to_file(&path, &[0xde; 300]);
    reopen_and_check(dir.path(), end, 20);
    assert!(
        fs::metadata(&path).expect("log").len() > valid_len,
        "one batch was appended after truncation"
    );
}

#[test]
fn torn_last_batch_is_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = crashed_log(dir.path(), 20);
    let path = last_segment(dir.path());
    let len = fs::metadata(&path).expect("log").len();
    let last_batch_bytes = batch(2, 0, 40).len() as u64;
    assert!(
        len >= 2 * last_batch_bytes,
        "the last segment must hold at least two batches"
    );
    FileOptions::new()
        .write(true)
        .open(&path)
        .expect("open")
        .set_len(len - 30)
        .expect("tear");
    reopen_and_check(dir.path(), end - 2, 19);
    // The header alone (fewer than 17 bytes left) is torn too.
    let dir = tempfile::tempdir().expect("tempdir");
    let end = crashed_log(dir.path(), 20);
    append_to_file(&last_segment(dir.path()), &batch(1, 0, 10)[..16]);
    reopen_and_check(dir.path(), end, 20);
}

#[test]
fn zero_bytes_appended_are_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = crashed_log(dir.path(), 20);
    append_to_file(&last_segment(dir.path()), &[0u8; 4096]);
    reopen_and_check(dir.path(), end, 20);
}

#[test]
fn zero_filled_preallocated_index_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 30, 2, 40);
    log.close().expect("close");
    drop(log);
    let first_index = dir.path().join(file_name(0, ".index"));
    let first_time_index = dir.path().join(file_name(0, ".timeindex"));
    let good_entries = offset_index_entries(&first_index);
    let good_times = time_index_entries(&first_time_index);
    assert!(!good_entries.is_empty() && !good_times.is_empty());
    fs::write(&first_index, vec![0u8; 1_200]).expect("zero the index");
    fs::write(
        dir.path().join(file_name(0, ".timeindex")),
        vec![0u8; 1_188],
    )
    .expect("zero the time index");

    // Clean shutdown: the segment lies before the recovery point, so only the check catches it.
    let log = open(dir.path(), &config, true, 0);
    assert_eq!(read_all(&log).len(), 30);
    drop(log);
    assert_eq!(
        offset_index_entries(&first_index),
        good_entries,
        "rebuilt and trimmed"
    );
    assert_eq!(time_index_entries(&first_time_index), good_times);

    // Unclean shutdown: the crashed active segment's untrimmed index is rebuilt too.
    let dir = tempfile::tempdir().expect("tempdir");
    let end = crashed_log(dir.path(), 20);
    let active = *segment_files(dir.path()).last().expect("segment");
    let active_index = dir.path().join(file_name(active, ".index"));
    assert_eq!(
        fs::metadata(&active_index).expect("index").len(),
        1_200,
        "left untrimmed by the crash"
    );
    reopen_and_check(dir.path(), end, 20);
}

#[test]
fn deleted_index_files_are_rebuilt() {
    for suffix in [".index", ".timeindex"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = small_config();
        let mut log = open(dir.path(), &config, true, 0);
        append_batches(&mut log, 30, 2, 40);
        log.close().expect("close");
        drop(log);
        let bases = segment_files(dir.path());
        let victim = dir.path().join(file_name(bases[1], suffix));
        let before = fs::read(&victim).expect("index");
        fs::remove_file(&victim).expect("delete");
        let log = open(dir.path(), &config, true, 0);
        assert_eq!(log.log_end_offset(), 60);
        assert_eq!(read_all(&log).len(), 30);
        assert_eq!(
            fs::read(&victim).expect("rebuilt"),
            before,
            "{suffix} rebuilt identically"
        );
    }
}

#[test]
fn bad_crc_in_an_earlier_segment_truncates_there_and_drops_later_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_log(dir.path(), 40);
    let bases = segment_files(dir.path());
    assert!(bases.len() >= 4, "{bases:?}");
    let victim = dir.path().join(file_name(bases[1], ".log"));
    let mut contents = fs::read(&victim).expect("read");
    // Flip a byte inside the third batch's records.
    let batch_bytes = batch(2, 0, 40).len();
    contents[2 * batch_bytes + 70] ^= 0xff;
    fs::write(&victim, &contents).expect("corrupt");

    let expected_end = bases[1] + 4;
    let log = reopen_and_check(dir.path(), expected_end, (bases[1] / 2) as usize + 2);
    drop(log);
    assert_eq!(segment_files(dir.path()), vec![bases[0], bases[1]]);
    assert_eq!(
        fs::metadata(&victim).expect("log").len(),
        2 * batch_bytes as u64 + batch(1, 0, 10).len() as u64
    );
    for later in &bases[2..] {
        for suffix in [".log", ".index", ".timeindex"] {
            assert!(!dir.path().join(file_name(*later, suffix)).exists());
        }
    }
}

#[test]
fn recovery_starts_at_the_recovery_point_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_log(dir.path(), 40);
    let bases = segment_files(dir.path());
    // Damage before the recovery point goes unnoticed by recovery (as in Kafka): only the
    // segments from the recovery point on are re-validated.
    let early = dir.path().join(file_name(bases[0], ".log"));
    let mut contents = fs::read(&early).expect("read");
    contents[100] ^= 0xff;
    fs::write(&early, &contents).expect("corrupt");
    let log = open(dir.path(), &small_config(), false, bases[2] + 1);
    assert_eq!(log.log_end_offset(), 80);
    assert_eq!(log.recovery_point(), bases[2] + 1);
    assert_eq!(segment_files(dir.path()), bases);
}

#[test]
fn clean_shutdown_claim_with_a_dirty_tail_is_still_repaired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 20, 2, 40);
    log.close().expect("close");
    let end = log.log_end_offset();
    drop(log);
    append_to_file(&last_segment(dir.path()), &[0u8; 100]);
    let mut log = open(dir.path(), &config, true, 0);
    assert_eq!(log.log_end_offset(), end);
    let info = log.append(&batch(1, 0, 10), 0, 0, false).expect("append");
    assert_eq!(info.base_offset, end);
    assert_eq!(read_all(&log).len(), 21);
}

#[test]
fn temporary_and_orphan_files_are_resolved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 30, 2, 40);
    log.close().expect("close");
    drop(log);
    let bases = segment_files(dir.path());
    let path = |base: i64, suffix: &str| dir.path().join(file_name(base, suffix));
    fs::write(path(1_000, ".index"), [0u8; 8]).expect("orphan");
    fs::write(path(1_001, ".timeindex"), [0u8; 12]).expect("orphan");
    fs::write(path(bases[0], ".log.deleted"), b"old").expect("deleted");
    fs::write(path(2_000, ".log.cleaned"), b"partial").expect("cleaned");
    // Finished compaction output for the first two segments, swapped in halfway: the regular
    // segments it replaces are still there.
    let first = fs::read(path(bases[0], ".log")).expect("read");
    let second = fs::read(path(bases[1], ".log")).expect("read");
    fs::write(
        path(bases[0], ".log.swap"),
        [first.clone(), second].concat(),
    )
    .expect("swap");
    fs::write(path(bases[0], ".index.swap"), [0u8; 8]).expect("swap index");

    let log = open(dir.path(), &config, true, 0);
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(read_all(&log).len(), 30);
    let mut expected: Vec<i64> = bases.clone();
    expected.remove(1);
    assert_eq!(segment_files(dir.path()), expected);
    let names: Vec<String> = fs::read_dir(dir.path())
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    assert!(names.iter().all(|name| !name.contains(".swap")
        && !name.contains(".deleted")
        && !name.contains(".cleaned")));
    assert!(!path(1_000, ".index").exists() && !path(1_001, ".timeindex").exists());
}

#[test]
fn log_start_checkpoint_beyond_the_log_end_starts_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config();
    let mut log = open(dir.path(), &config, true, 0);
    append_batches(&mut log, 5, 2, 40);
    log.close().expect("close");
    drop(log);
    let options = OpenOptions {
        recovery_point: 10,
        log_start_offset: 50,
        clean_shutdown: true,
    };
    let mut log = PartitionLog::open(
        &crate::disk::Disk::real(),
        dir.path(),
        config.clone(),
        options,
        0,
    )
    .expect("open");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(segment_files(dir.path()), vec![50]);
    assert_eq!(
        log.append(&batch(1, 0, 10), 0, 0, false)
            .expect("append")
            .base_offset,
        50
    );

    // A log start offset inside the log only moves the log start offset.
    let options = OpenOptions {
        recovery_point: 51,
        log_start_offset: 3,
        clean_shutdown: true,
    };
    drop(log);
    let dir2 = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir2.path(), &config, true, 0);
    append_batches(&mut log, 5, 2, 40);
    log.close().expect("close");
    drop(log);
    let log = PartitionLog::open(&crate::disk::Disk::real(), dir2.path(), config, options, 0)
        .expect("open");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 10));
    assert_eq!(read_all(&log).first().map(|h| h.base_offset), Some(2));
}
