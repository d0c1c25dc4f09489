//! Process lifecycle: serve the HTTP endpoint, bind every listener, open the log directory, run
//! an accept loop per listener and the background tasks (flush scheduler, checkpoint writer,
//! TLS store reloads), and shut down gracefully: stop
//! accepting, answer requests already read, then close every log, write the checkpoints and
//! the clean-shutdown marker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

use crate::api::faults::Faults;
use crate::api::Broker;
use crate::config::Config;
use crate::disk::Disk;
use crate::group::{GroupConfig, GroupCoordinator};
use crate::metrics::BrokerMetrics;
use crate::network::{self, serve_listener, BoundListener, HttpState};
use crate::protocol::VersionTable;
use crate::quota::QuotaManager;
use crate::security::Security;
use crate::storage::consumer_offsets::ConsumerOffsetsStore;
use crate::storage::transaction_state::TransactionStateStore;
use crate::storage::{LogManager, MarkerWriter};
use crate::time::Clock;
use crate::txn::{TransactionCoordinator, TxnConfig};

/// How long shutdown waits for connections to answer what they already read.
const SHUTDOWN_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A started broker.
pub struct RunningBroker {
    /// The first listener's bound address.
    pub local_addr: SocketAddr,
    /// Every listener's name and bound address, in `listeners` order.
    pub listener_addrs: Vec<(String, SocketAddr)>,
    /// Where `sluice.http.listener` serves metrics, health and fault injection, if set.
    pub http_addr: Option<SocketAddr>,
    faults: Arc<Faults>,
    logs: Arc<LogManager>,
    clock: Arc<dyn Clock>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningBroker {
    /// The broker's logs, for tests that check what the wire cannot show (fsyncs, the
    /// recovery point), as Kafka's tests reach into `broker.logManager`.
    pub fn log_manager(&self) -> &Arc<LogManager> {
        &self.logs
    }

    /// The bound address of the listener named `name`.
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.listener_addrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, a)| *a)
    }

    /// Fault injection (`sluice.fault.injection.enable`), for the embedded API.
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// Runs one pass of the retention task now, at the broker clock's time: the pass the
    /// background task runs every `log.retention.check.interval.ms`. Tests on a manual clock
    /// advance the clock and call this instead of waiting for a tick. Returns the segments
    /// deleted.
    pub async fn run_retention_pass(&self) -> usize {
        let (logs, now_ms) = (self.logs.clone(), self.clock.now_ms());
        tokio::task::spawn_blocking(move || retention_pass(&logs, now_ms))
            .await
            .unwrap_or(0)
    }

    /// Runs one pass of the log cleaner now, at the broker clock's time: the pass the cleaner
    /// task runs every `log.cleaner.backoff.ms`. Returns the cleaning rounds that ran.
    pub async fn run_cleaner_pass(&self) -> usize {
        let (logs, now_ms) = (self.logs.clone(), self.clock.now_ms());
        tokio::task::spawn_blocking(move || logs.clean_logs(now_ms))
            .await
            .unwrap_or(0)
    }

    /// Runs one pass of the flush scheduler now, at the broker clock's time: every log whose
    /// `flush.ms` has passed is fsynced.
    pub async fn run_flush_pass(&self) {
        let (logs, now_ms) = (self.logs.clone(), self.clock.now_ms());
        let _ = tokio::task::spawn_blocking(move || logs.flush_due(now_ms)).await;
    }

    /// Graceful shutdown; returns once logs are closed and the clean-shutdown marker is written.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        self.task.await?
    }
}

/// Opens the logs, binds, and starts serving in the background.
pub async fn start(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<RunningBroker> {
    start_on(config, clock, Disk::real()).await
}

/// `start`, with every storage operation going through `disk` (tests pass one with a fault
/// plan).
pub async fn start_on(
    mut config: Config,
    clock: Arc<dyn Clock>,
    disk: Disk,
) -> anyhow::Result<RunningBroker> {
    // An unknown release to emulate is refused before anything is bound or opened.
    let versions = Arc::new(VersionTable::for_setting(
        config.emulate_kafka_version.as_deref(),
    )?);
    if let Some(release) = versions.emulated_release() {
        tracing::info!(
            release,
            schemas = versions.emulated_patch(),
            apis = versions.advertised().count(),
            "emulating Apache Kafka {release}: advertising and serving only its API versions (sluice.emulate.kafka.version)"
        );
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // The HTTP endpoint first, so that /health answers and /ready says no while the log
    // directory is recovered. A failed start drops `shutdown_tx`, which stops it.
    let http_state = Arc::new(HttpState::default());
    let http_addr = match &config.http_listener {
        Some(http) => {
            let socket = network::bind_http(&http.host, http.port)
                .await
                .map_err(|e| {
                    anyhow::anyhow!("cannot listen on {http} (sluice.http.listener): {e}")
                })?;
            let addr = socket.local_addr()?;
            tokio::spawn(network::serve_http(
                socket,
                http_state.clone(),
                shutdown_rx.clone(),
            ));
            tracing::info!(%addr, fault_injection = config.fault_injection_enable, "serving /metrics, /health and /ready");
            Some(addr)
        }
        None => None,
    };
    let mut sockets = Vec::new();
    let mut listener_addrs = Vec::new();
    for listener in config.listeners.iter_mut() {
        let bind = &listener.bind;
        let socket = network::bind(&bind.host, bind.port)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {bind} ({}): {e}", listener.name))?;
        let addr = socket.local_addr()?;
        // Port 0 binds any free port; clients are told the one bound.
        if listener.advertised.port == 0 {
            listener.advertised.port = addr.port();
        }
        listener_addrs.push((listener.name.clone(), addr));
        sockets.push(socket);
    }
    let local_addr = listener_addrs[0].1;
    let config = Arc::new(config);
    let security = Arc::new(Security::open(&config, &disk)?);
    let logs = Arc::new(LogManager::open(
        config.clone(),
        disk.clone(),
        clock.now_ms(),
    )?);
    let store = Arc::new(ConsumerOffsetsStore::new(logs.clone(), clock.clone()));
    let groups = GroupCoordinator::new(GroupConfig::from_broker(&config), clock.clone(), store)
        .map_err(|e| anyhow::anyhow!("loading committed offsets from __consumer_offsets: {e}"))?;
    groups.set_topic_image(logs.clone());
    for (group_id, configs) in logs.all_group_configs() {
        groups.set_group_configs(&group_id, &configs);
    }
    let markers = Arc::new(MarkerWriter::new(
        logs.clone(),
        groups.clone(),
        clock.clone(),
    ));
    let txn_store = Arc::new(TransactionStateStore::new(logs.clone(), clock.clone()));
    let txn = TransactionCoordinator::new(
        TxnConfig::from_broker(&config),
        clock.clone(),
        txn_store,
        markers.clone(),
    )
    .map_err(|e| anyhow::anyhow!("loading transactions from __transaction_state: {e}"))?;
    let quotas = Arc::new(QuotaManager::open(&config, &disk)?);
    // At most `queued.max.request.bytes` of requests are held between reading and answering.
    let request_memory = usize::try_from(config.queued_max_request_bytes)
        .ok()
        .filter(|&bytes| bytes > 0)
        .map(|bytes| Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))));
    let broker = Arc::new(Broker {
        config: config.clone(),
        logs: logs.clone(),
        groups: groups.clone(),
        markers,
        txn: txn.clone(),
        clock: clock.clone(),
        shutdown: shutdown_rx.clone(),
        quotas,
        request_memory,
        security: security.clone(),
        metrics: Arc::new(BrokerMetrics::default()),
        faults: Arc::new(Faults::new(config.fault_injection_enable)),
        versions,
    });
    let faults = broker.faults.clone();
    let (running_logs, running_clock) = (logs.clone(), clock.clone());
    for (listener, (_, addr)) in config.listeners.iter().zip(&listener_addrs) {
        tracing::info!(listener = %listener.name, protocol = %listener.protocol, local_addr = %addr, advertised = %listener.advertised, node_id = config.node_id, "sluice is serving");
    }
    http_state.set_ready(broker.clone());
    log_kafka_started(&config);

    let task = tokio::spawn(async move {
        let (drain_tx, mut drain_rx) = mpsc::channel::<()>(1);
        let background = tokio::spawn(background_tasks(
            logs.clone(),
            config.clone(),
            clock,
            shutdown_rx.clone(),
        ));
        let group_timers = tokio::spawn({
            let (groups, shutdown) = (groups.clone(), shutdown_rx.clone());
            async move { groups.run_timers(shutdown).await }
        });
        let txn_timers = tokio::spawn(txn.clone().run_timers(shutdown_rx.clone()));
        let tls_reload = tokio::spawn(reload_tls_task(
            security.clone(),
            config.clone(),
            shutdown_rx.clone(),
        ));
        // One connection limit for every listener, as Kafka's max.connections.
        let permits = Arc::new(Semaphore::new(broker.config.max_connections));
        let mut accepting = Vec::new();
        for (index, socket) in sockets.into_iter().enumerate() {
            let bound = BoundListener {
                socket,
                index,
                tls: security.listeners[index].tls.clone(),
            };
            accepting.push(tokio::spawn(serve_listener(
                bound,
                broker.clone(),
                permits.clone(),
                shutdown_rx.clone(),
                drain_tx.clone(),
            )));
        }
        drop(drain_tx);
        for task in accepting {
            let _ = task.await;
        }
        let _ = tls_reload.await;
        // Parked joins and syncs are answered now, so their connections can finish.
        groups.shutdown();
        txn.shutdown();
        let _ = group_timers.await;
        let _ = txn_timers.await;
        // Every connection holds a drain sender; recv() returns None once all have finished.
        if tokio::time::timeout(SHUTDOWN_DRAIN_TIMEOUT, drain_rx.recv())
            .await
            .is_err()
        {
            tracing::warn!(
                "connections still busy after {SHUTDOWN_DRAIN_TIMEOUT:?}; closing logs anyway"
            );
        }
        let _ = background.await;
        tokio::task::spawn_blocking(move || logs.shutdown()).await??;
        tracing::info!("shut down cleanly");
        Ok(())
    });
    Ok(RunningBroker {
        local_addr,
        listener_addrs,
        http_addr,
        faults,
        logs: running_logs,
        clock: running_clock,
        shutdown: shutdown_tx,
        task,
    })
}

/// Reloads TLS key and trust stores whose files changed, every
/// `sluice.ssl.file.check.interval.ms` (0: never).
async fn reload_tls_task(
    security: Arc<Security>,
    config: Arc<Config>,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval_ms: u64 = config
        .properties
        .get("sluice.ssl.file.check.interval.ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    if interval_ms == 0 || security.listeners.iter().all(|l| l.tls.is_none()) {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let security = security.clone();
                let _ = tokio::task::spawn_blocking(move || security.reload_tls()).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// The lines Kafka logs once its log directory is recovered and it serves: test harnesses
/// (Testcontainers' Kafka modules) wait for them. Kafka in KRaft mode logs the first two, a
/// ZooKeeper-mode broker (`zookeeper.connect` set, which sluice otherwise ignores) the third.
fn log_kafka_started(config: &Config) {
    let id = config.node_id;
    tracing::info!("[BrokerLifecycleManager id={id}] The broker has been unfenced. Transitioning from RECOVERY to RUNNING.");
    if config.properties.contains_key("zookeeper.connect") {
        tracing::info!("[KafkaServer id={id}] started");
    } else {
        tracing::info!("[KafkaRaftServer nodeId={id}] Kafka Server started");
    }
}

/// Kafka's `log.initial.task.delay.ms` default: the first retention check waits this long.
const RETENTION_INITIAL_DELAY: Duration = Duration::from_secs(30);

/// One retention check: segments past retention go, and idle producers are forgotten.
fn retention_pass(logs: &LogManager, now_ms: i64) -> usize {
    let deleted = logs.enforce_retention(now_ms);
    logs.expire_producers(now_ms);
    deleted
}

/// Flushes logs whose flush interval passed, writes checkpoints, and enforces retention
/// periodically, as Kafka's log-flusher, checkpoint and retention tasks do.
async fn background_tasks(
    logs: Arc<LogManager>,
    config: Arc<Config>,
    clock: Arc<dyn Clock>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut flush = tokio::time::interval(Duration::from_millis(
        config.log_flush_scheduler_interval_ms,
    ));
    let mut checkpoint = tokio::time::interval(Duration::from_millis(
        config.log_flush_offset_checkpoint_interval_ms,
    ));
    // Kafka's log manager starts its retention task after an initial delay (30 s), never at
    // start-up itself: records produced in the first moments (even with old timestamps) are
    // not deleted before a client could read them. A shorter check interval shortens the delay.
    let retention_period = Duration::from_millis(config.log_retention_check_interval_ms);
    let mut retention = tokio::time::interval_at(
        tokio::time::Instant::now() + retention_period.min(RETENTION_INITIAL_DELAY),
        retention_period,
    );
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let cleaner = tokio::spawn(cleaner_task(
        logs.clone(),
        config.clone(),
        clock.clone(),
        shutdown.clone(),
    ));
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    checkpoint.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = flush.tick() => {
                let (logs, now_ms) = (logs.clone(), clock.now_ms());
                let _ = tokio::task::spawn_blocking(move || logs.flush_due(now_ms)).await;
            }
            // An offline log directory writes no checkpoints; that was logged when it went offline.
            _ = checkpoint.tick(), if !logs.is_offline() => {
                let logs = logs.clone();
                if let Ok(Err(e)) = tokio::task::spawn_blocking(move || logs.write_checkpoints()).await {
                    tracing::error!("writing checkpoints failed: {e}");
                }
            }
            _ = retention.tick() => {
                let (logs, now_ms) = (logs.clone(), clock.now_ms());
                let _ = tokio::task::spawn_blocking(move || retention_pass(&logs, now_ms)).await;
            }
            _ = shutdown.changed() => {
                // The round under way finishes before the logs close; no other starts.
                logs.stop_cleaning();
                let _ = cleaner.await;
                return;
            }
        }
    }
}

/// The log cleaner's own task, so that a long round never delays flushes or checkpoints: a pass
/// over the compacted logs every `log.cleaner.backoff.ms`, when `log.cleaner.enable` is set.
async fn cleaner_task(
    logs: Arc<LogManager>,
    config: Arc<Config>,
    clock: Arc<dyn Clock>,
    mut shutdown: watch::Receiver<bool>,
) {
    if !config.log_cleaner_enable {
        return;
    }
    // The first pass one backoff after start-up, not at once: nothing is newly dirty then.
    let period = Duration::from_millis(config.log_cleaner_backoff_ms);
    let mut backoff = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    backoff.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = backoff.tick() => {
                let (logs, now_ms) = (logs.clone(), clock.now_ms());
                let _ = tokio::task::spawn_blocking(move || logs.clean_logs(now_ms)).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}
