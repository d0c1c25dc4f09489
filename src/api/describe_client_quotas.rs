//! DescribeClientQuotas (48): the configured quotas whose entity matches a filter, as Kafka's
//! broker answers from its metadata image. A bad filter fails the whole request with an error
//! code and no entries. Static `server.properties` defaults are not listed (Kafka never listed
//! its static quotas either).

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::quota_error_code;
use super::Broker;
use crate::quota::FilterComponent;

pub fn handle(
    broker: &Broker,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let components: Vec<FilterComponent> = request
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.as_str(),
            match_type: c.match_type,
            name: c._match.as_ref().map(|m| m.as_str()),
        })
        .collect();
    match broker.quotas.describe(&components, request.strict) {
        Ok(found) => {
            let entries = found
                .into_iter()
                .map(|(entity, values)| {
                    let entity = entity
                        .components()
                        .into_iter()
                        .map(|(kind, name)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_static_str(kind))
                                .with_entity_name(name.map(|n| StrBytes::from_string(n.into())))
                        })
                        .collect();
                    let values = values
                        .into_iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(StrBytes::from_static_str(key.name()))
                                .with_value(value)
                        })
                        .collect();
                    EntryData::default().with_entity(entity).with_values(values)
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
        Err(error) => DescribeClientQuotasResponse::default()
            .with_error_code(quota_error_code(&error))
            .with_error_message(Some(StrBytes::from_string(error.message().into())))
            .with_entries(None),
    }
}
