//! DescribeConfigs (32): every topic config with its value, source, synonyms (when asked),
//! type and documentation (v3+), resolved topic → `server.properties` → Kafka default; and the
//! broker's settings for the node's own broker resource.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::config::{Config, Endpoint};
use crate::storage::topic_config::{self, source, ConfigType, Resolved};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

pub fn handle(
    broker: &Broker,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let options = Options {
        synonyms: request.include_synonyms,
        documentation: version >= 3 && request.include_documentation,
        version,
    };
    let results = request
        .resources
        .into_iter()
        .map(|r| describe(broker, r, &options))
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

struct Options {
    synonyms: bool,
    documentation: bool,
    version: i16,
}

fn describe(
    broker: &Broker,
    resource: DescribeConfigsResource,
    options: &Options,
) -> DescribeConfigsResult {
    let result = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let error = |error: ResponseError, message: String| {
        result
            .clone()
            .with_error_code(code(error))
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    let name = resource.resource_name.as_str();
    let resolved = match resource.resource_type {
        RESOURCE_TOPIC => match broker.logs.topic(name) {
            Some(topic) => topic_config::resolve_all(
                &topic.settings().overrides.to_map(),
                &broker.config.properties,
            ),
            None => {
                return error(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {name} does not exist"),
                )
            }
        },
        RESOURCE_BROKER if name.is_empty() => Vec::new(),
        RESOURCE_BROKER if name == broker.config.node_id.to_string() => broker_configs(broker),
        RESOURCE_BROKER => {
            return error(
                ResponseError::InvalidRequest,
                format!(
                    "Unexpected broker id, expected {} but received {name}",
                    broker.config.node_id
                ),
            )
        }
        RESOURCE_BROKER_LOGGER => Vec::new(),
        other => {
            return error(
                ResponseError::InvalidRequest,
                format!("Unsupported resource type {other}"),
            )
        }
    };
    // Null or empty key lists both mean every config.
    let wanted = |n: &str| {
        resource
            .configuration_keys
            .as_ref()
            .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == n))
    };
    let configs = resolved
        .into_iter()
        .filter(|r| wanted(r.name))
        .map(|r| entry(r, options))
        .collect();
    result.with_configs(configs)
}

fn entry(resolved: Resolved, options: &Options) -> DescribeConfigsResourceResult {
    let mut entry = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_static_str(resolved.name))
        .with_value(Some(StrBytes::from_string(resolved.value)))
        .with_config_source(resolved.source);
    if options.synonyms {
        entry.synonyms = resolved
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name))
                    .with_value(Some(StrBytes::from_string(value)))
                    .with_source(source)
            })
            .collect();
    }
    if options.version >= 3 {
        entry.config_type = resolved.kind as i8;
    }
    if options.documentation {
        entry.documentation = Some(StrBytes::from_static_str(resolved.doc));
    }
    entry
}

/// The node's own settings: static (from `server.properties`) or Kafka's defaults. None can be
/// changed at runtime yet, so all are read-only.
fn broker_configs(broker: &Broker) -> Vec<Resolved> {
    describe_broker_configs(&broker.config)
        .into_iter()
        .map(|(name, value, is_set, kind)| {
            let source = if is_set {
                source::STATIC_BROKER_CONFIG
            } else {
                source::DEFAULT_CONFIG
            };
            Resolved {
                name,
                value: value.clone(),
                source,
                synonyms: vec![(name.to_string(), value, source)],
                kind,
                doc: "",
            }
        })
        .collect()
}

/// The broker settings DescribeConfigs reports for this node: (name, value, set in
/// `server.properties`, type). Values are the ones in force.
fn describe_broker_configs(config: &Config) -> Vec<(&'static str, String, bool, ConfigType)> {
    use ConfigType::{Boolean, Int, Long};
    let log = &config.log;
    let listener = |e: &Endpoint| format!("PLAINTEXT://{e}");
    let entries: Vec<(&'static str, std::string::String, ConfigType)> = vec![
        (
            "advertised.listeners",
            listener(&config.advertised_listener),
            ConfigType::String,
        ),
        (
            "auto.create.topics.enable",
            config.auto_create_topics_enable.to_string(),
            Boolean,
        ),
        (
            "default.replication.factor",
            config.default_replication_factor.to_string(),
            Int,
        ),
        ("fetch.max.bytes", config.fetch_max_bytes.to_string(), Int),
        ("listeners", listener(&config.listener), ConfigType::String),
        (
            "log.dirs",
            config.log_dir.display().to_string(),
            ConfigType::String,
        ),
        (
            "log.flush.interval.messages",
            log.flush_interval_messages.to_string(),
            Long,
        ),
        (
            "log.flush.interval.ms",
            log.flush_interval_ms.to_string(),
            Long,
        ),
        (
            "log.flush.offset.checkpoint.interval.ms",
            config.log_flush_offset_checkpoint_interval_ms.to_string(),
            Int,
        ),
        (
            "log.flush.scheduler.interval.ms",
            config.log_flush_scheduler_interval_ms.to_string(),
            Long,
        ),
        (
            "log.index.interval.bytes",
            log.index_interval_bytes.to_string(),
            Int,
        ),
        (
            "log.index.size.max.bytes",
            log.max_index_size_bytes.to_string(),
            Int,
        ),
        (
            "log.message.timestamp.after.max.ms",
            config.log_message_timestamp_after_max_ms.to_string(),
            Long,
        ),
        (
            "log.message.timestamp.before.max.ms",
            config.log_message_timestamp_before_max_ms.to_string(),
            Long,
        ),
        ("log.roll.ms", log.segment_ms.to_string(), Long),
        ("log.segment.bytes", log.segment_bytes.to_string(), Int),
        ("max.connections", config.max_connections.to_string(), Int),
        (
            "message.max.bytes",
            config.message_max_bytes.to_string(),
            Int,
        ),
        ("node.id", config.node_id.to_string(), Int),
        ("num.partitions", config.num_partitions.to_string(), Int),
        (
            "queued.max.request.bytes",
            config.queued_max_request_bytes.to_string(),
            Long,
        ),
        ("quota.window.num", config.quota_window_num.to_string(), Int),
        (
            "quota.window.size.seconds",
            config.quota_window_size_seconds.to_string(),
            Int,
        ),
        (
            "socket.request.max.bytes",
            config.socket_request_max_bytes.to_string(),
            Int,
        ),
    ];
    entries
        .into_iter()
        .map(|(name, value, kind)| (name, value, config.properties.contains_key(name), kind))
        .collect()
}
