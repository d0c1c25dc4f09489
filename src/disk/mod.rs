//! The one narrow interface through which sluice touches storage: opening, writing (positional
//! and vectored), resizing, syncing, renaming and removing files and directories, listing
//! directories, and the durable small-file write built on them. No other module uses `std::fs`.
//!
//! `Disk` is a cheap handle (one `Arc`) on the real file system plus an optional `FaultPlan`
//! that tests arm to make chosen operations fail (short write, EIO, ENOSPC, fsync failure). In
//! production the plan is absent and each operation costs one extra branch. Handles stay plain
//! `File`s, so the fetch path can still `sendfile` from them and the indexes can mmap them; reads
//! on an open handle need no fault (tests corrupt files on purpose instead).
//!
//! The log directory goes offline here, as Kafka's does on an `IOException`, when a failure
//! cannot be undone cleanly:
//! - a failed fsync (of a file or a directory): the kernel may have dropped the dirty pages, so a
//!   later fsync that "succeeds" proves nothing, and it is never retried as if it had;
//! - a failed write whose partial bytes cannot be cut back (`write_vectored_at_or_undo`).
//!
//! From then on every operation that would change the directory fails, so nothing more is
//! written and no checkpoint moves; the storage layer answers KAFKA_STORAGE_ERROR for every
//! partition, and only a restart (which runs recovery) serves the directory again. A failed write
//! that is cut back to the size before it only fails its own request: the file is exactly as it
//! was, so nothing is lost by staying online. The same holds for a durable small-file write
//! whose temp file cannot be written or renamed: the old file stays whole. (Kafka takes the
//! directory offline on those too; a stale checkpoint only makes the next recovery start
//! earlier, so sluice keeps serving.)

mod fault;
pub mod names;

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

pub use fault::{Fault, FaultKind, FaultPlan, Op};
/// The file handle type: a real descriptor, so `sendfile` and mmap work on it.
pub use std::fs::File;

/// The storage handle of one log directory; clones share the fault plan and the offline state.
#[derive(Clone, Debug, Default)]
pub struct Disk {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    faults: Option<Arc<FaultPlan>>,
    offline: AtomicBool,
    /// How long each log flush took (Kafka's LogFlushRateAndTimeMs), recorded by the logs
    /// that flush through this handle.
    log_flush_time: crate::metrics::Histogram,
}

/// One entry of a listed directory.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub path: PathBuf,
    pub is_dir: bool,
}

impl DirEntry {
    /// The file name as UTF-8, empty when it is not.
    pub fn name(&self) -> &str {
        self.path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default()
    }
}

impl Disk {
    /// The real file system, no faults.
    pub fn real() -> Disk {
        Disk::default()
    }

    /// The real file system behind `plan`, which tests arm and clear while the broker runs.
    pub fn with_faults(plan: Arc<FaultPlan>) -> Disk {
        Disk {
            inner: Arc::new(Inner {
                faults: Some(plan),
                ..Inner::default()
            }),
        }
    }

    /// The times of the log flushes through this handle (`PartitionLog::flush`).
    pub fn log_flush_time(&self) -> &crate::metrics::Histogram {
        &self.inner.log_flush_time
    }

    /// True once a failure that cannot be undone took the directory offline.
    pub fn is_offline(&self) -> bool {
        self.inner.offline.load(Ordering::SeqCst)
    }

    /// Takes the directory offline (logged once, at error level).
    pub fn mark_offline(&self, path: &Path, error: &io::Error) {
        if !self.inner.offline.swap(true, Ordering::SeqCst) {
            tracing::error!(
                path = %path.display(),
                %error,
                "storage failure that cannot be undone: the log directory is offline until restart"
            );
        }
    }

    /// The error every changing operation returns once the directory is offline.
    pub fn offline_error() -> io::Error {
        io::Error::other("the log directory is offline after a storage failure")
    }

    /// Fails when offline; otherwise the fault to inject, if any.
    fn admit(&self, op: Op, paths: &[&Path]) -> io::Result<Option<FaultKind>> {
        if self.is_offline() {
            return Err(Disk::offline_error());
        }
        Ok(self.fault(op, paths))
    }

    fn fault(&self, op: Op, paths: &[&Path]) -> Option<FaultKind> {
        self.inner.faults.as_ref()?.check(op, paths)
    }

    fn fail_if(fault: Option<FaultKind>) -> io::Result<()> {
        match fault {
            Some(kind) => Err(kind.error()),
            None => Ok(()),
        }
    }

    /// Creates `path` (or truncates it) for reading and writing.
    pub fn create_file(&self, path: &Path) -> io::Result<File> {
        Disk::fail_if(self.admit(Op::Open, &[path])?)?;
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    /// Creates `path` for writing; fails if it exists.
    pub fn create_new(&self, path: &Path) -> io::Result<File> {
        Disk::fail_if(self.admit(Op::Open, &[path])?)?;
        File::options().write(true).create_new(true).open(path)
    }

    /// A writer that appends to `file` (at `path`, written from its start) through this disk.
    pub fn sequential_writer(&self, file: File, path: &Path) -> SequentialWriter {
        SequentialWriter {
            disk: self.clone(),
            file,
            path: path.to_path_buf(),
            position: 0,
        }
    }

    /// Creates `path` if missing, keeping what it holds (`.lock`).
    pub fn open_or_create(&self, path: &Path) -> io::Result<File> {
        Disk::fail_if(self.admit(Op::Open, &[path])?)?;
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
    }

    /// Opens an existing file for reading and writing.
    pub fn open_rw(&self, path: &Path) -> io::Result<File> {
        Disk::fail_if(self.admit(Op::Open, &[path])?)?;
        File::options().read(true).write(true).open(path)
    }

    /// Opens an existing file for reading; allowed while offline.
    pub fn open_read(&self, path: &Path) -> io::Result<File> {
        Disk::fail_if(self.fault(Op::Open, &[path]))?;
        File::open(path)
    }

    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    pub fn read_to_string(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    /// The file's text, `None` when it does not exist.
    pub fn read_to_string_if_exists(&self, path: &Path) -> io::Result<Option<String>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Writes all of `bytes` at `position`.
    pub fn write_all_at(
        &self,
        file: &File,
        path: &Path,
        bytes: &[u8],
        position: u64,
    ) -> io::Result<()> {
        match self.admit(Op::Write, &[path])? {
            Some(FaultKind::ShortWrite) => {
                file.write_all_at(&bytes[..bytes.len() / 2], position)?;
                Err(FaultKind::ShortWrite.error())
            }
            fault => {
                Disk::fail_if(fault)?;
                file.write_all_at(bytes, position)
            }
        }
    }

    /// Writes `head` then `tail` at `position` with `pwritev` (one system call in the common
    /// case, continuing after partial writes).
    pub fn write_vectored_at(
        &self,
        file: &File,
        path: &Path,
        head: &[u8],
        tail: &[u8],
        position: u64,
    ) -> io::Result<()> {
        match self.admit(Op::Write, &[path])? {
            Some(FaultKind::ShortWrite) => {
                let half = (head.len() + tail.len()) / 2;
                let (head, tail) = if half <= head.len() {
                    (&head[..half], &tail[..0])
                } else {
                    (head, &tail[..half - head.len()])
                };
                pwritev_all(file, head, tail, position)?;
                Err(FaultKind::ShortWrite.error())
            }
            fault => {
                Disk::fail_if(fault)?;
                pwritev_all(file, head, tail, position)
            }
        }
    }

    /// `write_vectored_at` for an append: on failure the file is cut back to `position` so it
    /// ends where it did; when that cut fails too, the directory goes offline.
    pub fn write_vectored_at_or_undo(
        &self,
        file: &File,
        path: &Path,
        head: &[u8],
        tail: &[u8],
        position: u64,
    ) -> io::Result<()> {
        let Err(error) = self.write_vectored_at(file, path, head, tail, position) else {
            return Ok(());
        };
        if !self.is_offline() {
            if let Err(undo) = self.set_len(file, path, position) {
                tracing::error!(path = %path.display(), %undo, "cannot undo a failed append");
                self.mark_offline(path, &undo);
            }
        }
        Err(error)
    }

    /// Truncates or extends the file to `len` bytes.
    pub fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        Disk::fail_if(self.admit(Op::SetLen, &[path])?)?;
        file.set_len(len)
    }

    /// fsync. A failure takes the directory offline: it is never retried as a success.
    pub fn sync_all(&self, file: &File, path: &Path) -> io::Result<()> {
        self.sync_with(Op::Sync, path, || file.sync_all())
    }

    /// fdatasync (data and the length, not the timestamps). A failure takes the directory
    /// offline.
    pub fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        self.sync_with(Op::Sync, path, || file.sync_data())
    }

    /// fsyncs a directory, so entries created, renamed or removed in it survive a crash. A
    /// failure takes the directory offline.
    pub fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.sync_with(Op::DirSync, dir, || File::open(dir)?.sync_all())
    }

    /// `sync_dir` for a directory that may be gone by now (a topic deleted while its rolled
    /// segment waited for the background flush): a missing directory has nothing left to make
    /// durable, as in Kafka's `flushDirIfExists`. Only a failed fsync takes the directory
    /// offline.
    pub fn sync_dir_if_exists(&self, dir: &Path) -> io::Result<()> {
        self.sync_with(Op::DirSync, dir, || match File::open(dir) {
            Ok(handle) => handle.sync_all(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        })
    }

    fn sync_with(
        &self,
        op: Op,
        path: &Path,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let result = match self.admit(op, &[path])? {
            Some(kind) => Err(kind.error()),
            None => sync(),
        };
        if let Err(error) = &result {
            self.mark_offline(path, error);
        }
        result
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        Disk::fail_if(self.admit(Op::Rename, &[from, to])?)?;
        std::fs::rename(from, to)
    }

    pub fn remove_file(&self, path: &Path) -> io::Result<()> {
        Disk::fail_if(self.admit(Op::Remove, &[path])?)?;
        std::fs::remove_file(path)
    }

    /// `remove_file`, with a missing file counting as removed.
    pub fn remove_file_if_exists(&self, path: &Path) -> io::Result<()> {
        match self.remove_file(path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            result => result,
        }
    }

    pub fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        Disk::fail_if(self.admit(Op::Remove, &[path])?)?;
        std::fs::remove_dir_all(path)
    }

    pub fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        Disk::fail_if(self.admit(Op::CreateDir, &[path])?)?;
        std::fs::create_dir_all(path)
    }

    /// The entries of a directory, in no particular order.
    pub fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            entries.push(DirEntry {
                path: entry.path(),
                is_dir: entry.file_type()?.is_dir(),
            });
        }
        Ok(entries)
    }

    pub fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    /// The file's last modification time.
    pub fn modified(&self, path: &Path) -> io::Result<SystemTime> {
        std::fs::metadata(path)?.modified()
    }

    pub fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    /// Total and usable bytes of the file system holding `path` (`statvfs`).
    pub fn space_bytes(&self, path: &Path) -> io::Result<(u64, u64)> {
        use std::os::unix::ffi::OsStrExt;
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("path contains a NUL byte"))?;
        // SAFETY: statvfs is plain data, and the call writes only into `stat`.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c_path` is NUL-terminated and outlives the call.
        if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let fragment = stat.f_frsize as u64;
        Ok((
            (stat.f_blocks as u64).saturating_mul(fragment),
            (stat.f_bavail as u64).saturating_mul(fragment),
        ))
    }

    /// Replaces `path` atomically and durably: `<path>.tmp` is written and fsynced, renamed over
    /// `path`, and the directory is fsynced so the rename survives a crash. Readers see the old
    /// file or the new one, never a torn one.
    pub fn write_file_durably(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let tmp = temporary_path(path);
        {
            let file = self.create_file(&tmp)?;
            self.write_all_at(&file, &tmp, contents, 0)?;
            self.sync_all(&file, &tmp)?;
        }
        self.rename(&tmp, path)?;
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        self.sync_dir(dir)
    }
}

/// Writes a new file front to back, each write through `Disk::write_all_at` (wrap it in a
/// `BufWriter` for small writes).
pub struct SequentialWriter {
    disk: Disk,
    file: File,
    path: PathBuf,
    position: u64,
}

impl SequentialWriter {
    /// fsyncs what was written (see `Disk::sync_all`).
    pub fn sync_all(&self) -> io::Result<()> {
        self.disk.sync_all(&self.file, &self.path)
    }
}

impl Write for SequentialWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.disk
            .write_all_at(&self.file, &self.path, bytes, self.position)?;
        self.position += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `<path>.tmp`, where durable writes stage their bytes.
pub fn temporary_path(path: &Path) -> PathBuf {
    names::with_suffix(path, names::TEMP_SUFFIX)
}

/// The current length of an open file.
pub fn file_len(file: &File) -> io::Result<u64> {
    Ok(file.metadata()?.len())
}

/// Writes `head` then `tail` at `position` with `pwritev`, continuing after partial writes.
fn pwritev_all(file: &File, mut head: &[u8], mut tail: &[u8], mut position: u64) -> io::Result<()> {
    while !head.is_empty() || !tail.is_empty() {
        let iov = [
            libc::iovec {
                iov_base: head.as_ptr() as *mut libc::c_void,
                iov_len: head.len(),
            },
            libc::iovec {
                iov_base: tail.as_ptr() as *mut libc::c_void,
                iov_len: tail.len(),
            },
        ];
        let offset = libc::off_t::try_from(position).map_err(io::Error::other)?;
        // SAFETY: the descriptor is open, and each iovec describes a live slice that pwritev
        // only reads.
        let written = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), 2, offset) };
        let Ok(mut written) = usize::try_from(written) else {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        };
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        position += written as u64;
        let from_head = written.min(head.len());
        head = &head[from_head..];
        written -= from_head;
        tail = &tail[written..];
    }
    Ok(())
}

#[cfg(test)]
mod tests;
