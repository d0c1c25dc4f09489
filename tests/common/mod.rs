//! A minimal raw-protocol client and a broker started in-process on 127.0.0.1:0 with a fresh
//! data directory, for socket tests that speak Kafka's bytes. A broker started with
//! `start_with_manual_clock` reads a `ManualClock`: tests move its time and run the retention or
//! flush pass on demand instead of sleeping until a background task notices.
#![allow(dead_code)]

pub mod acls;
pub mod classic;
pub mod configs;
pub mod consumer;
pub mod data;
pub mod groups;
pub mod offsets_v10;
pub mod quotas;
pub mod secure;
pub mod txn;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::Compression;
use sluice::config::Config;
use sluice::disk::{Disk, FaultPlan};
use sluice::record_batch::encode::{self, PlainRecord};
use sluice::server::{start_on, RunningBroker};
use sluice::storage::Partition;
use sluice::time::{Clock, ManualClock, SystemClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct TestBroker {
    pub broker: Option<RunningBroker>,
    pub dir: tempfile::TempDir,
    pub overrides: Vec<(String, String)>,
    /// The broker's clock, kept across restarts.
    clock: Arc<dyn Clock>,
    /// The same clock when it is manual.
    manual_clock: Option<Arc<ManualClock>>,
    /// The fault plan every start's `Disk` checks, when started with `start_with_faults`.
    faults: Option<Arc<FaultPlan>>,
}

impl TestBroker {
    /// A broker on the system clock.
    pub async fn start(overrides: &[(&str, &str)]) -> TestBroker {
        Self::start_on(overrides, Arc::new(SystemClock), None).await
    }

    /// A broker whose clock moves only through `advance_clock_ms`; it starts at the current
    /// wall-clock time, so batches stamped with `now_ms()` are within the broker's bounds.
    pub async fn start_with_manual_clock(overrides: &[(&str, &str)]) -> TestBroker {
        let clock = Arc::new(ManualClock::new(now_ms()));
        Self::start_on(overrides, clock.clone(), Some(clock)).await
    }

    /// A broker on the system clock whose storage operations check a fault plan (`faults`),
    /// kept across restarts; each start gets a fresh `Disk`, so a restart brings an offline log
    /// directory back (after recovery), as restarting the process would.
    pub async fn start_with_faults(overrides: &[(&str, &str)]) -> TestBroker {
        Self::start_with(
            overrides,
            Arc::new(SystemClock),
            None,
            Some(Arc::new(FaultPlan::new())),
        )
        .await
    }

    async fn start_on(
        overrides: &[(&str, &str)],
        clock: Arc<dyn Clock>,
        manual_clock: Option<Arc<ManualClock>>,
    ) -> TestBroker {
        Self::start_with(overrides, clock, manual_clock, None).await
    }

    async fn start_with(
        overrides: &[(&str, &str)],
        clock: Arc<dyn Clock>,
        manual_clock: Option<Arc<ManualClock>>,
        faults: Option<Arc<FaultPlan>>,
    ) -> TestBroker {
        let dir = tempfile::tempdir().unwrap();
        let overrides: Vec<(String, String)> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut test = TestBroker {
            broker: None,
            dir,
            overrides,
            clock,
            manual_clock,
            faults,
        };
        test.restart_in_place().await;
        test
    }

    /// The broker's time.
    pub fn clock_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Moves the manual clock forward; panics on a broker that runs on the system clock.
    pub fn advance_clock_ms(&self, delta_ms: i64) {
        self.manual_clock
            .as_ref()
            .expect("started with start_with_manual_clock")
            .advance_ms(delta_ms);
    }

    /// One retention pass at the broker's time (see `RunningBroker::run_retention_pass`).
    pub async fn run_retention_pass(&self) -> usize {
        self.broker.as_ref().unwrap().run_retention_pass().await
    }

    /// One log-cleaner pass at the broker's time; returns the cleaning rounds that ran.
    pub async fn run_cleaner_pass(&self) -> usize {
        self.broker.as_ref().unwrap().run_cleaner_pass().await
    }

    /// One flush-scheduler pass at the broker's time.
    pub async fn run_flush_pass(&self) {
        self.broker.as_ref().unwrap().run_flush_pass().await
    }

    /// A partition of the running broker, to inspect its log.
    pub fn partition(&self, topic: &str, index: i32) -> Arc<Partition> {
        let logs = self.broker.as_ref().unwrap().log_manager();
        let topic = logs.topic(topic).expect("topic exists");
        topic.partition(index).expect("partition exists").clone()
    }

    pub fn config(&self) -> Config {
        let mut pairs = vec![
            (
                "listeners".to_string(),
                "PLAINTEXT://127.0.0.1:0".to_string(),
            ),
            (
                "log.dirs".to_string(),
                self.dir.path().display().to_string(),
            ),
        ];
        pairs.extend(self.overrides.iter().cloned());
        Config::from_pairs(&pairs).unwrap()
    }

    /// The fault plan of a broker started with `start_with_faults`.
    pub fn faults(&self) -> &FaultPlan {
        self.faults
            .as_ref()
            .expect("started with start_with_faults")
    }

    async fn restart_in_place(&mut self) {
        let disk = match &self.faults {
            Some(plan) => Disk::with_faults(plan.clone()),
            None => Disk::real(),
        };
        self.broker = Some(
            start_on(self.config(), self.clock.clone(), disk)
                .await
                .unwrap(),
        );
    }

    /// Stops the broker and starts it again on the same directory, whether or not the stop
    /// succeeded: a broker whose log directory went offline cannot close its logs cleanly, so
    /// the start recovers them.
    pub async fn restart_after_failure(&mut self) {
        let _ = self.broker.take().unwrap().shutdown().await;
        self.restart_in_place().await;
    }

    /// Graceful shutdown followed by a start on the same directory.
    pub async fn restart(&mut self) {
        self.broker.take().unwrap().shutdown().await.unwrap();
        self.restart_in_place().await;
    }

    /// Emulates kill -9: a copy of the data directory as it is now (what the page cache holds,
    /// no clean-shutdown marker, nothing written at exit) gets a new broker; the old one is
    /// stopped and its directory dropped.
    pub async fn restart_after_crash(&mut self) {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(self.dir.path(), copy.path());
        self.broker.take().unwrap().shutdown().await.unwrap();
        self.dir = copy;
        self.restart_in_place().await;
    }

    pub async fn shutdown(&mut self) {
        self.broker.take().unwrap().shutdown().await.unwrap();
    }

    /// Starts a broker again on the directory after `shutdown` (to change files in between).
    pub async fn start_again(&mut self) {
        assert!(self.broker.is_none(), "shut the broker down first");
        self.restart_in_place().await;
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.broker.as_ref().unwrap().local_addr
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr()).await
    }
}

pub struct Client {
    pub stream: TcpStream,
    next_correlation_id: i32,
    /// The client id every request header carries.
    pub client_id: &'static str,
}

impl Client {
    pub async fn connect(addr: std::net::SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            next_correlation_id: 1,
            client_id: "sluice-test",
        }
    }

    /// Encodes header + body for `api_key` at `version`, with the i32 size prefix.
    pub fn frame<R: Encodable + HeaderVersion>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        body: &R,
    ) -> (i32, Bytes) {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header.encode(&mut buf, R::header_version(version)).unwrap();
        body.encode(&mut buf, version).unwrap();
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        (correlation_id, buf.freeze())
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Like `send_raw`, for bytes the broker may refuse by closing the connection before it has
    /// read them all: the write then fails instead of panicking the test.
    pub async fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads one response frame; None if the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let read = async {
            let mut size = [0u8; 4];
            self.stream.read_exact(&mut size).await.ok()?;
            let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
            self.stream.read_exact(&mut body).await.ok()?;
            Some(Bytes::from(body))
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("response within 30 s")
    }

    /// Sends a request and decodes its response, checking the correlation id.
    pub async fn call<Req, Resp>(&mut self, api_key: ApiKey, version: i16, body: &Req) -> Resp
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        let (correlation_id, frame) = self.frame(api_key, version, body);
        self.send_raw(&frame).await;
        let mut response = self
            .read_frame()
            .await
            .expect("broker closed the connection");
        let header = ResponseHeader::decode(&mut response, Resp::header_version(version)).unwrap();
        assert_eq!(header.correlation_id, correlation_id);
        Resp::decode(&mut response, version).unwrap()
    }

    /// True when the broker closes the connection (reads EOF) within 10 s.
    pub async fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(Duration::from_secs(10), self.stream.read(&mut buf)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

/// A v2 batch of `count` records with keys `k<i>` and values `v<i>`, base offset 0.
pub fn batch(count: usize, compression: Compression, timestamp_ms: i64) -> Bytes {
    let records = (0..count).map(|i| {
        PlainRecord::new(
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from(format!("v{i}"))),
            timestamp_ms + i as i64,
        )
    });
    encode::batch(records, compression).unwrap()
}

/// Copies a live data directory; files that vanish meanwhile are skipped.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else if let Err(e) = std::fs::copy(entry.path(), &target) {
            // A checkpoint's temporary file may be renamed away while we copy.
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        }
    }
}

/// `count` records without keys, each with a `value_bytes`-byte value, in one uncompressed
/// batch at base offset 0: for tests where only the size matters.
pub fn sized_batch(count: usize, value_bytes: usize) -> Bytes {
    let value = Bytes::from(vec![b'v'; value_bytes]);
    let records = (0..count).map(|_| PlainRecord::new(None, Some(value.clone()), now_ms()));
    encode::batch(records, Compression::None).unwrap()
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
