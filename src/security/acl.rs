//! ACLs as Kafka writes them: resource types, pattern types, operations and permissions with
//! their wire codes, bindings (`AclBinding`) and the filters that describe and delete them
//! (`AclBindingFilter`), matched as Kafka's `ResourcePatternFilter` and
//! `AccessControlEntryFilter` match.

/// `ResourceType` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Any = 1,
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

impl ResourceType {
    pub fn from_code(code: i8) -> Option<ResourceType> {
        use ResourceType::*;
        Some(match code {
            1 => Any,
            2 => Topic,
            3 => Group,
            4 => Cluster,
            5 => TransactionalId,
            6 => DelegationToken,
            7 => User,
            _ => return None,
        })
    }
}

/// `PatternType` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    Any = 1,
    Match = 2,
    Literal = 3,
    Prefixed = 4,
}

impl PatternType {
    pub fn from_code(code: i8) -> Option<PatternType> {
        Some(match code {
            1 => PatternType::Any,
            2 => PatternType::Match,
            3 => PatternType::Literal,
            4 => PatternType::Prefixed,
            _ => return None,
        })
    }
}

/// `AclOperation` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    Any = 1,
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

impl Operation {
    pub fn from_code(code: i8) -> Option<Operation> {
        use Operation::*;
        Some(match code {
            1 => Any,
            2 => All,
            3 => Read,
            4 => Write,
            5 => Create,
            6 => Delete,
            7 => Alter,
            8 => Describe,
            9 => ClusterAction,
            10 => DescribeConfigs,
            11 => AlterConfigs,
            12 => IdempotentWrite,
            13 => CreateTokens,
            14 => DescribeTokens,
            _ => return None,
        })
    }

    /// The operations an ALLOW of this one also allows: DESCRIBE with READ, WRITE, DELETE
    /// or ALTER; DESCRIBE_CONFIGS with ALTER_CONFIGS (Kafka's implied operations).
    pub fn implies(self, requested: Operation) -> bool {
        use Operation::*;
        self == All
            || self == requested
            || (requested == Describe && matches!(self, Read | Write | Delete | Alter))
            || (requested == DescribeConfigs && self == AlterConfigs)
    }

    /// The operations a resource type supports, for KIP-430's authorized-operations fields.
    pub fn supported_by(resource_type: ResourceType) -> &'static [Operation] {
        use Operation::*;
        match resource_type {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Any => &[],
        }
    }
}

/// `AclPermissionType` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    Any = 1,
    Deny = 2,
    Allow = 3,
}

impl Permission {
    pub fn from_code(code: i8) -> Option<Permission> {
        Some(match code {
            1 => Permission::Any,
            2 => Permission::Deny,
            3 => Permission::Allow,
            _ => return None,
        })
    }
}

/// The one name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The name that matches every resource of its type (LITERAL only), and every principal and
/// host in those fields.
pub const WILDCARD: &str = "*";

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub name: String,
    /// LITERAL or PREFIXED.
    pub pattern: PatternType,
    /// `Type:name`, e.g. `User:alice`, or `User:*`.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

/// A filter over ACLs (DescribeAcls, DeleteAcls): None fields and ANY match everything.
#[derive(Clone, Debug)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBindingFilter {
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.matches_pattern(acl)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }

    fn matches_pattern(&self, acl: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern, PatternType::Any | PatternType::Match)
            && self.pattern != acl.pattern
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern == PatternType::Any || self.pattern == acl.pattern {
            return *name == acl.name;
        }
        match acl.pattern {
            PatternType::Literal => *name == acl.name || acl.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&acl.name),
            _ => false,
        }
    }
}
