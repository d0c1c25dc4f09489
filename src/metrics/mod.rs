//! The broker's metrics, named after Kafka's JMX metrics (docs/metrics.md maps each one):
//! request counts and times per API, messages and bytes in and bytes out per topic, purgatory
//! sizes, connections, throttle times and log flush times. Everything the request path records
//! is an atomic add: no lock per record or per request, except a read lock on the topic map
//! (taken once per partition of a produce or fetch, and a write lock the first time a topic is
//! seen). What only a scrape needs (log sizes, partition counts) is read from storage then, by
//! the caller of `render`. This module imports nothing else of the crate.

mod histogram;
mod render;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use histogram::Histogram;
pub use render::{render, LogSize, Scrape};

/// Request metrics are kept for API keys below this (Kafka's highest is in the nineties).
pub const API_KEYS: usize = 128;
/// Versions counted one by one per API; higher ones are counted with the highest.
pub const VERSIONS: usize = 24;

/// `kafka.network:type=RequestMetrics,request=<API>`: one API's requests.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    /// RequestsPerSec, per version.
    requests_by_version: [AtomicU64; VERSIONS],
    /// TotalTimeMs: from the request being read to its response being handed to the socket.
    pub total_time: Histogram,
    /// ThrottleTimeMs: the throttle time answered.
    pub throttle_time: Histogram,
}

impl RequestMetrics {
    pub fn requests(&self, version: usize) -> u64 {
        self.requests_by_version[version].load(Ordering::Relaxed)
    }
}

/// `kafka.server:type=BrokerTopicMetrics[,topic=<topic>]`: one topic's traffic (or all).
#[derive(Debug, Default)]
pub struct TopicMetrics {
    pub messages_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub total_produce_requests: AtomicU64,
    pub failed_produce_requests: AtomicU64,
    pub total_fetch_requests: AtomicU64,
    pub failed_fetch_requests: AtomicU64,
}

/// Every metric of one broker; `Arc`-shared by the network, api and server layers.
#[derive(Debug)]
pub struct BrokerMetrics {
    requests: Vec<RequestMetrics>,
    topics: RwLock<HashMap<String, Arc<TopicMetrics>>>,
    all_topics: TopicMetrics,
    /// `kafka.server:type=socket-server-metrics`: connections open now, and ever accepted.
    connections: AtomicI64,
    connections_created: AtomicU64,
    /// `DelayedOperationPurgatory,delayedOperation=Fetch`: fetches parked for data now.
    fetch_purgatory: AtomicI64,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics {
            requests: (0..API_KEYS).map(|_| RequestMetrics::default()).collect(),
            topics: RwLock::default(),
            all_topics: TopicMetrics::default(),
            connections: AtomicI64::new(0),
            connections_created: AtomicU64::new(0),
            fetch_purgatory: AtomicI64::new(0),
        }
    }
}

impl BrokerMetrics {
    /// The metrics of API `api_key` (None for a key past `API_KEYS`).
    pub fn request(&self, api_key: i16) -> Option<&RequestMetrics> {
        usize::try_from(api_key)
            .ok()
            .and_then(|k| self.requests.get(k))
    }

    /// One request served: its API, version, time and answered throttle time.
    pub fn record_request(&self, api_key: i16, version: i16, total: Duration, throttle_ms: i32) {
        let Some(metrics) = self.request(api_key) else {
            return;
        };
        let version = usize::try_from(version).unwrap_or(0).min(VERSIONS - 1);
        metrics.requests_by_version[version].fetch_add(1, Ordering::Relaxed);
        metrics.total_time.record(total);
        metrics
            .throttle_time
            .record_ms(u64::try_from(throttle_ms).unwrap_or(0));
    }

    /// One partition of a produce: `messages` records of `bytes` appended, or a failure.
    pub fn record_produce(&self, topic: &str, messages: u64, bytes: u64, failed: bool) {
        let t = self.topic(topic);
        for m in [&*t, &self.all_topics] {
            m.total_produce_requests.fetch_add(1, Ordering::Relaxed);
            if failed {
                m.failed_produce_requests.fetch_add(1, Ordering::Relaxed);
            } else {
                m.messages_in.fetch_add(messages, Ordering::Relaxed);
                m.bytes_in.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }

    /// One partition of a fetch: `bytes` of records sent, or a failure.
    pub fn record_fetch(&self, topic: &str, bytes: u64, failed: bool) {
        let t = self.topic(topic);
        for m in [&*t, &self.all_topics] {
            m.total_fetch_requests.fetch_add(1, Ordering::Relaxed);
            if failed {
                m.failed_fetch_requests.fetch_add(1, Ordering::Relaxed);
            } else {
                m.bytes_out.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }

    /// A connection accepted; the guard counts it closed when dropped.
    pub fn connection_opened(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.connections_created.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    /// A fetch parked until data arrives; the guard takes it out of the purgatory when dropped.
    pub fn fetch_parked(self: &Arc<Self>) -> PurgatoryGuard {
        self.fetch_purgatory.fetch_add(1, Ordering::Relaxed);
        PurgatoryGuard(self.clone())
    }

    /// A topic's metrics, created the first time it is seen.
    fn topic(&self, topic: &str) -> Arc<TopicMetrics> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = topics.get(topic) {
            return t.clone();
        }
        drop(topics);
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        topics.entry(topic.to_string()).or_default().clone()
    }

    /// Forgets a deleted topic's metrics, as Kafka removes its per-topic meters.
    pub fn remove_topic(&self, topic: &str) {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        topics.remove(topic);
    }

    fn topics_snapshot(&self) -> Vec<(String, Arc<TopicMetrics>)> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = topics.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// Counts one open connection until dropped.
pub struct ConnectionGuard(Arc<BrokerMetrics>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts one parked fetch until dropped.
pub struct PurgatoryGuard(Arc<BrokerMetrics>);

impl Drop for PurgatoryGuard {
    fn drop(&mut self) {
        self.0.fetch_purgatory.fetch_sub(1, Ordering::Relaxed);
    }
}
