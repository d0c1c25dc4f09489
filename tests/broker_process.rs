//! The `sluice` binary as an operator runs it: `--config` (or the positional file) with the
//! committed `config/server.properties`, command-line overrides winning over the file, ignored
//! Kafka keys logged once, and SIGTERM: parked requests answered, exit status 0, and the
//! clean-shutdown marker and checkpoints Kafka writes, from which a restart serves everything.
//! `--ephemeral`: the data lives in a new directory under $TMPDIR, removed at exit.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::data::{create_topic, fetch, fetch_all_offsets, fetch_request, produce, topic_name};
use common::{batch, now_ms, Client};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;

/// A running `sluice` process on a port the kernel chose, with its stderr collected. Killed if
/// the test fails before it stops it.
struct BrokerProcess {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl BrokerProcess {
    /// Starts the binary with `args` and waits for its "sluice is serving" line.
    fn start(args: &[&str]) -> BrokerProcess {
        Self::start_with_env(args, &[])
    }

    /// `start`, with environment variables `env` set for the process.
    fn start_with_env(args: &[&str], env: &[(&str, &Path)]) -> BrokerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sluice");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (serving_tx, serving_rx) = mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let collected = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(addr) = listening_address(&line) {
                    let _ = serving_tx.send(addr);
                }
                collected.lock().unwrap().push(line);
            }
        });
        let addr = match serving_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!("sluice did not start: {:?}", stderr.lock().unwrap());
            }
        };
        BrokerProcess {
            child,
            addr,
            stderr,
        }
    }

    fn stderr_lines_containing(&self, text: &str) -> Vec<String> {
        let lines = self.stderr.lock().unwrap();
        lines.iter().filter(|l| l.contains(text)).cloned().collect()
    }

    fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on the pid of a child this test spawned and has not yet reaped.
        let sent = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(sent, 0, "signal {signal}");
    }

    /// Waits up to 30 s for the process to exit.
    fn wait(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "sluice did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The address in the start-up line `... sluice is serving local_addr=127.0.0.1:PORT ...`.
fn listening_address(line: &str) -> Option<SocketAddr> {
    if !line.contains("sluice is serving") {
        return None;
    }
    let rest = &line[line.find("local_addr=")? + "local_addr=".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

fn committed_server_properties() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/server.properties")
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_config_file_parses_and_overrides_win_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().display());
    let file = committed_server_properties();
    // The file says node.id=1, num.partitions=1 and listens on 9092.
    let broker = BrokerProcess::start(&[
        "--config",
        &file,
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        &log_dirs,
        "--override",
        "node.id=7",
        "--override",
        "num.partitions=3",
        "--override",
        "num.network.threads=8",
    ]);
    let mut client = Client::connect(broker.addr).await;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(topic_name("auto")))
            .with_topic_id(uuid::Uuid::nil())]))
        .with_allow_auto_topic_creation(true);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    assert_eq!(response.brokers.len(), 1);
    assert_eq!(response.brokers[0].node_id, BrokerId(7), "node.id override");
    assert_eq!(response.controller_id, BrokerId(7));
    assert_eq!(
        response.brokers[0].port,
        i32::from(broker.addr.port()),
        "listeners override"
    );
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(
        response.topics[0].partitions.len(),
        3,
        "num.partitions override"
    );
    assert!(dir.path().join("auto-2").is_dir(), "log.dirs override");
    let ignored = broker.stderr_lines_containing("num.network.threads");
    assert_eq!(ignored.len(), 1, "logged once: {ignored:?}");
    assert!(ignored[0].contains("ignoring"), "{}", ignored[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_value_stops_start_up_naming_the_key() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            &committed_server_properties(),
            "--override",
            "num.partitions=many",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("num.partitions"), "{stderr}");
}

#[test]
fn a_malformed_worker_thread_count_stops_start_up_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().display());
    for value in ["many", "0"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .env("TOKIO_WORKER_THREADS", value)
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", &log_dirs])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A broker that starts anyway would never exit: give it 10 s, then fail.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("TOKIO_WORKER_THREADS={value}: the broker started");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(
            status.code(),
            Some(2),
            "TOKIO_WORKER_THREADS={value}: {stderr}"
        );
        assert!(stderr.contains("TOKIO_WORKER_THREADS"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Reads a Kafka checkpoint file: version 0, a count, then `topic partition offset` lines.
fn read_checkpoint(path: &Path) -> Vec<(String, i32, i64)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("0"), "{path:?}: version");
    let count: usize = lines.next().unwrap().parse().unwrap();
    let entries: Vec<(String, i32, i64)> = lines
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!(fields.len(), 3, "{path:?}: {line}");
            (
                fields[0].to_string(),
                fields[1].parse().unwrap(),
                fields[2].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(entries.len(), count, "{path:?}: count");
    entries
}

fn offset_of(entries: &[(String, i32, i64)], topic: &str) -> Option<i64> {
    entries
        .iter()
        .find(|(t, p, _)| t == topic && *p == 0)
        .map(|e| e.2)
}

async fn delete_records(client: &mut Client, topic: &str, offset: i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default().with_offset(offset),
            ])]);
    let response: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &request).await;
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_parked_fetches_and_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().display());
    let file = committed_server_properties();
    let args = [
        file.as_str(),
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        &log_dirs,
    ];
    let mut broker = BrokerProcess::start(&args);
    let mut client = Client::connect(broker.addr).await;
    create_topic(&mut client, "kept", 1).await;
    create_topic(&mut client, "trimmed", 1).await;
    for topic in ["kept", "trimmed"] {
        for _ in 0..3 {
            let stored = produce(
                &mut client,
                9,
                topic,
                0,
                batch(5, Compression::Gzip, now_ms()),
            );
            assert_eq!(stored.await.error_code, 0);
        }
    }
    delete_records(&mut client, "trimmed", 4).await;

    // A long poll at the log end offset, parked when the signal arrives.
    let mut consumer = Client::connect(broker.addr).await;
    let parked = tokio::spawn(async move {
        let started = Instant::now();
        let data = fetch(
            &mut consumer,
            &fetch_request("kept", 0, 15, 60_000, 1 << 20),
        )
        .await;
        (data, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!parked.is_finished());
    broker.terminate();
    let (data, waited) = parked
        .await
        .expect("the parked fetch is answered, not reset");
    assert!(waited < Duration::from_secs(30), "answered at shutdown");
    assert_eq!((data.error_code, data.high_watermark), (0, 15));
    let status = tokio::task::spawn_blocking(move || (broker.wait(), broker))
        .await
        .unwrap();
    assert_eq!(status.0.code(), Some(0), "exit status");
    drop(status.1);

    assert!(dir.path().join(".kafka_cleanshutdown").exists());
    let recovery = read_checkpoint(&dir.path().join("recovery-point-offset-checkpoint"));
    assert_eq!(offset_of(&recovery, "kept"), Some(15), "{recovery:?}");
    assert_eq!(offset_of(&recovery, "trimmed"), Some(15), "{recovery:?}");
    let starts = read_checkpoint(&dir.path().join("log-start-offset-checkpoint"));
    assert_eq!(offset_of(&starts, "trimmed"), Some(4), "{starts:?}");
    // Kafka lists only logs whose start is past their first segment; sluice may list the
    // others, but only with their true log start offset.
    assert!(
        matches!(offset_of(&starts, "kept"), None | Some(0)),
        "{starts:?}"
    );

    let broker = BrokerProcess::start(&args);
    let mut client = Client::connect(broker.addr).await;
    assert_eq!(
        fetch_all_offsets(&mut client, "kept", 0).await,
        (0..15).collect::<Vec<_>>()
    );
    let trimmed = fetch(&mut client, &fetch_request("trimmed", 0, 4, 0, 1 << 20)).await;
    assert_eq!((trimmed.log_start_offset, trimmed.high_watermark), (4, 15));
    let loaded = broker.stderr_lines_containing("log directory loaded");
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert!(
        loaded[0].contains("clean_shutdown=true"),
        "the restart sees the clean shutdown and skips recovery: {}",
        loaded[0]
    );
}

/// The entries of `dir`, by name.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_data_lives_in_a_temporary_directory_removed_at_sigterm_and_sigint() {
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let tmp = tempfile::tempdir().unwrap();
        let file = committed_server_properties();
        // The file's log.dirs=./data is replaced by the temporary directory.
        let args = [
            "--ephemeral",
            file.as_str(),
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
        ];
        let mut broker = BrokerProcess::start_with_env(&args, &[("TMPDIR", tmp.path())]);
        let created = entries(tmp.path());
        assert_eq!(
            created.len(),
            1,
            "{name}: one directory in $TMPDIR: {created:?}"
        );
        assert!(created[0].starts_with("sluice-ephemeral-"), "{created:?}");
        let log_dir = tmp.path().join(&created[0]);
        let logged = broker.stderr_lines_containing("ephemeral");
        assert!(
            logged
                .iter()
                .any(|l| l.contains(&log_dir.display().to_string())),
            "{name}: the directory is logged: {logged:?}"
        );

        let mut client = Client::connect(broker.addr).await;
        create_topic(&mut client, "scratch", 1).await;
        let stored = produce(
            &mut client,
            9,
            "scratch",
            0,
            batch(3, Compression::None, now_ms()),
        );
        assert_eq!(stored.await.error_code, 0);
        let segment = log_dir.join("scratch-0/00000000000000000000.log");
        assert!(
            std::fs::metadata(&segment).unwrap().len() > 0,
            "{name}: the record is in the temporary directory"
        );

        broker.signal(signal);
        let status = tokio::task::spawn_blocking(move || (broker.wait(), broker))
            .await
            .unwrap();
        assert_eq!(status.0.code(), Some(0), "{name}: exit status");
        assert!(!log_dir.exists(), "{name}: {} removed", log_dir.display());
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{name}");
    }
}

#[test]
fn ephemeral_removes_its_directory_when_start_up_fails() {
    let tmp = tempfile::tempdir().unwrap();
    // The port is taken, so binding fails after the directory was created.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listeners = format!("listeners=PLAINTEXT://{}", taken.local_addr().unwrap());
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["--ephemeral", "--override", &listeners])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen"), "{stderr}");
    assert!(stderr.contains("sluice-ephemeral-"), "created: {stderr}");
    assert_eq!(
        entries(tmp.path()),
        Vec::<String>::new(),
        "removed: {stderr}"
    );
}

#[test]
fn ephemeral_refuses_an_explicit_log_directory() {
    let tmp = tempfile::tempdir().unwrap();
    for key in ["log.dirs", "log.dir"] {
        let override_ = format!("{key}={}", tmp.path().join("data").display());
        let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["--ephemeral", "--override", &override_])
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{key}: {stderr}");
        assert!(stderr.contains("--ephemeral"), "{stderr}");
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{key}");
    }
}
