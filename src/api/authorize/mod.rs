//! The one place that decides what a connection may do, and what each API checks.
//!
//! `Authz` answers "may this principal, from this host, do this operation on this resource?"
//! through the StandardAuthorizer (`security::authorizer`); without `authorizer.class.name`
//! everything is allowed, as on a Kafka broker without an authorizer. Handlers (and the
//! checks below) call it with one line each: `authz.topic(Operation::Read, name)`,
//! `authz.group(..)`, `authz.cluster(..)`, `authz.transactional_id(..)`,
//! `authz.any(Operation::Write, ResourceType::Topic)`, and `authz.operations(..)` for KIP-430's
//! authorized-operations fields.
//!
//! `checks.rs` applies Kafka's checks (`KafkaApis`) around the handlers, so that handlers stay
//! free of them: before dispatch, a request that fails a request-level check is answered with
//! the error in every entry; unauthorized topics and groups are taken out of mutating requests
//! and answered with TOPIC_AUTHORIZATION_FAILED (29) or GROUP_AUTHORIZATION_FAILED (30); after
//! dispatch, the entries taken out are put back as errors, read-only answers about
//! unauthorized resources are replaced by the error (existence is never revealed: authorization
//! comes first), and Metadata hides unauthorized topics from all-topics requests.
//! ARCHITECTURE.md lists what each API checks.

mod checks;
mod cluster;
mod denied;
mod groups;
mod transactions;

use super::{Broker, Session};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::security::authorizer::Authorizer;
use crate::security::Principal;

pub(crate) use checks::{after, before};
pub use denied::Denied;

/// One request's authorization context.
pub struct Authz<'a> {
    authorizer: Option<&'a Authorizer>,
    principal: &'a Principal,
    host: String,
}

/// KIP-430: the value of an authorized-operations field a client did not ask for.
pub const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

impl<'a> Authz<'a> {
    pub fn new(broker: &'a Broker, session: &'a Session) -> Authz<'a> {
        Authz {
            authorizer: broker.security.authorizer.as_ref(),
            principal: &session.principal,
            host: session.host(),
        }
    }

    /// Whether ACLs are on.
    pub fn enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        match self.authorizer {
            None => true,
            Some(a) => a.authorize(self.principal, &self.host, operation, resource_type, name),
        }
    }

    pub fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Topic, name)
    }

    pub fn group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Group, name)
    }

    pub fn cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    pub fn transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    /// Whether the operation is allowed on some resource of the type (Kafka's
    /// `authorizeByResourceType`).
    pub fn any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        match self.authorizer {
            None => true,
            Some(a) => a.authorize_any(self.principal, &self.host, operation, resource_type),
        }
    }

    /// KIP-430: bit `1 << code` for each operation the resource type supports that is allowed.
    pub fn operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        Operation::supported_by(resource_type)
            .iter()
            .filter(|op| self.allows(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << (*op as i32)))
    }
}
