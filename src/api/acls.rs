//! DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) over `security::authorizer`'s ACLs,
//! as Kafka's `AclApis` and `AclControlManager` answer them. Without an authorizer
//! (`authorizer.class.name` unset, Kafka's default) each is answered SECURITY_DISABLED, so
//! `kafka-acls` reports "No Authorizer is configured". The CLUSTER ALTER / DESCRIBE checks are
//! `authorize`'s.
//!
//! A creation is refused INVALID_REQUEST for an unknown or ANY resource type, a pattern type
//! other than LITERAL or PREFIXED, an unknown or ANY operation, a permission other than ALLOW
//! or DENY, an empty resource name, a CLUSTER name other than `kafka-cluster`, or a principal
//! that is not `Type:name`; creating an ACL that exists is a success. Filters match as
//! Kafka's do (`acl::AclBindingFilter`).

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::security::acl::{
    AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME,
};
use crate::security::Principal;

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

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn invalid(message: String) -> (i16, Option<StrBytes>) {
    (
        code(ResponseError::InvalidRequest),
        Some(StrBytes::from_string(message)),
    )
}

/// A filter from the wire; Err is INVALID_REQUEST's message.
fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclBindingFilter, String> {
    Ok(AclBindingFilter {
        resource_type: ResourceType::from_code(resource_type).ok_or("Invalid resource type")?,
        name: name.map(|n| n.to_string()),
        pattern: PatternType::from_code(pattern).ok_or("Invalid pattern type")?,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation: Operation::from_code(operation).ok_or("Invalid operation")?,
        permission: Permission::from_code(permission).ok_or("Invalid permission type")?,
    })
}

pub fn describe(broker: &Broker, request: DescribeAclsRequest) -> DescribeAclsResponse {
    let Some(authorizer) = &broker.security.authorizer else {
        let (error_code, error_message) = disabled(DESCRIBE_MESSAGE);
        return DescribeAclsResponse::default()
            .with_error_code(error_code)
            .with_error_message(error_message);
    };
    let parsed = filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    );
    let f = match parsed {
        Ok(f) => f,
        Err(message) => {
            let (error_code, error_message) = invalid(message);
            return DescribeAclsResponse::default()
                .with_error_code(error_code)
                .with_error_message(error_message);
        }
    };
    let mut resources: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in authorizer.describe(&f) {
        resources
            .entry((acl.resource_type as i8, acl.name.clone(), acl.pattern as i8))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(text(&acl.principal))
                    .with_host(text(&acl.host))
                    .with_operation(acl.operation as i8)
                    .with_permission_type(acl.permission as i8),
            );
    }
    let resources = resources
        .into_iter()
        .map(|((t, name, p), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(t)
                .with_resource_name(StrBytes::from_string(name))
                .with_pattern_type(p)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

/// A creation from the wire, checked as Kafka's `AclControlManager.validateNewAcl`.
fn binding(
    c: &kafka_protocol::messages::create_acls_request::AclCreation,
) -> Result<AclBinding, String> {
    let resource_type = ResourceType::from_code(c.resource_type)
        .filter(|t| *t != ResourceType::Any)
        .ok_or_else(|| format!("Invalid resourceType {}", c.resource_type))?;
    let pattern = PatternType::from_code(c.resource_pattern_type)
        .filter(|p| matches!(p, PatternType::Literal | PatternType::Prefixed))
        .ok_or_else(|| format!("Invalid patternType {}", c.resource_pattern_type))?;
    let operation = Operation::from_code(c.operation)
        .filter(|o| *o != Operation::Any)
        .ok_or_else(|| format!("Invalid operation {}", c.operation))?;
    let permission = Permission::from_code(c.permission_type)
        .filter(|p| *p != Permission::Any)
        .ok_or_else(|| format!("Invalid permissionType {}", c.permission_type))?;
    if c.resource_name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    if resource_type == ResourceType::Cluster && c.resource_name.as_str() != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    if Principal::parse(&c.principal)
        .is_none_or(|p| p.principal_type.is_empty() || p.name.is_empty())
    {
        return Err(format!("Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)", c.principal));
    }
    Ok(AclBinding {
        resource_type,
        name: c.resource_name.to_string(),
        pattern,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation,
        permission,
    })
}

pub fn create(broker: &Broker, request: CreateAclsRequest) -> CreateAclsResponse {
    let Some(authorizer) = &broker.security.authorizer else {
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
        return CreateAclsResponse::default().with_results(results);
    };
    let checked: Vec<Result<AclBinding, String>> = request.creations.iter().map(binding).collect();
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let stored = authorizer.create(valid);
    let results = checked
        .into_iter()
        .map(|c| match (c, &stored) {
            (Err(message), _) => {
                let (error_code, error_message) = invalid(message);
                AclCreationResult::default()
                    .with_error_code(error_code)
                    .with_error_message(error_message)
            }
            (Ok(_), Err(e)) => AclCreationResult::default()
                .with_error_code(code(ResponseError::UnknownServerError))
                .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub fn delete(broker: &Broker, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let Some(authorizer) = &broker.security.authorizer else {
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
        return DeleteAclsResponse::default().with_filter_results(filter_results);
    };
    let parsed: Vec<Result<AclBindingFilter, String>> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBindingFilter> = parsed
        .iter()
        .filter_map(|f| f.as_ref().ok().cloned())
        .collect();
    let mut matched = match authorizer.delete(&valid) {
        Ok(m) => m.into_iter(),
        Err(e) => {
            let results = parsed
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(code(ResponseError::UnknownServerError))
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                })
                .collect();
            return DeleteAclsResponse::default().with_filter_results(results);
        }
    };
    let results = parsed
        .into_iter()
        .map(|f| match f {
            Err(message) => {
                let (error_code, error_message) = invalid(message);
                DeleteAclsFilterResult::default()
                    .with_error_code(error_code)
                    .with_error_message(error_message)
            }
            Ok(_) => {
                let acls = matched.next().unwrap_or_default();
                DeleteAclsFilterResult::default().with_matching_acls(
                    acls.iter()
                        .map(|a| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(a.resource_type as i8)
                                .with_resource_name(text(&a.name))
                                .with_pattern_type(a.pattern as i8)
                                .with_principal(text(&a.principal))
                                .with_host(text(&a.host))
                                .with_operation(a.operation as i8)
                                .with_permission_type(a.permission as i8)
                        })
                        .collect(),
                )
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
