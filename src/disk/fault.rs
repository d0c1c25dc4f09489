//! The fault plan a test arms on a `Disk`: which operation, on which path, fails how.
//!
//! A rule matches an operation by kind and by a substring of its path (a suffix such as `.log`
//! or `-checkpoint` is a substring too). Matching operations are counted per rule; the rule fires
//! on the `nth` match and, unless it was armed `once`, on every match after it, until the plan is
//! cleared. Rules are armed and cleared while the broker runs; the plan is shared by `Arc`.

use std::io;
use std::path::Path;
use std::sync::Mutex;

/// The kinds of storage operation a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Opening a file, with or without creating it.
    Open,
    /// A positional or vectored write.
    Write,
    /// `set_len` (truncate or extend; index resizes).
    SetLen,
    /// fsync / fdatasync of a file.
    Sync,
    /// fsync of a directory.
    DirSync,
    /// A rename; the rule's path matches either the source or the target.
    Rename,
    /// Removing a file or a directory tree.
    Remove,
    /// Creating a directory.
    CreateDir,
}

/// How a matching operation fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// EIO.
    Error,
    /// ENOSPC.
    DiskFull,
    /// A write stores the first half of its bytes, then fails with EIO. Other operations fail
    /// with EIO.
    ShortWrite,
    /// An fsync that fails with EIO (the kernel may have dropped the dirty pages).
    SyncFailure,
}

impl FaultKind {
    pub(super) fn error(self) -> io::Error {
        match self {
            FaultKind::DiskFull => io::Error::from_raw_os_error(libc::ENOSPC),
            FaultKind::Error | FaultKind::ShortWrite | FaultKind::SyncFailure => {
                io::Error::from_raw_os_error(libc::EIO)
            }
        }
    }
}

/// One armed rule.
#[derive(Debug, Clone)]
pub struct Fault {
    op: Op,
    path_contains: String,
    kind: FaultKind,
    nth: u64,
    once: bool,
    matched: u64,
}

impl Fault {
    /// Fails every `op` whose path contains `path_contains`, from the first match on.
    pub fn new(op: Op, path_contains: &str, kind: FaultKind) -> Fault {
        Fault {
            op,
            path_contains: path_contains.to_string(),
            kind,
            nth: 1,
            once: false,
            matched: 0,
        }
    }

    /// Lets `n - 1` matching operations succeed first (`n` counts from 1).
    pub fn nth(mut self, n: u64) -> Fault {
        self.nth = n.max(1);
        self
    }

    /// Fires on the `nth` match only.
    pub fn once(mut self) -> Fault {
        self.once = true;
        self
    }
}

/// The armed rules and how many operations they failed.
#[derive(Debug, Default)]
pub struct FaultPlan {
    state: Mutex<PlanState>,
}

#[derive(Debug, Default)]
struct PlanState {
    rules: Vec<Fault>,
    fired: u64,
}

impl FaultPlan {
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    pub fn arm(&self, fault: Fault) {
        self.lock().rules.push(fault);
    }

    /// Disarms every rule; operations succeed again.
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// How many operations the plan has failed so far.
    pub fn fired(&self) -> u64 {
        self.lock().fired
    }

    /// The fault to inject into `op` on `paths`, if a rule fires.
    pub(super) fn check(&self, op: Op, paths: &[&Path]) -> Option<FaultKind> {
        let mut state = self.lock();
        let mut fired = None;
        for rule in state.rules.iter_mut().filter(|rule| rule.op == op) {
            let matches = paths
                .iter()
                .any(|path| path.to_string_lossy().contains(rule.path_contains.as_str()));
            if !matches {
                continue;
            }
            rule.matched += 1;
            let due = if rule.once {
                rule.matched == rule.nth
            } else {
                rule.matched >= rule.nth
            };
            if due && fired.is_none() {
                fired = Some(rule.kind);
            }
        }
        if fired.is_some() {
            state.fired += 1;
        }
        fired
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
