//! An embedded broker for Rust tests: the whole broker (`server::start`) started in the test's
//! own process on a port the kernel chooses, with its log directory in a fresh temporary
//! directory, so a project's `cargo test` can talk to a real Kafka-compatible broker with any
//! Kafka client, as Java projects use an embedded Kafka.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! let broker = sluice::EmbeddedBroker::builder()
//!     .config("num.partitions", "3")
//!     .start()
//!     .await?;
//! let bootstrap = broker.bootstrap_servers(); // "127.0.0.1:<port>", for any Kafka client
//! // ... produce and consume through `bootstrap` ...
//! broker.shutdown().await?; // or let it drop
//! # let _ = bootstrap;
//! # Ok(())
//! # }
//! ```
//!
//! Settings are Kafka's broker property names, read through the same table as
//! `server.properties` (`config::broker`). The builder's defaults differ from a standalone
//! broker's in three ways, each overridable with `config`: the listener is
//! `PLAINTEXT://127.0.0.1:0` (an ephemeral port), `log.dirs` is a new temporary directory, and
//! `group.initial.rebalance.delay.ms` is 0 so that a test's consumer group forms at once. A
//! `log.dirs` (or `log.dir`) given by the caller is used as it is and never removed.
//!
//! Stopping: `shutdown().await` stops serving, closes the logs (checkpoints, clean-shutdown
//! marker) and then removes the temporary directory, and reports a failure. Dropping the broker
//! stops it too. On a multi-thread tokio runtime the drop waits for the same graceful shutdown;
//! on a current-thread runtime (the default of `#[tokio::test]`), where nothing may block, the
//! drop starts that shutdown in a task: the listener and the directory go when the task ends,
//! or when the runtime is dropped, whichever comes first. Either way the directory is removed.
//!
//! Fault injection (`faults()`, with `sluice.fault.injection.enable=true`) makes chosen
//! requests fail with a Kafka error, wait, lose their connection or come back throttled, so a
//! test can check how its client copes; `http_addr()` is the metrics endpoint when
//! `sluice.http.listener` is set.
//!
//! Tests that are not async use `start_blocking`, which owns a small runtime of its own (two
//! worker threads) and stops the broker when the `BlockingEmbeddedBroker` is dropped. It must
//! not be called, nor dropped, inside an async context.
//!
//! The broker shares the test process: its log lines go to whatever `tracing` subscriber the
//! test installed (none by default), and the binary's guarded allocator (`alloc_guard`) is not
//! installed, since a library cannot choose its user's global allocator.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tempfile::TempDir;

pub use crate::api::faults::{FaultAction, FaultRule, Faults, ServedRequest};
use crate::config::Config;
use crate::server::{self, RunningBroker};
use crate::time::SystemClock;

/// Builds an `EmbeddedBroker`; `EmbeddedBroker::builder()` starts one.
#[derive(Debug, Clone, Default)]
pub struct EmbeddedBrokerBuilder {
    /// The caller's settings, Kafka's property names; a later one wins over an earlier one.
    pairs: Vec<(String, String)>,
}

impl EmbeddedBrokerBuilder {
    /// Sets one broker property by Kafka's name, e.g. `config("num.partitions", "3")`. An
    /// unknown or invalid setting makes `start` fail.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.pairs.push((key.into(), value.into()));
        self
    }

    /// Creates the temporary log directory, opens it, binds the listener and starts serving.
    /// Returns once the broker accepts connections.
    pub async fn start(self) -> anyhow::Result<EmbeddedBroker> {
        let (config, temp_dir) = self.resolve()?;
        let log_dir = config.log_dir.clone();
        let running = server::start(config, Arc::new(SystemClock)).await?;
        Ok(EmbeddedBroker {
            running: Some(running),
            temp_dir,
            log_dir,
        })
    }

    /// `start` for tests that are not async: the broker runs on a runtime of its own, owned by
    /// the returned handle. Must not be called from inside an async context.
    pub fn start_blocking(self) -> anyhow::Result<BlockingEmbeddedBroker> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-embedded")
            .enable_all()
            .build()?;
        let broker = runtime.block_on(self.start())?;
        Ok(BlockingEmbeddedBroker {
            broker: Some(broker),
            runtime,
        })
    }

    /// The `Config` to start with, and the temporary directory it names unless the caller
    /// chose a log directory.
    fn resolve(self) -> anyhow::Result<(Config, Option<TempDir>)> {
        let caller_chose_log_dir = self
            .pairs
            .iter()
            .any(|(key, _)| key == "log.dirs" || key == "log.dir");
        let temp_dir = if caller_chose_log_dir {
            None
        } else {
            Some(
                tempfile::Builder::new()
                    .prefix("sluice-embedded-")
                    .tempdir()?,
            )
        };
        let mut pairs = vec![
            (
                "listeners".to_string(),
                "PLAINTEXT://127.0.0.1:0".to_string(),
            ),
            (
                "group.initial.rebalance.delay.ms".to_string(),
                "0".to_string(),
            ),
        ];
        if let Some(dir) = &temp_dir {
            pairs.push(("log.dirs".to_string(), dir.path().display().to_string()));
        }
        // The caller's settings come last: `Config::from_pairs` keeps the last value of a key.
        pairs.extend(self.pairs);
        let config = Config::from_pairs(&pairs)?;
        Ok((config, temp_dir))
    }
}

/// A broker serving in this process; see the module documentation.
pub struct EmbeddedBroker {
    /// `None` once shut down (by `shutdown` or by drop).
    running: Option<RunningBroker>,
    /// The log directory when the builder created it; removed after the broker stops.
    temp_dir: Option<TempDir>,
    log_dir: PathBuf,
}

impl EmbeddedBroker {
    /// A builder with the embedded defaults (ephemeral port, temporary log directory).
    pub fn builder() -> EmbeddedBrokerBuilder {
        EmbeddedBrokerBuilder::default()
    }

    /// The address the broker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        let mut addr = self.running().local_addr;
        // A broker bound to every interface is reached on loopback.
        if addr.ip().is_unspecified() {
            addr.set_ip(Ipv4Addr::LOCALHOST.into());
        }
        addr
    }

    /// `host:port` for a Kafka client's `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        self.local_addr().to_string()
    }

    /// The log directory (the temporary one unless the caller set `log.dirs`).
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// Fault injection (docs/fault-injection.md), when the broker was built with
    /// `.config("sluice.fault.injection.enable", "true")`; None otherwise. Rules added here
    /// act as those added over HTTP: `faults.add(FaultRule::error("Produce",
    /// "NOT_LEADER_OR_FOLLOWER")?.count(2))`.
    pub fn faults(&self) -> Option<&Faults> {
        let faults = self.running().faults();
        faults.is_enabled().then_some(&**faults)
    }

    /// Where `sluice.http.listener` serves `/metrics`, `/health`, `/ready` (and the fault
    /// API), when set (`127.0.0.1:0` picks a free port).
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.running().http_addr
    }

    /// Stops serving, answers the requests already read, closes the logs, and then removes
    /// the temporary log directory.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let running = self.running.take().expect("running until shut down");
        let stopped = running.shutdown().await;
        if let Some(dir) = self.temp_dir.take() {
            dir.close()?;
        }
        stopped
    }

    fn running(&self) -> &RunningBroker {
        self.running.as_ref().expect("running until shut down")
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        let temp_dir = self.temp_dir.take();
        let stop = async move {
            if let Err(e) = running.shutdown().await {
                tracing::warn!("embedded broker: shutdown failed: {e:#}");
            }
            drop(temp_dir);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => match handle.runtime_flavor() {
                tokio::runtime::RuntimeFlavor::MultiThread => {
                    tokio::task::block_in_place(|| handle.block_on(stop))
                }
                // Blocking here would stall the only thread; if the runtime is dropped before
                // the task runs, dropping the task removes the directory.
                _ => drop(handle.spawn(stop)),
            },
            // No runtime: the server's tasks died with theirs; only the directory is left.
            Err(_) => drop(stop),
        }
    }
}

/// An `EmbeddedBroker` on a runtime of its own, for tests that are not async
/// (`EmbeddedBrokerBuilder::start_blocking`). Dropping it shuts the broker down and waits.
pub struct BlockingEmbeddedBroker {
    /// `None` once shut down.
    broker: Option<EmbeddedBroker>,
    runtime: tokio::runtime::Runtime,
}

impl BlockingEmbeddedBroker {
    /// `host:port` for a Kafka client's `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        self.broker().bootstrap_servers()
    }

    /// The address the broker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.broker().local_addr()
    }

    /// The log directory.
    pub fn log_dir(&self) -> &Path {
        self.broker().log_dir()
    }

    /// The broker's runtime, for a test that wants to run async client code on it.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    /// `EmbeddedBroker::shutdown`, waited for.
    pub fn shutdown(mut self) -> anyhow::Result<()> {
        let broker = self.broker.take().expect("running until shut down");
        self.runtime.block_on(broker.shutdown())
    }

    fn broker(&self) -> &EmbeddedBroker {
        self.broker.as_ref().expect("running until shut down")
    }
}

impl Drop for BlockingEmbeddedBroker {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            if let Err(e) = self.runtime.block_on(broker.shutdown()) {
                tracing::warn!("embedded broker: shutdown failed: {e:#}");
            }
        }
    }
}
