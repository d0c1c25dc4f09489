//! DescribeConfigs (32): every topic config with its value, source, synonyms (when asked),
//! type and documentation (v3+), resolved topic → this broker's dynamic config → the
//! cluster-wide dynamic default → `server.properties` → Kafka default; the broker's settings
//! for the node's own broker resource, resolved the same way; and the cluster-wide dynamic
//! defaults for the default broker resource (name ""); and a group's configs for a group
//! resource (`group_configs.rs`).

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::{group_configs, Broker};
use crate::config::broker::{self as broker_config};
use crate::config::topic::{self as topic_config, source, ConfigType, Resolved};
use crate::config::Config;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_GROUP: i8 = 32;

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
    let dynamic = broker.logs.dynamic_broker_configs();
    let (own, default) = (
        dynamic.entity(&broker.config.node_id.to_string()),
        dynamic.entity(""),
    );
    let layers = [
        (&own, source::DYNAMIC_BROKER_CONFIG),
        (&default, source::DYNAMIC_DEFAULT_BROKER_CONFIG),
        (&broker.config.properties, source::STATIC_BROKER_CONFIG),
    ];
    let resolved = match resource.resource_type {
        RESOURCE_TOPIC => match broker.logs.topic(name) {
            Some(topic) => topic_config::resolve_all(&topic.settings().overrides.to_map(), &layers),
            None => {
                return error(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {name} does not exist"),
                )
            }
        },
        RESOURCE_BROKER if name.is_empty() => default_broker_configs(&default),
        RESOURCE_BROKER if name == broker.config.node_id.to_string() => {
            broker_configs(&broker.logs.broker_config(), &layers)
        }
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
        RESOURCE_GROUP => match group_configs::describe(broker, name) {
            Ok(resolved) => resolved,
            Err((e, message)) => return error(e, message),
        },
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
    let broker_resource = resource.resource_type == RESOURCE_BROKER;
    let configs = resolved
        .into_iter()
        .filter(|r| wanted(&r.name))
        .map(|r| {
            // A broker config Kafka cannot change at runtime is read-only; topic configs never are.
            let read_only = broker_resource && !broker_config::is_dynamic(&r.name);
            entry(r, options).with_read_only(read_only)
        })
        .collect();
    result.with_configs(configs)
}

fn entry(resolved: Resolved, options: &Options) -> DescribeConfigsResourceResult {
    let mut entry = DescribeConfigsResourceResult::default()
        .with_is_sensitive(resolved.value.is_none())
        .with_value(resolved.value.map(StrBytes::from_string))
        .with_name(StrBytes::from_string(resolved.name))
        .with_config_source(resolved.source);
    if options.synonyms {
        entry.synonyms = resolved
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                let known = broker_config::is_known(&name)
                    || topic_config::find(&name).is_some()
                    || group_configs::is_known_synonym(&name);
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name))
                    .with_value(known.then(|| StrBytes::from_string(value)))
                    .with_source(source)
            })
            .collect();
    }
    if options.version >= 3 {
        entry.config_type = resolved.kind as i8;
    }
    // Kafka sends null unless documentation was asked for.
    entry.documentation = None;
    if options.documentation {
        entry.documentation = Some(StrBytes::from_static_str(resolved.doc));
    }
    entry
}

/// The node's own settings with their sources: this broker's dynamic value, the cluster
/// default, `server.properties`, or Kafka's default. Values are the ones in force.
fn broker_configs(config: &Config, layers: &topic_config::BrokerLayers) -> Vec<Resolved> {
    let mut all = describe_broker_configs(config);
    // The dynamic defaults of topic configs, where the list above does not have them.
    for def in topic_config::TOPIC_CONFIGS {
        for (key, factor) in def.synonyms {
            let set = layers.iter().find_map(|(layer, _)| layer.get(*key));
            if all.iter().any(|(name, _, _)| name == key)
                || topic_config::broker_synonym(key).is_none()
                || (*factor != 1 && set.is_none())
            {
                continue;
            }
            let value = set.cloned().unwrap_or_else(|| def.default.to_string());
            let kind = if *factor == 1 {
                def.kind
            } else {
                ConfigType::Int
            };
            all.push((key.to_string(), value, kind));
        }
    }
    // Stored keys that Kafka does not know either: listed, their values hidden.
    for (layer, _) in &layers[..2] {
        for key in layer.keys() {
            if !all.iter().any(|(name, _, _)| name == key) {
                all.push((key.clone(), String::new(), ConfigType::String));
            }
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let defaults = kafka_defaults();
    all.into_iter()
        .map(|(name, value, kind)| {
            let mut synonyms: Vec<(String, String, i8)> = layers
                .iter()
                .filter_map(|(layer, source)| {
                    layer.get(&name).map(|v| (name.clone(), v.clone(), *source))
                })
                .collect();
            let source = synonyms
                .first()
                .map_or(source::DEFAULT_CONFIG, |(_, _, source)| *source);
            if let Some(default) = defaults.get(&name) {
                synonyms.push((name.clone(), default.clone(), source::DEFAULT_CONFIG));
            }
            let known = defaults.contains_key(&name) || broker_config::is_known(&name);
            Resolved {
                value: known.then_some(value),
                name,
                source,
                synonyms,
                kind,
                doc: "",
            }
        })
        .collect()
}

/// Kafka's defaults of the broker configs this node describes.
fn kafka_defaults() -> std::collections::BTreeMap<String, String> {
    let mut defaults: std::collections::BTreeMap<String, String> =
        describe_broker_configs(&Config::default())
            .into_iter()
            .map(|(name, value, _)| (name, value))
            .collect();
    for def in topic_config::TOPIC_CONFIGS {
        if let Some((key, 1)) = def.synonyms.first() {
            defaults
                .entry(key.to_string())
                .or_insert_with(|| def.default.to_string());
        }
    }
    defaults
}

/// The cluster-wide dynamic defaults (`kafka-configs --entity-default`).
fn default_broker_configs(default: &std::collections::BTreeMap<String, String>) -> Vec<Resolved> {
    let mut all = default.clone();
    // As in topic_config::resolve: a Kafka 4.1 cluster stores this one at format time.
    if let Some(def) = topic_config::find("min.insync.replicas") {
        all.entry(def.name.to_string())
            .or_insert_with(|| def.default.to_string());
    }
    all.into_iter()
        .map(|(name, value)| {
            let known = broker_config::is_known(&name);
            let kind = topic_config::broker_synonym(&name)
                .map(|(def, factor)| {
                    if factor == 1 {
                        def.kind
                    } else {
                        ConfigType::Int
                    }
                })
                .unwrap_or(ConfigType::String);
            Resolved {
                synonyms: vec![(
                    name.clone(),
                    value.clone(),
                    source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                )],
                value: known.then_some(value),
                name,
                source: source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                kind,
                doc: "",
            }
        })
        .collect()
}

/// The broker settings DescribeConfigs reports for this node: (name, value, type), from the
/// broker table's listed rows. Values are the ones in force.
fn describe_broker_configs(config: &Config) -> Vec<(String, String, ConfigType)> {
    broker_config::settings()
        .iter()
        .filter_map(|s| Some((s.name.to_string(), s.shown(config)?, s.kind())))
        .collect()
}
