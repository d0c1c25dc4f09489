//! Quota entities, quota keys, and Kafka's precedence between them.
//!
//! An entity is a user, a client id, or both, or else an ip; each side is either named or the
//! default (`<default>`, null on the wire). Which keys an entity may set depends on its type:
//! `connection_creation_rate` for an ip, every other key for users and client ids. Which configured entity governs a client, and which clients share one
//! measured rate, follows Kafka's `DefaultQuotaCallback`: user + client-id, user + default
//! client, user, default user + client-id, default user + default client, default user,
//! client-id, default client-id, then sluice's static default from `server.properties`. Each
//! quota key is resolved on its own. sluice has no authentication, so the user is always
//! `ANONYMOUS`; quotas for that user or the default user still apply.

use std::collections::BTreeMap;
use std::fmt;

/// The principal of every sluice connection: there is no authentication.
pub const ANONYMOUS_USER: &str = "ANONYMOUS";

pub const ENTITY_USER: &str = "user";
pub const ENTITY_CLIENT_ID: &str = "client-id";
pub const ENTITY_IP: &str = "ip";

/// One side of an entity: a name, or the default for that entity type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// Null on the wire is the default.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        match name {
            None => EntityName::Default,
            Some(name) => EntityName::Named(name.to_string()),
        }
    }

    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(name) => Some(name),
        }
    }

    fn named(name: &str) -> EntityName {
        EntityName::Named(name.to_string())
    }
}

/// A configured quota entity. At least one side is present, and an ip is never combined with
/// a user or client id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    /// `(entity type, name)` pairs, user first, as DescribeClientQuotas lists them.
    pub fn components(&self) -> Vec<(&'static str, Option<&str>)> {
        [
            (ENTITY_USER, &self.user),
            (ENTITY_CLIENT_ID, &self.client_id),
            (ENTITY_IP, &self.ip),
        ]
        .into_iter()
        .filter_map(|(kind, name)| name.as_ref().map(|n| (kind, n.to_wire())))
        .collect()
    }

    /// The keys this kind of entity may set (Kafka's `QuotaConfig.ipConfigs` and
    /// `userAndClientQuotaConfigs`).
    pub fn valid_keys(&self) -> &'static [QuotaKey] {
        if self.ip.is_some() {
            &[QuotaKey::ConnectionCreationRate]
        } else {
            &QuotaKey::USER_AND_CLIENT
        }
    }
}

impl fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .components()
            .into_iter()
            .map(|(kind, name)| format!("{kind}={}", name.unwrap_or("<default>")))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Kafka's quota keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKey {
    /// Produce request bytes per second.
    ProducerByteRate,
    /// Fetch response bytes per second.
    ConsumerByteRate,
    /// Request handler time, in percent of one thread, per quota window.
    RequestPercentage,
    /// Partitions created or deleted per second (CreateTopics, CreatePartitions, DeleteTopics).
    ControllerMutationRate,
    /// New connections per second from one ip.
    ConnectionCreationRate,
}

/// How Kafka types a quota value (`ConfigDef.Type`), which bounds what may be set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaValueType {
    Long,
    Int,
    Double,
}

impl QuotaKey {
    pub const COUNT: usize = 5;
    pub const ALL: [QuotaKey; QuotaKey::COUNT] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ControllerMutationRate,
        QuotaKey::ConnectionCreationRate,
    ];
    pub const USER_AND_CLIENT: [QuotaKey; 4] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ControllerMutationRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
            QuotaKey::ControllerMutationRate => "controller_mutation_rate",
            QuotaKey::ConnectionCreationRate => "connection_creation_rate",
        }
    }

    pub fn from_name(name: &str) -> Option<QuotaKey> {
        QuotaKey::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Kafka types the byte rates as LONG, the connection rate as INT, the others as DOUBLE.
    pub fn value_type(self) -> QuotaValueType {
        match self {
            QuotaKey::ProducerByteRate | QuotaKey::ConsumerByteRate => QuotaValueType::Long,
            QuotaKey::ConnectionCreationRate => QuotaValueType::Int,
            QuotaKey::RequestPercentage | QuotaKey::ControllerMutationRate => {
                QuotaValueType::Double
            }
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The values set for one entity.
pub type QuotaValues = BTreeMap<QuotaKey, f64>;

/// Every quota set through AlterClientQuotas: what DescribeClientQuotas reports and the quota
/// file holds. An entity with no values is not kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaOverrides {
    pub entities: BTreeMap<QuotaEntity, QuotaValues>,
}

/// Who shares one measured rate (Kafka's metric tags): a user, a client id, or both; an empty
/// string means that side is not part of the key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SensorKey {
    pub user: String,
    pub client_id: String,
}

impl QuotaOverrides {
    fn get(
        &self,
        key: QuotaKey,
        user: Option<EntityName>,
        client_id: Option<EntityName>,
    ) -> Option<f64> {
        let entity = QuotaEntity {
            user,
            client_id,
            ip: None,
        };
        self.entities.get(&entity)?.get(&key).copied()
    }

    fn has(&self, key: QuotaKey, user: Option<EntityName>, client: Option<EntityName>) -> bool {
        self.get(key, user, client).is_some()
    }

    /// Whether any entity sets `key`.
    pub fn any(&self, key: QuotaKey) -> bool {
        self.entities.values().any(|v| v.contains_key(&key))
    }

    /// Which rate a client's `key` is measured in (Kafka's `quotaMetricTags`): the most
    /// specific configured entity decides whether the user, the client id or both share it.
    pub fn sensor_key(&self, key: QuotaKey, user: &str, client_id: &str) -> SensorKey {
        use EntityName::Default;
        let (u, c) = (EntityName::named(user), EntityName::named(client_id));
        let both = SensorKey {
            user: user.to_string(),
            client_id: client_id.to_string(),
        };
        let user_only = SensorKey {
            user: user.to_string(),
            client_id: String::new(),
        };
        if self.has(key, Some(u.clone()), Some(c.clone()))
            || self.has(key, Some(u.clone()), Some(Default))
        {
            both
        } else if self.has(key, Some(u), None) {
            user_only
        } else if self.has(key, Some(Default), Some(c))
            || self.has(key, Some(Default), Some(Default))
        {
            both
        } else if self.has(key, Some(Default), None) {
            user_only
        } else {
            SensorKey {
                user: String::new(),
                client_id: client_id.to_string(),
            }
        }
    }

    /// The bound of the rate `sensor` (Kafka's `quotaLimit`), or None when unlimited.
    /// `static_default` is sluice's `server.properties` default, the last resort for client ids.
    pub fn limit(
        &self,
        key: QuotaKey,
        sensor: &SensorKey,
        static_default: Option<f64>,
    ) -> Option<f64> {
        use EntityName::Default;
        let user = || Some(EntityName::named(&sensor.user));
        let client = || Some(EntityName::named(&sensor.client_id));
        match (sensor.user.is_empty(), sensor.client_id.is_empty()) {
            (false, false) => self
                .get(key, user(), client())
                .or_else(|| self.get(key, user(), Some(Default)))
                .or_else(|| self.get(key, Some(Default), client()))
                .or_else(|| self.get(key, Some(Default), Some(Default))),
            (false, true) => self
                .get(key, user(), None)
                .or_else(|| self.get(key, Some(Default), None)),
            (true, false) => self
                .get(key, None, client())
                .or_else(|| self.get(key, None, Some(Default)))
                .or(static_default),
            (true, true) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(s: &str) -> Option<EntityName> {
        Some(EntityName::Named(s.into()))
    }

    const D: Option<EntityName> = Some(EntityName::Default);
    const P: QuotaKey = QuotaKey::ProducerByteRate;

    fn set(o: &mut QuotaOverrides, user: Option<EntityName>, client: Option<EntityName>, v: f64) {
        let entity = QuotaEntity {
            user,
            client_id: client,
            ip: None,
        };
        o.entities.entry(entity).or_default().insert(P, v);
    }

    fn resolve(o: &QuotaOverrides, client: &str) -> (SensorKey, Option<f64>) {
        let sensor = o.sensor_key(P, ANONYMOUS_USER, client);
        let limit = o.limit(P, &sensor, Some(9.0));
        (sensor, limit)
    }

    #[test]
    fn precedence_is_kafkas() {
        // Added from least to most specific; each addition must take over.
        let mut o = QuotaOverrides::default();
        assert_eq!(resolve(&o, "app").1, Some(9.0), "static default");
        set(&mut o, None, D, 8.0);
        assert_eq!(resolve(&o, "app").1, Some(8.0), "default client-id");
        set(&mut o, None, named("app"), 7.0);
        assert_eq!(resolve(&o, "app").1, Some(7.0), "client-id");
        assert_eq!(resolve(&o, "other").1, Some(8.0));
        set(&mut o, D, None, 6.0);
        assert_eq!(resolve(&o, "app").1, Some(6.0), "default user");
        set(&mut o, D, D, 5.0);
        assert_eq!(
            resolve(&o, "app").1,
            Some(5.0),
            "default user + default client"
        );
        set(&mut o, D, named("app"), 4.0);
        assert_eq!(resolve(&o, "app").1, Some(4.0), "default user + client-id");
        assert_eq!(resolve(&o, "other").1, Some(5.0));
        set(&mut o, named(ANONYMOUS_USER), None, 3.0);
        assert_eq!(resolve(&o, "app").1, Some(3.0), "user");
        set(&mut o, named(ANONYMOUS_USER), D, 2.0);
        assert_eq!(resolve(&o, "app").1, Some(2.0), "user + default client");
        set(&mut o, named(ANONYMOUS_USER), named("app"), 1.0);
        assert_eq!(resolve(&o, "app").1, Some(1.0), "user + client-id");
        assert_eq!(resolve(&o, "other").1, Some(2.0));
    }

    #[test]
    fn sensors_are_shared_as_kafka_shares_them() {
        let mut o = QuotaOverrides::default();
        // A client-id default: each client id has its own rate.
        set(&mut o, None, D, 8.0);
        let (sensor, _) = resolve(&o, "a");
        assert_eq!((sensor.user.as_str(), sensor.client_id.as_str()), ("", "a"));
        // A user quota: every client of the user shares one rate.
        set(&mut o, named(ANONYMOUS_USER), None, 3.0);
        let (a, _) = resolve(&o, "a");
        let (b, _) = resolve(&o, "b");
        assert_eq!(a, b);
        assert_eq!(a.client_id, "");
        // Other keys are resolved separately.
        let fetch = o.sensor_key(QuotaKey::ConsumerByteRate, ANONYMOUS_USER, "a");
        assert_eq!(o.limit(QuotaKey::ConsumerByteRate, &fetch, None), None);
    }

    #[test]
    fn entity_display_and_components() {
        let e = QuotaEntity {
            user: Some(EntityName::Default),
            client_id: named("x"),
            ip: None,
        };
        assert_eq!(e.to_string(), "user=<default>,client-id=x");
        assert_eq!(
            e.components(),
            vec![(ENTITY_USER, None), (ENTITY_CLIENT_ID, Some("x"))]
        );
        assert_eq!(
            QuotaKey::from_name("request_percentage"),
            Some(QuotaKey::RequestPercentage)
        );
        assert_eq!(QuotaKey::from_name("bogus"), None);
        let ip = QuotaEntity {
            ip: Some(EntityName::Default),
            ..QuotaEntity::default()
        };
        assert_eq!(ip.to_string(), "ip=<default>");
        assert_eq!(ip.valid_keys(), [QuotaKey::ConnectionCreationRate]);
    }
}
