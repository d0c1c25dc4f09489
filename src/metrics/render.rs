//! The Prometheus text format (version 0.0.4) of `BrokerMetrics`, with the names the JMX
//! exporter's Kafka rules give Kafka's MBeans (lowercased `kafka_<domain>_<type>_<name>`,
//! `_total` for meters, a summary with Kafka's percentiles for timers); docs/metrics.md lists
//! them.

use std::fmt::Write;

use kafka_protocol::messages::ApiKey;

use super::histogram::{Histogram, QUANTILES};
use super::{BrokerMetrics, TopicMetrics, API_KEYS, VERSIONS};

/// One partition's log size, read from storage at scrape time.
pub struct LogSize {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: u64,
}

/// What a scrape reads from the rest of the broker.
pub struct Scrape<'a> {
    pub log_sizes: Vec<LogSize>,
    /// Time of each log flush (fsync of a partition's unflushed segments).
    pub log_flush: &'a Histogram,
}

/// Renders every metric.
pub fn render(metrics: &BrokerMetrics, scrape: &Scrape<'_>) -> String {
    let mut out = String::with_capacity(16 * 1024);
    topic_metrics(&mut out, metrics);
    request_metrics(&mut out, metrics);
    gauges(&mut out, metrics, scrape);
    out
}

type Timer = fn(&super::RequestMetrics) -> &Histogram;

type TopicCounter = fn(&TopicMetrics) -> &std::sync::atomic::AtomicU64;

const TOPIC_COUNTERS: &[(&str, &str, TopicCounter)] = &[
    ("messagesin", "Records appended", |m| &m.messages_in),
    ("bytesin", "Bytes of record batches appended", |m| {
        &m.bytes_in
    }),
    ("bytesout", "Bytes of records sent to fetches", |m| {
        &m.bytes_out
    }),
    (
        "totalproducerequests",
        "Produce requests, per partition",
        |m| &m.total_produce_requests,
    ),
    (
        "failedproducerequests",
        "Produce requests that failed, per partition",
        |m| &m.failed_produce_requests,
    ),
    ("totalfetchrequests", "Fetch requests, per partition", |m| {
        &m.total_fetch_requests
    }),
    (
        "failedfetchrequests",
        "Fetch requests that failed, per partition",
        |m| &m.failed_fetch_requests,
    ),
];

fn topic_metrics(out: &mut String, metrics: &BrokerMetrics) {
    let topics = metrics.topics_snapshot();
    for (name, help, counter) in TOPIC_COUNTERS {
        let family = format!("kafka_server_brokertopicmetrics_{name}_total");
        header(out, &family, help, "counter");
        let all = counter(&metrics.all_topics).load(std::sync::atomic::Ordering::Relaxed);
        let _ = writeln!(out, "{family} {all}");
        for (topic, m) in &topics {
            let value = counter(m).load(std::sync::atomic::Ordering::Relaxed);
            let _ = writeln!(out, "{family}{{topic=\"{}\"}} {value}", escape(topic));
        }
    }
}

/// Kafka's request name: the API's name, except that a client's fetch is `FetchConsumer`.
fn request_name(api_key: i16) -> Option<String> {
    let key = ApiKey::try_from(api_key).ok()?;
    Some(match key {
        ApiKey::Fetch => "FetchConsumer".to_string(),
        other => format!("{other:?}"),
    })
}

fn request_metrics(out: &mut String, metrics: &BrokerMetrics) {
    let served: Vec<(String, &super::RequestMetrics)> = (0..API_KEYS as i16)
        .filter_map(|k| Some((request_name(k)?, metrics.request(k)?)))
        .filter(|(_, m)| m.total_time.count() > 0)
        .collect();
    let family = "kafka_network_requestmetrics_requests_total";
    header(
        out,
        family,
        "Requests served, per API and version",
        "counter",
    );
    for (name, m) in &served {
        for version in 0..VERSIONS {
            let n = m.requests(version);
            if n > 0 {
                let _ = writeln!(
                    out,
                    "{family}{{request=\"{name}\",version=\"{version}\"}} {n}"
                );
            }
        }
    }
    let timers: [(&str, &str, Timer); 2] = [
        (
            "totaltimems",
            "Time from reading a request to writing its response, in ms",
            |m| &m.total_time,
        ),
        ("throttletimems", "Throttle time answered, in ms", |m| {
            &m.throttle_time
        }),
    ];
    for (name, help, histogram) in timers {
        let family = format!("kafka_network_requestmetrics_{name}");
        header(out, &family, help, "summary");
        for (request, m) in &served {
            summary(
                out,
                &family,
                &format!("request=\"{request}\""),
                histogram(m),
            );
        }
    }
}

fn gauges(out: &mut String, metrics: &BrokerMetrics, scrape: &Scrape<'_>) {
    use std::sync::atomic::Ordering::Relaxed;
    let family = "kafka_server_delayedoperationpurgatory_purgatorysize";
    header(out, family, "Requests waiting in a purgatory", "gauge");
    // One replica: an acks=all produce is answered when appended and never waits.
    let _ = writeln!(out, "{family}{{delayedOperation=\"Produce\"}} 0");
    let fetches = metrics.fetch_purgatory.load(Relaxed).max(0);
    let _ = writeln!(out, "{family}{{delayedOperation=\"Fetch\"}} {fetches}");

    let partitions = scrape.log_sizes.len();
    for (name, help, value) in [
        (
            "underreplicatedpartitions",
            "Partitions with fewer in-sync replicas than replicas (one broker: none)",
            0,
        ),
        ("partitioncount", "Partitions on this broker", partitions),
        ("leadercount", "Partitions this broker leads", partitions),
    ] {
        let family = format!("kafka_server_replicamanager_{name}");
        header(out, &family, help, "gauge");
        let _ = writeln!(out, "{family} {value}");
    }
    let family = "kafka_server_kafkaserver_brokerstate";
    header(out, family, "Kafka's broker state (3: RUNNING)", "gauge");
    let _ = writeln!(out, "{family} 3");

    let family = "kafka_log_log_size";
    header(out, family, "Bytes of a partition's log segments", "gauge");
    for log in &scrape.log_sizes {
        let _ = writeln!(
            out,
            "{family}{{topic=\"{}\",partition=\"{}\"}} {}",
            escape(&log.topic),
            log.partition,
            log.size_bytes
        );
    }
    let family = "kafka_log_logflushstats_logflushrateandtimems";
    header(out, family, "Time of a log flush (fsync), in ms", "summary");
    summary(out, family, "", scrape.log_flush);

    let family = "kafka_server_socket_server_metrics_connection_count";
    header(out, family, "Client connections open", "gauge");
    let _ = writeln!(out, "{family} {}", metrics.connections.load(Relaxed).max(0));
    let family = "kafka_server_socket_server_metrics_connection_creation_total";
    header(out, family, "Client connections accepted", "counter");
    let _ = writeln!(
        out,
        "{family} {}",
        metrics.connections_created.load(Relaxed)
    );
}

fn header(out: &mut String, family: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {family} {help}");
    let _ = writeln!(out, "# TYPE {family} {kind}");
}

/// A summary's quantile, sum and count samples; `labels` are the series' own, comma-free.
fn summary(out: &mut String, family: &str, labels: &str, histogram: &Histogram) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (q, label) in QUANTILES {
        let value = histogram.quantile_ms(q);
        let _ = writeln!(out, "{family}{{{labels}{sep}quantile=\"{label}\"}} {value}");
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{family}_sum{braces} {}", histogram.sum_ms());
    let _ = writeln!(out, "{family}_count{braces} {}", histogram.count());
}

/// A label value as the text format escapes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
