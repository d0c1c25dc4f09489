//! DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), answered as a Kafka broker without an
//! authorizer answers them (`authorizer.class.name` unset, Kafka's default): SECURITY_DISABLED,
//! so `kafka-acls` reports "No Authorizer is configured" instead of an unsupported API. sluice
//! authorizes nothing; every client may do everything, as on such a Kafka broker.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;

/// Kafka's message on DescribeAcls.
const DESCRIBE_MESSAGE: &str = "No Authorizer is configured on the broker";
/// Kafka's message on CreateAcls and DeleteAcls.
const ALTER_MESSAGE: &str = "No Authorizer is configured.";

fn disabled(message: &'static str) -> (i16, Option<StrBytes>) {
    (
        code(ResponseError::SecurityDisabled),
        Some(StrBytes::from_static_str(message)),
    )
}

pub fn describe() -> DescribeAclsResponse {
    let (error_code, error_message) = disabled(DESCRIBE_MESSAGE);
    DescribeAclsResponse::default()
        .with_error_code(error_code)
        .with_error_message(error_message)
}

pub fn create(request: CreateAclsRequest) -> CreateAclsResponse {
    let results = request
        .creations
        .iter()
        .map(|_| {
            let (error_code, error_message) = disabled(ALTER_MESSAGE);
            AclCreationResult::default()
                .with_error_code(error_code)
                .with_error_message(error_message)
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub fn delete(request: DeleteAclsRequest) -> DeleteAclsResponse {
    let filter_results = request
        .filters
        .iter()
        .map(|_| {
            let (error_code, error_message) = disabled(ALTER_MESSAGE);
            DeleteAclsFilterResult::default()
                .with_error_code(error_code)
                .with_error_message(error_message)
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(filter_results)
}
