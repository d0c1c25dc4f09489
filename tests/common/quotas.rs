//! Raw-protocol helpers for client-quota socket tests: AlterClientQuotas entries and calls.

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::Client;

pub fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// An entity of `(type, name or None for the default)` pairs.
pub fn entity(parts: &[(&str, Option<&str>)]) -> Vec<EntityData> {
    parts
        .iter()
        .map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(s(kind))
                .with_entity_name(name.map(s))
        })
        .collect()
}

pub fn set(key: &str, value: f64) -> OpData {
    OpData::default().with_key(s(key)).with_value(value)
}

pub fn remove(key: &str) -> OpData {
    OpData::default().with_key(s(key)).with_remove(true)
}

/// Sends AlterClientQuotas; returns each entry's error code and message.
pub async fn alter(
    client: &mut Client,
    version: i16,
    entries: Vec<(Vec<EntityData>, Vec<OpData>)>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let request = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(
            entries
                .into_iter()
                .map(|(e, ops)| EntryData::default().with_entity(e).with_ops(ops))
                .collect(),
        );
    let response: AlterClientQuotasResponse = client
        .call(ApiKey::AlterClientQuotas, version, &request)
        .await;
    response
        .entries
        .into_iter()
        .map(|e| (e.error_code, e.error_message.map(|m| m.to_string())))
        .collect()
}
