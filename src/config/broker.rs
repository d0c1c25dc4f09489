//! The broker settings table: one row per Kafka broker key sluice knows, with its type, its
//! default, how `server.properties` and `--override` values are checked and applied to
//! `Config`, whether `kafka-configs --entity-type brokers` may change it at runtime, and whether
//! DescribeConfigs lists it for the node's broker resource. Parsing, `Config::default()`,
//! dynamic updates (`check`, `is_dynamic`) and broker DescribeConfigs all derive from it (`settings`).
//!
//! A topic config's broker synonym (`log.segment.bytes`, `log.retention.hours`, ...) is a row
//! too, but its type and default come from the topic table (`topic.rs`): a synonym in the topic
//! config's own unit has the topic config's default, one in another unit has none (Kafka's
//! precedence, e.g. `log.retention.ms` over `.minutes` over `.hours`, is the order of the
//! topic row's synonyms). Such keys are dynamic, as Kafka's `DynamicLogConfig`; their values
//! stay in `Config::properties`, from which topic settings resolve them.
//!
//! To add a broker setting: add a field to `Config` (units in its name) and one row here
//! (`row(name, type, default, update, set!(field ...), shown)`); list it in
//! `config/server.properties` with the same default (a test compares the two).

use super::group::{parse_assignors, parse_migration_policy};
use super::listeners::{check_endpoints, format_listeners};
use super::topic::{self, ConfigType};
use super::{
    byte_rate, parse, parse_bool, parse_emulated_version, parse_http_listener, parse_min, Config,
    ConfigError,
};

/// What `kafka-configs --entity-type brokers` may do with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Kafka reads it only at start-up: "Cannot update these configs dynamically".
    Static,
    /// A topic config's broker synonym: applied at runtime, per broker or as cluster default.
    Dynamic,
    /// Dynamic in Kafka, but sluice reads it only at start-up: refused, not stored and ignored.
    KafkaOnly,
    /// sluice's own key, read only at start-up: refused like `KafkaOnly`.
    Sluice,
}

/// Checks a value and applies it to `Config`; a topic synonym's only checks it.
type Apply = fn(&mut Config, &str, &str) -> Result<(), ConfigError>;

/// What DescribeConfigs reports for the node's broker resource.
#[derive(Clone, Copy)]
enum Show {
    /// Not listed by its row. (DescribeConfigs lists every topic synonym anyway: one in its
    /// topic config's unit always, one in another unit when a layer sets it.)
    No,
    /// Listed with the value in force, read from `Config`.
    Value(fn(&Config) -> String),
    /// Listed with the value in force of the topic config it stands for.
    Topic,
}

/// One broker key.
#[derive(Clone)]
pub struct BrokerSetting {
    pub name: &'static str,
    kind: ConfigType,
    /// None for a topic synonym (see `default`) and for keys without a default.
    default: Option<&'static str>,
    pub update: Update,
    /// None: known to Kafka, of no use to a single sluice broker; accepted and logged.
    apply: Option<Apply>,
    show: Show,
}

const fn row(
    name: &'static str,
    kind: ConfigType,
    default: Option<&'static str>,
    update: Update,
    apply: Apply,
    show: Show,
) -> BrokerSetting {
    BrokerSetting {
        name,
        kind,
        default,
        update,
        apply: Some(apply),
        show,
    }
}

/// A topic config's broker synonym: type and default from the topic table.
const fn syn(name: &'static str, apply: Apply, show: Show) -> BrokerSetting {
    BrokerSetting {
        name,
        kind: ConfigType::String,
        default: None,
        update: Update::Dynamic,
        apply: Some(apply),
        show,
    }
}

/// A key Kafka knows that sluice accepts without using.
const fn ignored(name: &'static str, update: Update) -> BrokerSetting {
    BrokerSetting {
        name,
        kind: ConfigType::String,
        default: None,
        update,
        apply: None,
        show: Show::No,
    }
}

/// `set!(field, min N)`: an integer of at least N; `set!(field, f)`: `f(key, value)`.
macro_rules! set {
    ($field:ident, min $min:expr) => {
        |c: &mut Config, k: &str, v: &str| {
            c.$field = parse_min(k, v, $min)?;
            Ok(())
        }
    };
    ($field:ident, $parse:expr) => {
        |c: &mut Config, k: &str, v: &str| {
            c.$field = $parse(k, v)?;
            Ok(())
        }
    };
}

/// `check!(T, min N)`: a topic synonym that must parse as `T` and be at least N.
macro_rules! check {
    ($ty:ty, min $min:expr) => {
        |_: &mut Config, k: &str, v: &str| parse_min::<$ty>(k, v, $min).map(drop)
    };
}

/// A topic synonym checked as its topic config is (`"<key>: <Kafka's message>"`).
fn check_topic(_: &mut Config, key: &str, value: &str) -> Result<(), ConfigError> {
    let checked = match topic::broker_synonym(key) {
        Some((def, 1)) => topic::validate(def.name, value),
        Some((def, factor)) => topic::validate_as(def, key, value, factor),
        None => Ok(()),
    };
    checked.map_err(|e| ConfigError(format!("{key}: {e}")))
}

/// A retention time in the key's unit: at least -1 (forever).
fn check_retention(_: &mut Config, key: &str, value: &str) -> Result<(), ConfigError> {
    parse_min::<i64>(key, value, -1).map(drop)
}

fn set_log_dir(c: &mut Config, key: &str, value: &str) -> Result<(), ConfigError> {
    let first = value.split(',').next().unwrap_or("").trim();
    if first.is_empty() {
        return Err(ConfigError(format!("{key}: empty path")));
    }
    if value.contains(',') {
        tracing::warn!(
            key,
            "sluice uses one log directory; using the first: {first}"
        );
    }
    c.log_dir = std::path::PathBuf::from(first);
    Ok(())
}

fn request_percentage(key: &str, value: &str) -> Result<Option<f64>, ConfigError> {
    let percentage: f64 = parse(key, value)?;
    if !(percentage.is_finite() && percentage > 0.0) {
        return Err(ConfigError(format!("{key}: must be a number above 0")));
    }
    Ok(Some(percentage))
}

fn some_byte_rate(key: &str, value: &str) -> Result<Option<f64>, ConfigError> {
    byte_rate(key, value).map(Some)
}

/// A key whose value is checked where it is used: listeners by `listeners::resolve`, security
/// settings (read per listener through `Config::listener_value`) by `security` at start-up.
fn checked_where_used(_: &mut Config, _: &str, _: &str) -> Result<(), ConfigError> {
    Ok(())
}

/// A whole number of milliseconds, at least 0.
fn check_ms(_: &mut Config, key: &str, value: &str) -> Result<(), ConfigError> {
    parse_min::<i64>(key, value, 0).map(drop)
}

fn check_bool(_: &mut Config, key: &str, value: &str) -> Result<(), ConfigError> {
    parse_bool(key, value).map(drop)
}

/// A listeners value: checked here, resolved with the keys it depends on by `from_pairs`.
fn check_listeners(_: &mut Config, key: &str, value: &str) -> Result<(), ConfigError> {
    check_endpoints(key, value)
}

/// Every broker key sluice knows, in name order: the rows of the table below, and a plain
/// synonym row (`syn(key, check_topic, No)`: checked as its topic config, listed by
/// DescribeConfigs as every topic synonym is) for each topic config's broker synonym the table
/// does not list. A new topic config with a broker synonym so needs a row here only when the
/// synonym has a bound or a listing of its own.
pub fn settings() -> &'static [BrokerSetting] {
    static ALL: std::sync::OnceLock<Vec<BrokerSetting>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = table::BROKER.to_vec();
        for def in topic::TOPIC_CONFIGS {
            for (key, _) in def.synonyms {
                let listed = all.iter().any(|setting| setting.name == *key);
                if !listed && topic::broker_synonym(key).is_some() {
                    all.push(syn(key, check_topic, Show::No));
                }
            }
        }
        all.sort_by_key(|setting| setting.name);
        all
    })
}

#[cfg(test)]
pub(super) use table::BROKER;

#[rustfmt::skip]
mod table {
    use super::ConfigType::*;
    use super::Show::{No, Topic, Value};
    use super::Update::*;
    use super::*;

    /// The broker keys that need a row of their own, in name order (see `settings`).
    pub const BROKER: &[BrokerSetting] = &[
    row("add.partitions.to.txn.retry.backoff.max.ms", Int, Some("100"), Static, set!(add_partitions_to_txn_retry_backoff_max_ms, min 0), No),
    row("add.partitions.to.txn.retry.backoff.ms", Int, Some("20"), Static, set!(add_partitions_to_txn_retry_backoff_ms, min 1), No),
    row("advertised.listeners", String, None, Static, check_listeners, Value(|c| format_listeners(&c.listeners, true))),
    row("allow.everyone.if.no.acl.found", Boolean, Some("false"), Static, check_bool, No),
    row("authorizer.class.name", String, Some(""), Static, checked_where_used, No),
    row("auto.create.topics.enable", Boolean, Some("true"), Static, set!(auto_create_topics_enable, parse_bool), Value(|c| c.auto_create_topics_enable.to_string())),
    ignored("background.threads", KafkaOnly),
    ignored("broker.id", Static),
    row("connection.failed.authentication.delay.ms", Int, Some("100"), Static, check_ms, No),
    row("connections.max.reauth.ms", Long, Some("0"), KafkaOnly, check_ms, No),
    row("controller.listener.names", String, None, Static, checked_where_used, No),
    ignored("controller.quorum.bootstrap.servers", Static),
    ignored("controller.quorum.voters", Static),
    row("default.replication.factor", Int, Some("1"), Static, set!(default_replication_factor, min 1), Value(|c| c.default_replication_factor.to_string())),
    row("fetch.max.bytes", Int, Some("57671680"), Static, set!(fetch_max_bytes, min 0), Value(|c| c.fetch_max_bytes.to_string())),
    row("group.consumer.assignment.interval.ms", Int, Some("1000"), Static, set!(group_consumer_assignment_interval_ms, min 0), No),
    ignored("group.consumer.assignor.offload.enable", Static),
    row("group.consumer.assignors", List, Some("uniform,range"), Static, set!(group_consumer_assignors, parse_assignors), No),
    row("group.consumer.heartbeat.interval.ms", Int, Some("5000"), Static, set!(group_consumer_heartbeat_interval_ms, min 1), No),
    row("group.consumer.max.assignment.interval.ms", Int, Some("15000"), Static, set!(group_consumer_max_assignment_interval_ms, min 0), No),
    row("group.consumer.max.heartbeat.interval.ms", Int, Some("15000"), Static, set!(group_consumer_max_heartbeat_interval_ms, min 1), No),
    row("group.consumer.max.session.timeout.ms", Int, Some("60000"), Static, set!(group_consumer_max_session_timeout_ms, min 1), No),
    row("group.consumer.max.size", Int, Some("2147483647"), Static, set!(group_consumer_max_size, min 1), No),
    row("group.consumer.migration.policy", String, Some("bidirectional"), Static, set!(group_consumer_migration_policy, parse_migration_policy), No),
    row("group.consumer.min.assignment.interval.ms", Int, Some("0"), Static, set!(group_consumer_min_assignment_interval_ms, min 0), No),
    row("group.consumer.min.heartbeat.interval.ms", Int, Some("5000"), Static, set!(group_consumer_min_heartbeat_interval_ms, min 1), No),
    row("group.consumer.min.session.timeout.ms", Int, Some("45000"), Static, set!(group_consumer_min_session_timeout_ms, min 1), No),
    row("group.consumer.regex.refresh.interval.ms", Int, Some("600000"), Static, set!(group_consumer_regex_refresh_interval_ms, min 10000), No),
    row("group.consumer.session.timeout.ms", Int, Some("45000"), Static, set!(group_consumer_session_timeout_ms, min 1), No),
    row("group.initial.rebalance.delay.ms", Int, Some("3000"), Static, set!(group_initial_rebalance_delay_ms, min 0), No),
    row("group.max.session.timeout.ms", Int, Some("1800000"), Static, set!(group_max_session_timeout_ms, min 0), No),
    row("group.max.size", Int, Some("2147483647"), Static, set!(group_max_size, min 1), No),
    row("group.min.session.timeout.ms", Int, Some("6000"), Static, set!(group_min_session_timeout_ms, min 0), No),
    row("inter.broker.listener.name", String, None, Static, checked_where_used, No),
    row("listener.security.protocol.map", String, Some("SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"), Static, checked_where_used, No),
    row("listeners", String, Some("PLAINTEXT://127.0.0.1:9092"), Static, check_listeners, Value(|c| format_listeners(&c.listeners, false))),
    row("log.cleaner.backoff.ms", Long, Some("15000"), KafkaOnly, set!(log_cleaner_backoff_ms, min 1), No),
    row("log.cleaner.dedupe.buffer.size", Long, Some("134217728"), KafkaOnly, set!(log_cleaner_dedupe_buffer_bytes, min 1), No),
    row("log.cleaner.enable", Boolean, Some("true"), Static, set!(log_cleaner_enable, parse_bool), No),
    ignored("log.cleaner.io.buffer.load.factor", KafkaOnly),
    ignored("log.cleaner.io.buffer.size", KafkaOnly),
    ignored("log.cleaner.io.max.bytes.per.second", KafkaOnly),
    ignored("log.cleaner.threads", KafkaOnly),
    row("log.dir", String, None, Static, set_log_dir, No),
    row("log.dirs", String, Some("./data"), Static, set_log_dir, Value(|c| c.log_dir.display().to_string())),
    syn("log.flush.interval.messages", check!(u64, min 1), Topic),
    syn("log.flush.interval.ms", check!(i64, min 0), Topic),
    row("log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), Static, set!(log_flush_offset_checkpoint_interval_ms, min 1), Value(|c| c.log_flush_offset_checkpoint_interval_ms.to_string())),
    row("log.flush.scheduler.interval.ms", Long, Some("1000"), Static, set!(log_flush_scheduler_interval_ms, min 1), Value(|c| c.log_flush_scheduler_interval_ms.to_string())),
    syn("log.index.interval.bytes", check!(u64, min 0), Topic),
    syn("log.index.size.max.bytes", check!(u64, min 12), Topic),
    syn("log.message.timestamp.after.max.ms", check!(i64, min 0), Topic),
    syn("log.message.timestamp.before.max.ms", check!(i64, min 0), Topic),
    syn("log.retention.bytes", check!(i64, min -1), No),
    row("log.retention.check.interval.ms", Long, Some("300000"), Static, set!(log_retention_check_interval_ms, min 1), No),
    syn("log.retention.hours", check_retention, No),
    syn("log.retention.minutes", check_retention, No),
    syn("log.retention.ms", check_retention, No),
    syn("log.roll.hours", check!(i64, min 1), No),
    syn("log.roll.ms", check!(i64, min 1), Topic),
    syn("log.segment.bytes", check!(u64, min 14), Topic),
    syn("log.segment.delete.delay.ms", check!(i64, min 0), No),
    ignored("max.connection.creation.rate", KafkaOnly),
    row("max.connections", Int, Some("10000"), KafkaOnly, set!(max_connections, min 1), Value(|c| c.max_connections.to_string())),
    ignored("max.connections.per.ip", KafkaOnly),
    ignored("max.connections.per.ip.overrides", KafkaOnly),
    syn("message.max.bytes", check!(i32, min 0), Topic),
    row("node.id", Int, Some("1"), Static, set!(node_id, parse), Value(|c| c.node_id.to_string())),
    ignored("num.io.threads", KafkaOnly),
    ignored("num.network.threads", KafkaOnly),
    row("num.partitions", Int, Some("1"), Static, set!(num_partitions, min 1), Value(|c| c.num_partitions.to_string())),
    ignored("num.recovery.threads.per.data.dir", KafkaOnly),
    ignored("num.replica.fetchers", KafkaOnly),
    row("offset.metadata.max.bytes", Int, Some("4096"), Static, set!(offset_metadata_max_bytes, min 0), No),
    row("offsets.retention.minutes", Int, Some("10080"), Static, set!(offsets_retention_minutes, min 1), No),
    ignored("offsets.topic.num.partitions", Static),
    ignored("offsets.topic.replication.factor", Static),
    row("offsets.topic.segment.bytes", Int, Some("104857600"), Static, set!(offsets_topic_segment_bytes, min 1), No),
    row("principal.builder.class", String, None, Static, checked_where_used, No),
    ignored("process.roles", Static),
    row("producer.id.expiration.ms", Int, Some("86400000"), KafkaOnly, set!(producer_id_expiration_ms, min 1), No),
    // sluice bounds request memory by default; Kafka's default is -1 (unbounded).
    row("queued.max.request.bytes", Long, Some("104857600"), Static, set!(queued_max_request_bytes, parse), Value(|c| c.queued_max_request_bytes.to_string())),
    row("quota.window.num", Int, Some("11"), Static, set!(quota_window_num, min 1), Value(|c| c.quota_window_num.to_string())),
    row("quota.window.size.seconds", Int, Some("1"), Static, set!(quota_window_size_seconds, min 1), Value(|c| c.quota_window_size_seconds.to_string())),
    row("sasl.enabled.mechanisms", List, Some("GSSAPI"), KafkaOnly, checked_where_used, No),
    row("sasl.jaas.config", String, None, KafkaOnly, checked_where_used, No),
    row("sasl.mechanism.inter.broker.protocol", String, None, KafkaOnly, checked_where_used, No),
    row("sasl.oauthbearer.clock.skew.seconds", Int, Some("30"), Static, check_ms, No),
    row("sasl.oauthbearer.expected.audience", List, None, Static, checked_where_used, No),
    row("sasl.oauthbearer.expected.issuer", String, None, Static, checked_where_used, No),
    row("sasl.oauthbearer.jwks.endpoint.refresh.ms", Long, Some("3600000"), Static, check_ms, No),
    row("sasl.oauthbearer.jwks.endpoint.url", String, None, Static, checked_where_used, No),
    row("sasl.oauthbearer.scope.claim.name", String, Some("scope"), Static, checked_where_used, No),
    row("sasl.oauthbearer.sub.claim.name", String, Some("sub"), Static, checked_where_used, No),
    row("sasl.server.callback.handler.class", String, None, Static, checked_where_used, No),
    row("sasl.server.max.receive.size", Int, Some("524288"), Static, check_ms, No),
    row("security.inter.broker.protocol", String, None, Static, checked_where_used, No),
    ignored("share.coordinator.state.topic.min.isr", Static),
    ignored("share.coordinator.state.topic.replication.factor", Static),
    row("sluice.emulate.kafka.version", String, None, Sluice, set!(emulate_kafka_version, parse_emulated_version), No),
    row("sluice.fault.injection.enable", Boolean, Some("false"), Sluice, set!(fault_injection_enable, parse_bool), No),
    row("sluice.http.listener", String, None, Sluice, set!(http_listener, parse_http_listener), No),
    row("sluice.max.in.flight.requests.per.connection", Int, Some("16"), Sluice, set!(max_in_flight_requests_per_connection, min 1), No),
    row("sluice.max.partitions.per.topic", Int, Some("10000"), Sluice, set!(max_partitions_per_topic, min 1), No),
    row("sluice.quota.consumer.default", Long, None, Sluice, set!(quota_consumer_default_bytes_per_second, some_byte_rate), No),
    row("sluice.quota.producer.default", Long, None, Sluice, set!(quota_producer_default_bytes_per_second, some_byte_rate), No),
    row("sluice.quota.request.percentage.default", Double, None, Sluice, set!(quota_request_default_percentage, request_percentage), No),
    row("sluice.ssl.file.check.interval.ms", Long, Some("5000"), Sluice, check_ms, No),
    ignored("socket.receive.buffer.bytes", Static),
    row("socket.request.max.bytes", Int, Some("104857600"), Static, set!(socket_request_max_bytes, min 1), Value(|c| c.socket_request_max_bytes.to_string())),
    ignored("socket.send.buffer.bytes", Static),
    row("ssl.cipher.suites", List, None, KafkaOnly, checked_where_used, No),
    row("ssl.client.auth", String, Some("none"), KafkaOnly, checked_where_used, No),
    row("ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3"), KafkaOnly, checked_where_used, No),
    ignored("ssl.endpoint.identification.algorithm", KafkaOnly),
    row("ssl.key.password", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.keystore.certificate.chain", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.keystore.key", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.keystore.location", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.keystore.password", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.keystore.type", String, Some("JKS"), KafkaOnly, checked_where_used, No),
    row("ssl.principal.mapping.rules", String, Some("DEFAULT"), Static, checked_where_used, No),
    row("ssl.protocol", String, Some("TLSv1.3"), KafkaOnly, checked_where_used, No),
    row("ssl.truststore.certificates", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.truststore.location", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.truststore.password", String, None, KafkaOnly, checked_where_used, No),
    row("ssl.truststore.type", String, Some("JKS"), KafkaOnly, checked_where_used, No),
    row("super.users", String, None, Static, checked_where_used, No),
    row("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, Some("10000"), Static, set!(transaction_abort_timed_out_transaction_cleanup_interval_ms, min 1), No),
    row("transaction.max.timeout.ms", Int, Some("900000"), Static, set!(transaction_max_timeout_ms, min 1), No),
    row("transaction.partition.verification.enable", Boolean, Some("true"), KafkaOnly, set!(transaction_partition_verification_enable, parse_bool), No),
    row("transaction.remove.expired.transaction.cleanup.interval.ms", Int, Some("3600000"), Static, set!(transaction_remove_expired_transaction_cleanup_interval_ms, min 1), No),
    row("transaction.state.log.load.buffer.size", Int, Some("5242880"), Static, set!(transaction_state_log_load_buffer_bytes, min 1), No),
    ignored("transaction.state.log.min.isr", Static),
    row("transaction.state.log.num.partitions", Int, Some("50"), Static, set!(transaction_state_log_num_partitions, min 1), No),
    ignored("transaction.state.log.replication.factor", Static),
    row("transaction.state.log.segment.bytes", Int, Some("104857600"), Static, set!(transaction_state_log_segment_bytes, min 1), No),
    ignored("transaction.two.phase.commit.enable", Static),
    row("transactional.id.expiration.ms", Int, Some("604800000"), Static, set!(transactional_id_expiration_ms, min 1), No),
    ignored("zookeeper.connect", Static),
];
}

/// The row of `key`, if sluice knows it.
pub fn find(key: &str) -> Option<&'static BrokerSetting> {
    let all = settings();
    all.binary_search_by(|s| s.name.cmp(key))
        .ok()
        .map(|i| &all[i])
}

impl BrokerSetting {
    /// The type DescribeConfigs reports.
    pub fn kind(&self) -> ConfigType {
        match topic::broker_synonym(self.name) {
            Some((def, 1)) => def.kind,
            Some(_) => ConfigType::Int,
            None => self.kind,
        }
    }

    /// The default: the row's own, or, for a synonym in its topic config's unit, the topic
    /// config's.
    pub fn default(&self) -> Option<&'static str> {
        match topic::broker_synonym(self.name) {
            Some((def, 1)) => Some(def.default),
            Some(_) => None,
            None => self.default,
        }
    }

    /// Whether sluice uses the key (the others are accepted and logged).
    pub fn is_used(&self) -> bool {
        self.apply.is_some()
    }

    /// Checks `value` and applies it to `config`; nothing for an ignored key.
    pub fn apply(&self, config: &mut Config, value: &str) -> Result<(), ConfigError> {
        self.apply
            .map_or(Ok(()), |apply| apply(config, self.name, value))
    }

    /// The value in force DescribeConfigs lists for the node, or None when it is not listed.
    pub fn shown(&self, config: &Config) -> Option<String> {
        match self.show {
            Show::No => None,
            Show::Value(value) => Some(value(config)),
            Show::Topic => {
                let (def, _) = topic::broker_synonym(self.name)?;
                Some(config.topic_values().get(def.name))
            }
        }
    }
}

/// Why a broker config change was refused; both are INVALID_REQUEST in Kafka.
#[derive(Debug, PartialEq)]
pub enum BrokerConfigError {
    NotDynamic(Vec<String>),
    /// Dynamic in Kafka (or sluice's own keys), but sluice reads them only at start-up.
    NotDynamicInSluice(Vec<String>),
    InvalidValue(String),
}

impl std::fmt::Display for BrokerConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Kafka 4.4 prints a Java Set (4.1's broker printed a Scala one, `Set(...)`).
            BrokerConfigError::NotDynamic(names) => write!(
                f,
                "Cannot update these configs dynamically: [{}]",
                names.join(", ")
            ),
            BrokerConfigError::NotDynamicInSluice(names) => write!(
                f,
                "sluice cannot update these configs dynamically: {}; set them in server.properties",
                names.join(", ")
            ),
            BrokerConfigError::InvalidValue(m) => f.write_str(m),
        }
    }
}

/// Checks a whole new set of dynamic configs for one entity, as Kafka does: every key must be
/// dynamically updatable and every value valid. Keys Kafka does not know are accepted and
/// stored, as Kafka stores them.
pub fn check(
    configs: &std::collections::BTreeMap<String, String>,
) -> Result<(), BrokerConfigError> {
    let names = |keep: &dyn Fn(Update) -> bool| -> Vec<String> {
        configs
            .keys()
            .filter(|k| find(k).is_some_and(|s| keep(s.update)))
            .cloned()
            .collect()
    };
    let not_dynamic = names(&|u| u == Update::Static);
    if !not_dynamic.is_empty() {
        return Err(BrokerConfigError::NotDynamic(not_dynamic));
    }
    let mut not_in_sluice = names(&|u| matches!(u, Update::KafkaOnly | Update::Sluice));
    // sluice's own namespace: a key sluice does not know there is a typo, never a custom config.
    not_in_sluice.extend(
        configs
            .keys()
            .filter(|k| k.starts_with("sluice.") && find(k).is_none())
            .cloned(),
    );
    if !not_in_sluice.is_empty() {
        return Err(BrokerConfigError::NotDynamicInSluice(not_in_sluice));
    }
    for (key, value) in configs {
        if let Some((def, factor)) = topic::broker_synonym(key) {
            topic::validate_as(def, key, value, factor).map_err(BrokerConfigError::InvalidValue)?;
        }
    }
    Ok(())
}

/// Whether Kafka can change `key` on a running broker (DescribeConfigs reports the others of a
/// broker resource as read-only, as Kafka does).
pub fn is_dynamic(key: &str) -> bool {
    find(key).is_some_and(|s| matches!(s.update, Update::Dynamic | Update::KafkaOnly))
}

/// Whether DescribeConfigs reports `key` as known (unknown stored keys are reported as
/// sensitive, with no value, as Kafka does).
pub fn is_known(key: &str) -> bool {
    find(key).is_some()
}

#[cfg(test)]
#[path = "broker_tests.rs"]
mod tests;
