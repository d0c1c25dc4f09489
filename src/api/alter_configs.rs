//! AlterConfigs (33) and IncrementalAlterConfigs (44) for topics. AlterConfigs replaces a
//! topic's whole set of overrides; IncrementalAlterConfigs applies SET, DELETE, APPEND and
//! SUBTRACT to them. Either way the result is validated as a whole, applied at once, and
//! persisted. Broker resources (this node's id, or "" for the cluster-wide default) take
//! dynamic broker configs the same two ways; `config::broker` says which keys may
//! change. Group resources (any group id, whether the group exists or not) take group configs
//! both ways too, checked by `config::group::configs` and handed to the group coordinator
//! (`group_configs.rs`).

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use super::errors::{code, topic_error_code};
use super::{group_configs, Broker};
use crate::config::topic::{self as topic_config, ConfigType};
use crate::storage::TopicConfigs;

type Outcome = Result<(), (i16, String)>;

pub fn handle_alter(broker: &Broker, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let duplicates = duplicated(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string())),
    );
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let key = (resource.resource_type, resource.resource_name.to_string());
            let outcome = if duplicates.contains(&key) {
                Err(duplicate_error(&key.1))
            } else {
                let configs: BTreeMap<String, String> = resource
                    .configs
                    .iter()
                    .filter_map(|c| {
                        c.value
                            .as_ref()
                            .map(|v| (c.name.to_string(), v.to_string()))
                    })
                    .collect();
                apply(
                    broker,
                    resource.resource_type,
                    &key.1,
                    request.validate_only,
                    |_| Ok(configs),
                )
            };
            let (error_code, message) = split(outcome);
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(error_code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

pub fn handle_incremental(
    broker: &Broker,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let duplicates = duplicated(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string())),
    );
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let key = (resource.resource_type, resource.resource_name.to_string());
            let outcome = if duplicates.contains(&key) {
                Err(duplicate_error(&key.1))
            } else {
                let ops: Vec<(String, i8, Option<String>)> = resource
                    .configs
                    .iter()
                    .map(|c| {
                        (
                            c.name.to_string(),
                            c.config_operation,
                            c.value.as_ref().map(|v| v.to_string()),
                        )
                    })
                    .collect();
                apply(
                    broker,
                    resource.resource_type,
                    &key.1,
                    request.validate_only,
                    |current| match resource.resource_type {
                        RESOURCE_GROUP => apply_group_ops(current, &ops),
                        other => apply_ops(current, &ops, other == RESOURCE_BROKER),
                    },
                )
            };
            let (error_code, message) = split(outcome);
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(error_code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Computes a topic's new overrides from its current ones, validates and stores them.
fn apply(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    change: impl FnOnce(BTreeMap<String, String>) -> Result<BTreeMap<String, String>, (i16, String)>,
) -> Outcome {
    match resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => return apply_broker(broker, name, validate_only, change),
        RESOURCE_GROUP => return group_configs::apply(broker, name, validate_only, change),
        other => {
            return Err((
                code(ResponseError::InvalidRequest),
                format!("Unsupported resource type {other}"),
            ))
        }
    }
    let topic = broker.logs.topic(name).ok_or_else(|| {
        (
            code(ResponseError::UnknownTopicOrPartition),
            format!("Topic {name} does not exist"),
        )
    })?;
    let updated = change(topic.settings().overrides.to_map())?;
    let configs =
        TopicConfigs::validated(updated).map_err(|e| (topic_error_code(&e), e.to_string()))?;
    if validate_only {
        return Ok(());
    }
    broker
        .logs
        .alter_topic_configs(name, configs)
        .map_err(|e| (topic_error_code(&e), e.to_string()))
}

/// The same for a broker resource: Kafka answers INVALID_REQUEST to every refusal here.
fn apply_broker(
    broker: &Broker,
    name: &str,
    validate_only: bool,
    change: impl FnOnce(BTreeMap<String, String>) -> Result<BTreeMap<String, String>, (i16, String)>,
) -> Outcome {
    let invalid = |message: String| (code(ResponseError::InvalidRequest), message);
    if !name.is_empty() && name != broker.config.node_id.to_string() {
        return Err(invalid(format!(
            "Unexpected broker id, expected {} but received {name}",
            broker.config.node_id
        )));
    }
    let current = broker.logs.dynamic_broker_configs().entity(name);
    let updated = change(current).map_err(|(_, message)| invalid(message))?;
    broker
        .logs
        .alter_broker_configs(name, updated, validate_only)
        .map_err(|e| invalid(e.to_string()))
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Applies IncrementalAlterConfigs operations; `broker_keys` when the names are broker
/// configs (which Kafka does not check against a list) rather than topic configs.
fn apply_ops(
    mut configs: BTreeMap<String, String>,
    ops: &[(String, i8, Option<String>)],
    broker_keys: bool,
) -> Result<BTreeMap<String, String>, (i16, String)> {
    let invalid = |m: String| (code(ResponseError::InvalidConfig), m);
    for (name, op, value) in ops {
        let def = match (broker_keys, topic_config::find(name)) {
            (true, _) => topic_config::broker_synonym(name)
                .map(|(def, _)| (def.kind, def.default))
                .unwrap_or((ConfigType::String, "")),
            (false, Some(def)) => (def.kind, def.default),
            (false, None) => return Err(invalid(format!("Unknown topic config name: {name}"))),
        };
        let value = value.clone().unwrap_or_default();
        match *op {
            SET => {
                configs.insert(name.clone(), value);
            }
            DELETE => {
                configs.remove(name);
            }
            APPEND | SUBTRACT if def.0 != ConfigType::List => {
                return Err(invalid(format!("Config value append/subtract is not allowed for config key {name} as it is not a list")))
            }
            APPEND | SUBTRACT => {
                let current = configs.get(name).cloned().unwrap_or_else(|| def.1.to_string());
                let mut items: Vec<String> = current.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
                for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if *op == APPEND && !items.iter().any(|i| i == item) {
                        items.push(item.to_string());
                    } else if *op == SUBTRACT {
                        items.retain(|i| i != item);
                    }
                }
                configs.insert(name.clone(), items.join(","));
            }
            other => return Err((code(ResponseError::InvalidRequest), format!("Unknown config operation {other}"))),
        }
    }
    Ok(configs)
}

/// IncrementalAlterConfigs' operations on a group's configs, refused as Kafka 4.4 refuses them.
/// Kafka's broker does not know the types of group configs when it applies an incremental
/// change, so APPEND and SUBTRACT are refused for every group config, list or not.
fn apply_group_ops(
    mut current: BTreeMap<String, String>,
    ops: &[(String, i8, Option<String>)],
) -> Result<BTreeMap<String, String>, (i16, String)> {
    let invalid_request = |message: String| (code(ResponseError::InvalidRequest), message);
    let mut seen = HashSet::new();
    if ops.iter().any(|(name, _, _)| !seen.insert(name)) {
        return Err(invalid_request(
            "Error due to duplicate config keys".to_string(),
        ));
    }
    if let Some((name, _, _)) = ops
        .iter()
        .find(|(_, op, value)| *op != DELETE && value.is_none())
    {
        return Err(invalid_request(format!(
            "Null value not supported for : {name}"
        )));
    }
    for (name, op, value) in ops {
        match (*op, value) {
            (SET, Some(value)) => {
                current.insert(name.clone(), value.clone());
            }
            (DELETE, _) => {
                current.remove(name);
            }
            (APPEND | SUBTRACT, _) => {
                let verb = if *op == APPEND { "APPEND" } else { "SUBTRACT" };
                return Err((
                    code(ResponseError::InvalidConfig),
                    format!("Can't {verb} to key {name} because its type is not LIST."),
                ));
            }
            (other, _) => {
                return Err(invalid_request(format!("Unknown config operation {other}")));
            }
        }
    }
    Ok(current)
}

fn duplicated(keys: impl Iterator<Item = (i8, String)>) -> HashSet<(i8, String)> {
    let mut seen = HashSet::new();
    keys.filter(|k| !seen.insert(k.clone())).collect()
}

fn duplicate_error(name: &str) -> (i16, String) {
    (
        code(ResponseError::InvalidRequest),
        format!("Error due to duplicate config keys for resource {name}"),
    )
}

fn split(outcome: Outcome) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err((error_code, message)) => (error_code, Some(StrBytes::from_string(message))),
    }
}
