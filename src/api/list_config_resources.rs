//! ListConfigResources (74): the resources that configs can be described for, by type, as
//! Kafka 4.4 lists them (KIP-1142). Version 0 was ListClientMetricsResources and lists only
//! client-metrics subscriptions, of which sluice has none; version 1 takes a list of resource
//! types (empty: all of them) and lists the groups that have configs, this node as a broker
//! and as a broker logger, and every topic. `kafka-configs --entity-type groups` uses it to
//! find the groups that have configs. A type Kafka cannot list is UNSUPPORTED_VERSION.

use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::describe_configs::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use super::errors::code;
use super::Broker;

/// Kafka's `ConfigResource.Type.CLIENT_METRICS`.
const RESOURCE_CLIENT_METRICS: i8 = 16;

/// The types an empty list stands for, in the order Kafka lists them.
const LISTED_TYPES: [i8; 5] = [
    RESOURCE_GROUP,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
];

pub fn handle(
    broker: &Broker,
    request: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let types = if version == 0 {
        vec![RESOURCE_CLIENT_METRICS]
    } else if request.resource_types.is_empty() {
        LISTED_TYPES.to_vec()
    } else {
        request.resource_types
    };
    if types.iter().any(|t| !LISTED_TYPES.contains(t)) {
        return ListConfigResourcesResponse::default()
            .with_error_code(code(ResponseError::UnsupportedVersion));
    }
    let mut resources = Vec::new();
    let mut add = |resource_type: i8, name: String| {
        resources.push(
            ConfigResource::default()
                .with_resource_name(StrBytes::from_string(name))
                .with_resource_type(resource_type),
        );
    };
    for resource_type in LISTED_TYPES.into_iter().filter(|t| types.contains(t)) {
        match resource_type {
            RESOURCE_GROUP => {
                for group_id in broker.logs.all_group_configs().into_keys() {
                    add(resource_type, group_id);
                }
            }
            RESOURCE_BROKER_LOGGER | RESOURCE_BROKER => {
                add(resource_type, broker.config.node_id.to_string());
            }
            RESOURCE_TOPIC => {
                for topic in broker.logs.topics() {
                    add(resource_type, topic.name.clone());
                }
            }
            _ => {}
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}
