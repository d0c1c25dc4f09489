//! AlterClientQuotas (49): set or remove quotas of user / client-id entities. Each entry is
//! checked on its own, with Kafka's error codes and messages; the accepted ones are written to
//! the quota file and enforced at once, unless `validate_only`.

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::{quota_error_code, NONE};
use super::Broker;
use crate::quota::{AlterEntry, AlterOp};

pub fn handle(broker: &Broker, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let entries: Vec<AlterEntry> = request
        .entries
        .iter()
        .map(|entry| AlterEntry {
            components: entry
                .entity
                .iter()
                .map(|e| {
                    (
                        e.entity_type.as_str(),
                        e.entity_name.as_ref().map(|n| n.as_str()),
                    )
                })
                .collect(),
            ops: entry
                .ops
                .iter()
                .map(|op| AlterOp {
                    key: op.key.as_str(),
                    value: op.value,
                    remove: op.remove,
                })
                .collect(),
        })
        .collect();
    let results = broker.quotas.alter(&entries, request.validate_only);
    let responses = request
        .entries
        .iter()
        .zip(results)
        .map(|(entry, result)| {
            let entity = entry
                .entity
                .iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            let (error_code, error_message) = match result {
                Ok(()) => (NONE, None),
                Err(error) => (
                    quota_error_code(&error),
                    Some(StrBytes::from_string(error.message().into())),
                ),
            };
            EntryData::default()
                .with_error_code(error_code)
                .with_error_message(error_message)
                .with_entity(entity)
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(responses)
}
