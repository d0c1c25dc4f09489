//! The GROUP config resource (resource type 32) of DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs, with Kafka 4.4's answers: any non-empty group id may have configs,
//! whether or not the group exists; a new set is checked whole by `config::group::configs`
//! (INVALID_CONFIG with Kafka's message), stored by `storage::group_configs` and then handed to
//! the group coordinator, which applies it from each member's next heartbeat. The incremental
//! operations on a group's configs are `alter_configs.rs`'.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::config::group::configs;
use crate::config::topic::Resolved;
use crate::storage::group_configs::GroupConfigChangeError;

/// DescribeConfigs of one group: every group config with its value in force and its sources.
pub(super) fn describe(
    broker: &Broker,
    name: &str,
) -> Result<Vec<Resolved>, (ResponseError, String)> {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Group name must not be empty".to_string(),
        ));
    }
    Ok(configs::resolve_all(
        &broker.logs.group_configs(name),
        &broker.config,
    ))
}

/// Whether DescribeConfigs shows the value of a synonym of a group config.
pub(super) fn is_known_synonym(name: &str) -> bool {
    configs::is_synonym(name)
}

/// Replaces a group's configs with what `change` makes of them, once they pass Kafka's checks.
pub(super) fn apply(
    broker: &Broker,
    name: &str,
    validate_only: bool,
    change: impl FnOnce(BTreeMap<String, String>) -> Result<BTreeMap<String, String>, (i16, String)>,
) -> Result<(), (i16, String)> {
    if name.is_empty() {
        return Err((
            code(ResponseError::InvalidRequest),
            "Default group resources are not allowed.".to_string(),
        ));
    }
    let checked = |current| {
        let updated = change(current)?;
        configs::validate(&updated, &broker.config)
            .map_err(|message| (code(ResponseError::InvalidConfig), message))?;
        Ok(updated)
    };
    let install =
        |updated: &BTreeMap<String, String>| broker.groups.set_group_configs(name, updated);
    broker
        .logs
        .alter_group_configs(name, validate_only, checked, install)
        .map_err(|e| match e {
            GroupConfigChangeError::Refused(refusal) => refusal,
            GroupConfigChangeError::Io(e) => (
                code(ResponseError::UnknownServerError),
                format!("cannot store the group configs: {e}"),
            ),
        })
}
