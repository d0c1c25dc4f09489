//! Raw-protocol helpers for config socket tests: DescribeConfigs and IncrementalAlterConfigs on
//! one resource.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::Client;

/// Kafka's resource types.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
/// IncrementalAlterConfigs operations.
pub const SET: i8 = 0;
pub const DELETE: i8 = 1;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// DescribeConfigs v4 of every config of one resource, with synonyms and documentation.
pub async fn describe_configs(
    client: &mut Client,
    resource_type: i8,
    name: &str,
) -> describe_configs_response::DescribeConfigsResult {
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(None)])
        .with_include_synonyms(true)
        .with_include_documentation(true);
    let mut response: DescribeConfigsResponse =
        client.call(ApiKey::DescribeConfigs, 4, &request).await;
    response.results.remove(0)
}

/// IncrementalAlterConfigs v1 of `(name, operation, value)` on one resource; returns its error
/// code and message.
pub async fn incremental_alter_configs(
    client: &mut Client,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    let resource = AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(
            ops.iter()
                .map(|(n, op, v)| {
                    AlterableConfig::default()
                        .with_name(s(n))
                        .with_config_operation(*op)
                        .with_value(v.map(s))
                })
                .collect(),
        );
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let response: IncrementalAlterConfigsResponse = client
        .call(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await;
    let r = &response.responses[0];
    (
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )
}
