//! DescribeUserScramCredentials (50): sluice has no SASL and stores no SCRAM credentials, so it
//! answers as a Kafka broker with none does (`ScramImage.describe`): no results when all users
//! are asked for, and for each named user RESOURCE_NOT_FOUND, or DUPLICATE_RESOURCE when the
//! request names the user twice. `kafka-configs --describe --entity-type users` calls this after
//! DescribeClientQuotas.

use std::collections::HashMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;

pub fn handle(
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let users = request.users.unwrap_or_default();
    let mut times_named: HashMap<&str, usize> = HashMap::new();
    for user in &users {
        *times_named.entry(user.name.as_str()).or_default() += 1;
    }
    // One result per distinct user, in the order first named (Kafka's order is a hash map's).
    let results = users
        .iter()
        .filter_map(|user| {
            let name = user.name.as_str();
            let count = times_named.remove(name)?;
            let (error, message) = if count > 1 {
                (
                    ResponseError::DuplicateResource,
                    "Cannot describe SCRAM credentials for the same user twice in a single request: ",
                )
            } else {
                (
                    ResponseError::ResourceNotFound,
                    "Attempt to describe a user credential that does not exist: ",
                )
            };
            Some(
                DescribeUserScramCredentialsResult::default()
                    .with_user(user.name.clone())
                    .with_error_code(code(error))
                    .with_error_message(Some(StrBytes::from_string(format!("{message}{name}")))),
            )
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
