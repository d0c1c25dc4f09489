//! DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the SCRAM
//! credentials in `security::scram_store`, listed and changed as Kafka's controller does
//! (`ScramControlManager`). Describe names each user's mechanisms and iterations, never salts
//! or keys: all users for a null or empty list, and for each named user its credentials,
//! RESOURCE_NOT_FOUND, or DUPLICATE_RESOURCE when named twice. Alter takes the client's
//! salted password and stores what Kafka stores (salt, StoredKey, ServerKey, iterations);
//! each user gets one result: DUPLICATE_RESOURCE when altered twice in the request,
//! UNACCEPTABLE_CREDENTIAL for an empty name or iterations outside 4096..=16384,
//! UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, RESOURCE_NOT_FOUND for deleting what
//! does not exist. `kafka-configs --entity-type users` calls both. The authorization checks
//! (CLUSTER DESCRIBE / ALTER) are the dispatcher's (`authorize`).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::security::scram_store::ScramChange;

pub fn handle(
    broker: &Broker,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let stored = broker.security.scram.describe();
    let infos = |list: &Vec<(ScramMechanism, i32)>| -> Vec<CredentialInfo> {
        list.iter()
            .map(|(m, iterations)| {
                CredentialInfo::default()
                    .with_mechanism(m.id())
                    .with_iterations(*iterations)
            })
            .collect()
    };
    let users = request.users.unwrap_or_default();
    if users.is_empty() {
        let results = stored
            .iter()
            .map(|(user, list)| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user.clone()))
                    .with_credential_infos(infos(list))
            })
            .collect();
        return DescribeUserScramCredentialsResponse::default().with_results(results);
    }
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
            let result = DescribeUserScramCredentialsResult::default().with_user(user.name.clone());
            let (error, message) = match stored.get(name) {
                _ if count > 1 => (
                    ResponseError::DuplicateResource,
                    "Cannot describe SCRAM credentials for the same user twice in a single request: ",
                ),
                Some(list) => return Some(result.with_credential_infos(infos(list))),
                None => (
                    ResponseError::ResourceNotFound,
                    "Attempt to describe a user credential that does not exist: ",
                ),
            };
            Some(
                result
                    .with_error_code(code(error))
                    .with_error_message(Some(StrBytes::from_string(format!("{message}{name}")))),
            )
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// A refused user: its error and Kafka's message.
type Refusal = (ResponseError, &'static str);

const TWICE: Refusal = (
    ResponseError::DuplicateResource,
    "A user credential cannot be altered twice in the same request",
);

fn check_name_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_id(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism",
    ))
}

pub fn alter(
    broker: &Broker,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let store = &broker.security.scram;
    let mut changes: BTreeMap<String, ScramChange> = BTreeMap::new();
    let mut refused: BTreeMap<String, Refusal> = BTreeMap::new();
    for deletion in &request.deletions {
        let name = deletion.name.to_string();
        if refused.contains_key(&name) {
            continue;
        }
        if changes.remove(&name).is_some() {
            refused.insert(name, TWICE);
            continue;
        }
        match check_name_and_mechanism(&name, deletion.mechanism) {
            Err(r) => {
                refused.insert(name, r);
            }
            Ok(m) if !store.exists(&name, m) => {
                let r = (
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                );
                refused.insert(name, r);
            }
            Ok(m) => {
                changes.insert(name.clone(), ScramChange::Delete(name, m));
            }
        }
    }
    for upsertion in request.upsertions {
        let name = upsertion.name.to_string();
        if refused.contains_key(&name) {
            continue;
        }
        if changes.remove(&name).is_some() {
            refused.insert(name, TWICE);
            continue;
        }
        let checked = check_name_and_mechanism(&name, upsertion.mechanism).and_then(|m| {
            match upsertion.iterations {
                i if i < ScramMechanism::MIN_ITERATIONS => {
                    Err((ResponseError::UnacceptableCredential, "Too few iterations"))
                }
                i if i > ScramMechanism::MAX_ITERATIONS => {
                    Err((ResponseError::UnacceptableCredential, "Too many iterations"))
                }
                _ => Ok(m),
            }
        });
        match checked {
            Err(r) => {
                refused.insert(name, r);
            }
            Ok(m) => {
                let credential = ScramCredential::from_salted_password(
                    m,
                    upsertion.salt.to_vec(),
                    &upsertion.salted_password,
                    upsertion.iterations,
                );
                changes.insert(name.clone(), ScramChange::Upsert(name, m, credential));
            }
        }
    }
    let names: Vec<String> = changes.keys().cloned().collect();
    let stored = store.apply(changes.into_values().collect());
    let mut results = Vec::new();
    for name in names {
        let mut result =
            AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(name));
        if let Err(e) = &stored {
            tracing::error!("cannot store SCRAM credentials: {e}");
            result.error_code = code(ResponseError::UnknownServerError);
        }
        results.push(result);
    }
    for (name, (error, message)) in refused {
        results.push(
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(name))
                .with_error_code(code(error))
                .with_error_message(Some(StrBytes::from_static_str(message))),
        );
    }
    AlterUserScramCredentialsResponse::default().with_results(results)
}
