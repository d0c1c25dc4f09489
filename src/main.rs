//! The `sluice` binary: command line → configuration → logging → broker, then wait for SIGINT
//! or SIGTERM and shut down gracefully. No broker logic lives here. With `--ephemeral` the log
//! directory is a fresh temporary directory, removed when the process exits (after a signal's
//! graceful shutdown, or after a failure to start).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use sluice::config::Config;
use sluice::time::SystemClock;

#[global_allocator]
static ALLOCATOR: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

/// A Kafka-wire-compatible broker. With no arguments: 127.0.0.1:9092, data under ./data.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// A Kafka server.properties file (Kafka's keys; see config/server.properties).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// The same file, given positionally as to kafka-server-start.
    #[arg(value_name = "server.properties", conflicts_with = "config")]
    config_positional: Option<PathBuf>,
    /// Overrides one property, e.g. --override log.dirs=/tmp/sluice (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Reads settings from KAFKA_* environment variables after the file and before the
    /// overrides, as Kafka's container images do (KAFKA_LISTENERS is listeners, `_` is `.`,
    /// `__` is `_`, `___` is `-`).
    #[arg(long)]
    kafka_env: bool,
    /// Keeps the data in a new temporary directory (under $TMPDIR), removed at exit; it
    /// replaces the log.dirs of the config file. For tests and trials.
    #[arg(long)]
    ephemeral: bool,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    raise_open_file_limit();
    // Declared before the runtime, so it is removed after the runtime is gone.
    let ephemeral_dir = match args.ephemeral.then(ephemeral_log_dir).transpose() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::FAILURE;
        }
    };
    let log_dir_override = ephemeral_dir.as_ref().map(|dir| dir.path());
    let config = match load_config(&args, log_dir_override) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    match worker_threads_from_env() {
        Ok(Some(threads)) => {
            builder.worker_threads(threads);
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `TOKIO_WORKER_THREADS`, which tokio reads when no count is given and panics on when it is
/// not a number: checked here instead, so a bad value is an error message and exit status 2.
fn worker_threads_from_env() -> Result<Option<usize>, String> {
    const KEY: &str = "TOKIO_WORKER_THREADS";
    match std::env::var(KEY) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{KEY}: not a number")),
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(threads) if threads > 0 => Ok(Some(threads)),
            _ => Err(format!(
                "{KEY}: expected a number of threads above 0, got '{value}'"
            )),
        },
    }
}

/// The temporary log directory of `--ephemeral`; dropping it removes it.
fn ephemeral_log_dir() -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-ephemeral-")
        .tempdir()?;
    tracing::info!(log_dir = %dir.path().display(), "ephemeral: data removed at exit");
    Ok(dir)
}

/// The file's properties, then `--override`s, then `--ephemeral`'s log directory, which an
/// explicit `--override log.dirs` (or `log.dir`) contradicts.
fn load_config(args: &Args, ephemeral_log_dir: Option<&Path>) -> Result<Config, String> {
    let mut pairs = Vec::new();
    if let Some(path) = args.config.as_ref().or(args.config_positional.as_ref()) {
        pairs = Config::read_properties(path).map_err(|e| e.to_string())?;
    }
    if args.kafka_env {
        let from_env = sluice::config::env::properties_from_env(std::env::vars());
        for (key, _) in &from_env {
            if ephemeral_log_dir.is_some() && matches!(key.as_str(), "log.dirs" | "log.dir") {
                return Err(format!(
                    "--ephemeral chooses the log directory; unset KAFKA_{}",
                    key.to_ascii_uppercase().replace('.', "_")
                ));
            }
        }
        pairs.extend(from_env);
    }
    for item in &args.overrides {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("--override expects KEY=VALUE, got '{item}'"))?;
        pairs.push((key.trim().to_string(), value.trim().to_string()));
        if ephemeral_log_dir.is_some() && matches!(key.trim(), "log.dirs" | "log.dir") {
            return Err(format!(
                "--ephemeral chooses the log directory; drop '{item}'"
            ));
        }
    }
    if let Some(dir) = ephemeral_log_dir {
        // `Config::from_pairs` keeps the last value of a key, and applies log.dirs after
        // log.dir, so this wins over the file's.
        pairs.push(("log.dirs".to_string(), dir.display().to_string()));
    }
    Config::from_pairs(&pairs).map_err(|e| e.to_string())
}

/// Every partition keeps at least three files open (log and two indexes), so a default soft
/// limit of 1024 runs out at a few hundred partitions. Raise the soft limit to the hard one.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                tracing::warn!("cannot raise the open file limit");
            }
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let broker = sluice::server::start(config, Arc::new(SystemClock)).await?;
    wait_for_signal().await?;
    tracing::info!("shutting down");
    broker.shutdown().await
}

async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = terminate.recv() => Ok(()),
    }
}
