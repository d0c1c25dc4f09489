//! The StandardAuthorizer's decision, and the ACLs it decides from, kept in
//! `<log.dirs>/sluice-acls` (Kafka keeps them as `AccessControlEntryRecord`s in its metadata
//! log). On when `authorizer.class.name` names Kafka's StandardAuthorizer (or the older
//! AclAuthorizer, whose semantics are the same for these rules).
//!
//! A request by principal P from host H for operation O on resource R of type T:
//! 1. P in `super.users` (`User:a;User:b`): allowed.
//! 2. The ACLs of type T that apply to R: LITERAL with R's name or `*`, PREFIXED with a
//!    prefix of R's name; of those, the ones whose principal is P or `User:*` and whose host
//!    is H or `*`.
//! 3. A DENY of O (or ALL) among them: denied, whatever allows it. DENY does not imply.
//! 4. An ALLOW of O, ALL, or an operation that implies O (READ, WRITE, DELETE and ALTER imply
//!    DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS): allowed.
//! 5. Otherwise denied, unless no ACL at all applies to R (for anyone) and
//!    `allow.everyone.if.no.acl.found` is true.
//!
//! The file: `version: 0`, then one ACL per line, `<resource type> <pattern type> <operation>
//! <permission>` as their wire codes and the percent-encoded resource name, principal and
//! host. It is replaced atomically before a change is answered.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use super::acl::{
    AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType, WILDCARD,
};
use super::scram_store::{decode, encode};
use super::Principal;
use crate::config::Config;
use crate::disk::names::ACLS_FILE;
use crate::disk::Disk;

const HEADER: &str = "version: 0";

/// Kafka's authorizer classes, either of which turns ACLs on.
pub const AUTHORIZER_CLASSES: [&str; 2] = [
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

pub struct Authorizer {
    disk: Disk,
    path: PathBuf,
    acls: RwLock<BTreeSet<AclBinding>>,
    super_users: Vec<String>,
    allow_everyone_if_no_acl_found: bool,
}

impl Authorizer {
    /// The authorizer `authorizer.class.name` asks for, or None when it is empty.
    pub fn open(config: &Config, disk: &Disk) -> anyhow::Result<Option<Authorizer>> {
        let class = config
            .properties
            .get("authorizer.class.name")
            .map(|s| s.trim())
            .unwrap_or("");
        if class.is_empty() {
            return Ok(None);
        }
        if !AUTHORIZER_CLASSES.contains(&class) {
            anyhow::bail!(
                "authorizer.class.name: {class} is not an authorizer sluice has (use {})",
                AUTHORIZER_CLASSES[0]
            );
        }
        let super_users = config
            .properties
            .get("super.users")
            .map(|v| {
                v.split(';')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let allow_everyone = config
            .properties
            .get("allow.everyone.if.no.acl.found")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let path = config.log_dir.join(ACLS_FILE);
        let acls = load(disk, &path)?;
        Ok(Some(Authorizer {
            disk: disk.clone(),
            path,
            acls: RwLock::new(acls),
            super_users,
            allow_everyone_if_no_acl_found: allow_everyone,
        }))
    }

    pub fn is_super_user(&self, principal: &Principal) -> bool {
        let text = principal.to_string();
        self.super_users.contains(&text)
    }

    /// Whether `principal` at `host` may do `operation` on the resource.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let who = principal.to_string();
        let acls = self.acls.read().unwrap_or_else(|e| e.into_inner());
        let mut any_acl = false;
        let mut allowed = false;
        for acl in acls
            .iter()
            .filter(|a| a.resource_type == resource_type && applies_to(a, name))
        {
            any_acl = true;
            let mine = (acl.principal == who || acl.principal == "User:*")
                && (acl.host == host || acl.host == WILDCARD);
            if !mine {
                continue;
            }
            match acl.permission {
                Permission::Deny
                    if acl.operation == operation || acl.operation == Operation::All =>
                {
                    return false;
                }
                Permission::Allow if acl.operation.implies(operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!any_acl && self.allow_everyone_if_no_acl_found)
    }

    /// Whether `principal` may do `operation` on some resource of the type (Kafka's
    /// `authorizeByResourceType`, used for idempotent producers without a transactional id).
    pub fn authorize_any(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let who = principal.to_string();
        let acls = self.acls.read().unwrap_or_else(|e| e.into_inner());
        let mine: Vec<&AclBinding> = acls
            .iter()
            .filter(|a| a.resource_type == resource_type)
            .filter(|a| {
                (a.principal == who || a.principal == "User:*")
                    && (a.host == host || a.host == WILDCARD)
            })
            .collect();
        let denies: Vec<&&AclBinding> = mine
            .iter()
            .filter(|a| {
                a.permission == Permission::Deny
                    && (a.operation == operation || a.operation == Operation::All)
            })
            .collect();
        if denies
            .iter()
            .any(|d| d.pattern == PatternType::Literal && d.name == WILDCARD)
        {
            return false;
        }
        let denied = |name: &str, prefixed: bool| {
            denies.iter().any(|d| match d.pattern {
                PatternType::Literal => !prefixed && d.name == name,
                PatternType::Prefixed => name.starts_with(&d.name),
                _ => false,
            })
        };
        let any_allow = mine.iter().any(|a| {
            a.permission == Permission::Allow
                && a.operation.implies(operation)
                && (a.name == WILDCARD && a.pattern == PatternType::Literal
                    || !denied(&a.name, a.pattern == PatternType::Prefixed))
        });
        any_allow
            || (self.allow_everyone_if_no_acl_found
                && acls.iter().all(|a| a.resource_type != resource_type))
    }

    /// The ACLs a filter matches.
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let acls = self.acls.read().unwrap_or_else(|e| e.into_inner());
        acls.iter().filter(|a| filter.matches(a)).cloned().collect()
    }

    /// Adds ACLs (an ACL already there is a success) and writes the file.
    pub fn create(&self, new: Vec<AclBinding>) -> std::io::Result<()> {
        let mut acls = self.acls.write().unwrap_or_else(|e| e.into_inner());
        let mut next = acls.clone();
        next.extend(new);
        if next.len() != acls.len() {
            self.disk
                .write_file_durably(&self.path, format(&next).as_bytes())?;
            *acls = next;
        }
        Ok(())
    }

    /// Removes the ACLs each filter matches; returns them per filter.
    pub fn delete(&self, filters: &[AclBindingFilter]) -> std::io::Result<Vec<Vec<AclBinding>>> {
        let mut acls = self.acls.write().unwrap_or_else(|e| e.into_inner());
        let matched: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| acls.iter().filter(|a| f.matches(a)).cloned().collect())
            .collect();
        let gone: BTreeSet<&AclBinding> = matched.iter().flatten().collect();
        if !gone.is_empty() {
            let next: BTreeSet<AclBinding> =
                acls.iter().filter(|a| !gone.contains(a)).cloned().collect();
            self.disk
                .write_file_durably(&self.path, format(&next).as_bytes())?;
            *acls = next;
        }
        Ok(matched)
    }
}

/// Whether an ACL's pattern covers the resource `name`.
fn applies_to(acl: &AclBinding, name: &str) -> bool {
    match acl.pattern {
        PatternType::Literal => acl.name == name || acl.name == WILDCARD,
        PatternType::Prefixed => name.starts_with(&acl.name),
        _ => false,
    }
}

fn format(acls: &BTreeSet<AclBinding>) -> String {
    let mut text = format!("{HEADER}\n");
    for a in acls {
        text.push_str(&format!(
            "{} {} {} {} {} {} {}\n",
            a.resource_type as i8,
            a.pattern as i8,
            a.operation as i8,
            a.permission as i8,
            encode(&a.name),
            encode(&a.principal),
            encode(&a.host)
        ));
    }
    text
}

fn load(disk: &Disk, path: &Path) -> anyhow::Result<BTreeSet<AclBinding>> {
    let text = match disk.read_to_string_if_exists(path) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(BTreeSet::new()),
        Err(e) => anyhow::bail!("{}: {e}", path.display()),
    };
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn parse(text: &str) -> Result<BTreeSet<AclBinding>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("expected '{HEADER}' first"));
    }
    let mut out = BTreeSet::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let bad = || format!("malformed line '{line}'");
        let f: Vec<&str> = line.split(' ').collect();
        let [t, p, o, perm, name, principal, host] = f[..] else {
            return Err(bad());
        };
        let code = |s: &str| s.parse::<i8>().map_err(|_| bad());
        out.insert(AclBinding {
            resource_type: ResourceType::from_code(code(t)?).ok_or_else(bad)?,
            pattern: PatternType::from_code(code(p)?).ok_or_else(bad)?,
            operation: Operation::from_code(code(o)?).ok_or_else(bad)?,
            permission: Permission::from_code(code(perm)?).ok_or_else(bad)?,
            name: decode(name).ok_or_else(bad)?,
            principal: decode(principal).ok_or_else(bad)?,
            host: decode(host).ok_or_else(bad)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        t: ResourceType,
        name: &str,
        pattern: PatternType,
        who: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            name: name.into(),
            pattern,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn authorizer(acls: Vec<AclBinding>, allow_everyone: bool) -> Authorizer {
        Authorizer {
            disk: Disk::real(),
            path: PathBuf::from("/nonexistent"),
            acls: RwLock::new(acls.into_iter().collect()),
            super_users: vec!["User:admin".into()],
            allow_everyone_if_no_acl_found: allow_everyone,
        }
    }

    #[test]
    fn standard_authorizer_rules() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let a = authorizer(
            vec![
                acl(Topic, "orders", Literal, "User:alice", Read, Allow),
                acl(Topic, "logs-", Prefixed, "User:*", Write, Allow),
                acl(Topic, "logs-secret", Literal, "User:bob", Write, Deny),
                acl(Topic, "*", Literal, "User:carol", All, Allow),
                acl(Topic, "x", Literal, "User:carol", Read, Deny),
            ],
            true,
        );
        let p = |n: &str| Principal::user(n);
        let ok = |who: &str, op, name: &str| a.authorize(&p(who), "127.0.0.1", op, Topic, name);
        assert!(ok("alice", Read, "orders"));
        assert!(ok("alice", Describe, "orders"), "READ implies DESCRIBE");
        assert!(!ok("alice", Write, "orders"));
        assert!(
            !ok("bob", Read, "orders"),
            "an ACL for someone else turns allow-everyone off"
        );
        assert!(ok("bob", Write, "logs-app"));
        assert!(!ok("bob", Write, "logs-secret"), "deny wins");
        assert!(ok("carol", Delete, "anything"));
        assert!(!ok("carol", Read, "x"));
        assert!(
            ok("carol", Describe, "x"),
            "DENY READ does not deny DESCRIBE"
        );
        assert!(ok("admin", Delete, "orders"), "super users");
        // No ACL applies to the group at all: allow.everyone.if.no.acl.found.
        assert!(a.authorize(&p("dave"), "1.2.3.4", Read, Group, "g"));
        assert!(a.authorize_any(&p("bob"), "h", Write, Topic));
        assert!(
            a.authorize_any(&p("alice"), "h", Write, Topic),
            "User:* may write logs-*"
        );
        assert!(!a.authorize_any(&p("alice"), "h", Delete, Topic));
    }

    #[test]
    fn file_round_trip() {
        let set: BTreeSet<AclBinding> = [acl(
            ResourceType::Group,
            "g 1",
            PatternType::Prefixed,
            "User:al ice",
            Operation::Read,
            Permission::Allow,
        )]
        .into_iter()
        .collect();
        assert_eq!(parse(&format(&set)).unwrap(), set);
    }
}
