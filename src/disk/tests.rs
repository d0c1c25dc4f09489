//! The fault plan's matching and the offline rule.

use super::*;

fn faulty() -> (Disk, Arc<FaultPlan>, tempfile::TempDir) {
    let plan = Arc::new(FaultPlan::new());
    let dir = tempfile::tempdir().expect("tempdir");
    (Disk::with_faults(plan.clone()), plan, dir)
}

#[test]
fn the_nth_matching_operation_fails_until_cleared() {
    let (disk, plan, dir) = faulty();
    plan.arm(Fault::new(Op::Open, ".index", FaultKind::Error).nth(2));
    assert!(disk.create_file(&dir.path().join("0.log")).is_ok());
    assert!(disk.create_file(&dir.path().join("0.index")).is_ok());
    let error = disk.create_file(&dir.path().join("1.index")).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    assert!(disk.create_file(&dir.path().join("2.index")).is_err());
    plan.clear();
    assert!(disk.create_file(&dir.path().join("3.index")).is_ok());
    assert_eq!(plan.fired(), 2);
    assert!(!disk.is_offline());
}

#[test]
fn a_once_fault_fires_on_one_match() {
    let (disk, plan, dir) = faulty();
    plan.arm(Fault::new(Op::CreateDir, "t-0", FaultKind::DiskFull).once());
    let error = disk.create_dir_all(&dir.path().join("t-0")).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::ENOSPC));
    assert!(disk.create_dir_all(&dir.path().join("t-0")).is_ok());
}

#[test]
fn a_short_write_stores_half_and_the_undo_cuts_it_back() {
    let (disk, plan, dir) = faulty();
    let path = dir.path().join("0.log");
    let file = disk.create_file(&path).expect("create");
    disk.write_vectored_at(&file, &path, b"abcd", b"efgh", 0)
        .expect("write");
    plan.arm(Fault::new(Op::Write, ".log", FaultKind::ShortWrite).once());
    assert!(disk
        .write_vectored_at(&file, &path, b"1234", b"5678", 8)
        .is_err());
    assert_eq!(
        file_len(&file).unwrap(),
        12,
        "half of the second write landed"
    );
    disk.set_len(&file, &path, 8).expect("cut");
    plan.arm(Fault::new(Op::Write, ".log", FaultKind::ShortWrite).once());
    assert!(disk
        .write_vectored_at_or_undo(&file, &path, b"1234", b"5678", 8)
        .is_err());
    assert_eq!(file_len(&file).unwrap(), 8);
    assert!(
        !disk.is_offline(),
        "a write cut back cleanly keeps the directory"
    );
}

#[test]
fn a_write_that_cannot_be_cut_back_takes_the_directory_offline() {
    let (disk, plan, dir) = faulty();
    let path = dir.path().join("0.log");
    let file = disk.create_file(&path).expect("create");
    plan.arm(Fault::new(Op::Write, ".log", FaultKind::ShortWrite));
    plan.arm(Fault::new(Op::SetLen, ".log", FaultKind::Error));
    assert!(disk
        .write_vectored_at_or_undo(&file, &path, b"1234", b"5678", 0)
        .is_err());
    assert!(disk.is_offline());
}

#[test]
fn a_failed_fsync_is_never_followed_by_a_success() {
    let (disk, plan, dir) = faulty();
    let path = dir.path().join("0.log");
    let file = disk.create_file(&path).expect("create");
    plan.arm(Fault::new(Op::Sync, ".log", FaultKind::SyncFailure).once());
    assert!(disk.sync_data(&file, &path).is_err());
    plan.clear();
    assert!(disk.is_offline());
    assert!(disk.sync_data(&file, &path).is_err(), "no retry succeeds");
    assert!(disk.write_all_at(&file, &path, b"x", 0).is_err());
    assert!(disk
        .write_file_durably(&dir.path().join("checkpoint"), b"0\n0\n")
        .is_err());
    assert!(!dir.path().join("checkpoint").exists());
    assert!(disk.open_read(&path).is_ok(), "reads still work");
}

#[test]
fn durable_writes_replace_whole_files_and_renames_match_either_path() {
    let (disk, plan, dir) = faulty();
    let path = dir.path().join("recovery-point-offset-checkpoint");
    disk.write_file_durably(&path, b"old").expect("write");
    plan.arm(Fault::new(Op::Rename, "-checkpoint", FaultKind::Error));
    assert!(disk.write_file_durably(&path, b"new").is_err());
    assert_eq!(disk.read(&path).unwrap(), b"old");
    plan.clear();
    disk.write_file_durably(&path, b"new").expect("write");
    assert_eq!(disk.read(&path).unwrap(), b"new");
    assert!(!disk.is_offline());
}

#[test]
fn a_directory_deleted_before_its_background_sync_is_not_a_failure() {
    let (disk, _plan, dir) = faulty();
    let gone = dir.path().join("deleted-topic-0");
    assert!(disk.sync_dir_if_exists(&gone).is_ok());
    assert!(
        !disk.is_offline(),
        "a topic deleted meanwhile leaves the log directory online"
    );
    assert!(disk.sync_dir(&gone).is_err());
    assert!(
        disk.is_offline(),
        "a directory that must exist and cannot be synced"
    );
}
