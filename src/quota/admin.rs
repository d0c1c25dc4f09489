//! What AlterClientQuotas and DescribeClientQuotas do to the configured quotas, checked the way
//! Kafka's controller checks them (`ClientQuotaControlManager`, `ClientQuotasImage.describe`),
//! with the same messages. Pure functions over `QuotaOverrides`; the quota manager applies the
//! result and persists it.
//!
//! Unlike Kafka, sluice refuses NaN as a quota value.

use std::collections::HashSet;

use super::entity::{
    EntityName, QuotaEntity, QuotaKey, QuotaOverrides, QuotaValueType, QuotaValues,
    ENTITY_CLIENT_ID, ENTITY_IP, ENTITY_USER,
};

/// Why a quota request (or one entry of it) was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum QuotaError {
    /// INVALID_REQUEST in Kafka.
    InvalidRequest(String),
    /// Kafka answers an unknown entity type in a describe filter with UNSUPPORTED_VERSION.
    UnsupportedEntityType(String),
    /// The quota file could not be written; nothing was changed.
    Storage(String),
}

impl QuotaError {
    pub fn message(&self) -> &str {
        match self {
            QuotaError::InvalidRequest(m)
            | QuotaError::UnsupportedEntityType(m)
            | QuotaError::Storage(m) => m,
        }
    }
}

fn invalid(message: String) -> QuotaError {
    QuotaError::InvalidRequest(message)
}

/// One operation of an AlterClientQuotas entry.
#[derive(Clone, Copy, Debug)]
pub struct AlterOp<'a> {
    pub key: &'a str,
    pub value: f64,
    pub remove: bool,
}

/// One entry of AlterClientQuotas: `(entity type, name or None for the default)` pairs and
/// the operations on that entity.
#[derive(Clone, Debug)]
pub struct AlterEntry<'a> {
    pub components: Vec<(&'a str, Option<&'a str>)>,
    pub ops: Vec<AlterOp<'a>>,
}

/// Applies every entry to `overrides`, each on its own: a refused entry changes nothing, the
/// others still apply. An entity named twice is refused the second time, as Kafka does.
pub fn alter_all(
    overrides: &mut QuotaOverrides,
    entries: &[AlterEntry],
) -> Vec<Result<(), QuotaError>> {
    let mut seen = HashSet::new();
    entries
        .iter()
        .map(|entry| {
            let mut components = entry.components.clone();
            components.sort();
            if !seen.insert(components) {
                return Err(invalid("Ignoring duplicate entity".into()));
            }
            alter(overrides, &entry.components, &entry.ops).map(|_| ())
        })
        .collect()
}

/// Checks one AlterClientQuotas entry and applies it to `overrides`. On error nothing of the
/// entry is applied.
pub fn alter(
    overrides: &mut QuotaOverrides,
    components: &[(&str, Option<&str>)],
    ops: &[AlterOp],
) -> Result<QuotaEntity, QuotaError> {
    let mut keys = HashSet::new();
    if let Some(op) = ops.iter().find(|op| !keys.insert(op.key)) {
        return Err(invalid(format!(
            "Duplicate quota key {} not updating quota for this entity",
            op.key
        )));
    }
    let entity = entity(components)?;
    let mut changes = Vec::with_capacity(ops.len());
    for op in ops {
        if op.remove {
            if let Some(key) = QuotaKey::from_name(op.key) {
                changes.push((key, None));
            }
        } else {
            changes.push((validate_value(&entity, op.key, op.value)?, Some(op.value)));
        }
    }
    let values = overrides.entities.entry(entity.clone()).or_default();
    for (key, value) in changes {
        match value {
            Some(value) => values.insert(key, value),
            None => values.remove(&key),
        };
    }
    if values.is_empty() {
        overrides.entities.remove(&entity);
    }
    Ok(entity)
}

fn entity(components: &[(&str, Option<&str>)]) -> Result<QuotaEntity, QuotaError> {
    if components.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    let mut entity = QuotaEntity::default();
    for &(kind, name) in components {
        let slot = match kind {
            ENTITY_USER => &mut entity.user,
            ENTITY_CLIENT_ID => &mut entity.client_id,
            ENTITY_IP => &mut entity.ip,
            _ => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {kind}"
                )))
            }
        };
        if slot.replace(EntityName::from_wire(name)).is_some() {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            )));
        }
        if name == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
    }
    if let Some(ip) = &entity.ip {
        if entity.user.is_some() || entity.client_id.is_some() {
            // Kafka's message, missing space included.
            return Err(invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into(),
            ));
        }
        // Kafka accepts what `InetAddress.getByName` accepts: an address, or a host name that
        // resolves.
        if let EntityName::Named(name) = ip {
            if super::resolve_ip(name).is_none() {
                return Err(invalid(format!(
                    "{name} is not a valid IP or resolvable host."
                )));
            }
        }
    }
    Ok(entity)
}

/// Kafka's `validateQuotaKeyValue`: the key must be one the entity type may set, the value
/// positive, and whole and in range for an INT or LONG key. A DOUBLE key may be infinite (no
/// limit), as in Kafka. sluice also refuses NaN, which Kafka stores although no rate can be
/// compared with it.
fn validate_value(
    entity: &QuotaEntity,
    key_name: &str,
    value: f64,
) -> Result<QuotaKey, QuotaError> {
    let Some(key) = QuotaKey::from_name(key_name).filter(|k| entity.valid_keys().contains(k))
    else {
        return Err(invalid(format!("Invalid configuration key {key_name}")));
    };
    if value <= 0.0 {
        return Err(invalid(format!("Quota {key_name} must be greater than 0")));
    }
    let (limit, type_name) = match key.value_type() {
        QuotaValueType::Double => (f64::INFINITY, ""),
        QuotaValueType::Int => (f64::from(i32::MAX), "an INT"),
        QuotaValueType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > limit {
        return Err(invalid(format!(
            "Proposed value for {key_name} is too large for {type_name}."
        )));
    }
    if value.is_nan() {
        return Err(invalid(format!("Quota {key_name} must be a number")));
    }
    if key.value_type() != QuotaValueType::Double && (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key_name} cannot be a fractional value.")));
    }
    Ok(key)
}

/// DescribeClientQuotas' match types.
pub const MATCH_EXACT: i8 = 0;
pub const MATCH_DEFAULT: i8 = 1;
pub const MATCH_SPECIFIED: i8 = 2;

/// One filter component of DescribeClientQuotas.
#[derive(Clone, Copy, Debug)]
pub struct FilterComponent<'a> {
    pub entity_type: &'a str,
    pub match_type: i8,
    pub name: Option<&'a str>,
}

/// What a filter asks for: exact names (None = the default) and types that must be present.
struct Filter<'a> {
    exact: Vec<(&'a str, Option<&'a str>)>,
    present: Vec<&'a str>,
}

/// The entities a DescribeClientQuotas filter matches, with their values, in entity order.
pub fn describe(
    overrides: &QuotaOverrides,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<(QuotaEntity, QuotaValues)>, QuotaError> {
    let filter = filter(components)?;
    let wanted = filter.exact.len() + filter.present.len();
    Ok(overrides
        .entities
        .iter()
        .filter(|(entity, _)| {
            let have = entity.components();
            let name_of = |kind: &str| have.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n);
            (!strict || have.len() == wanted)
                && filter
                    .exact
                    .iter()
                    .all(|&(kind, name)| name_of(kind) == Some(name))
                && filter.present.iter().all(|kind| name_of(kind).is_some())
        })
        .map(|(entity, values)| (entity.clone(), values.clone()))
        .collect())
}

fn filter<'a>(components: &[FilterComponent<'a>]) -> Result<Filter<'a>, QuotaError> {
    let mut filter = Filter {
        exact: Vec::new(),
        present: Vec::new(),
    };
    let mut seen = HashSet::new();
    for c in components {
        let kind = c.entity_type;
        if kind.is_empty() {
            return Err(invalid("Invalid empty entity type.".into()));
        }
        if !seen.insert(kind) {
            return Err(invalid(format!(
                "Entity type {kind} cannot appear more than once in the filter."
            )));
        }
        if ![ENTITY_IP, ENTITY_USER, ENTITY_CLIENT_ID].contains(&kind) {
            return Err(QuotaError::UnsupportedEntityType(format!(
                "Unsupported entity type {kind}"
            )));
        }
        match (c.match_type, c.name) {
            (MATCH_EXACT, None) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                ))
            }
            (MATCH_EXACT, Some(name)) => filter.exact.push((kind, Some(name))),
            (MATCH_DEFAULT, None) => filter.exact.push((kind, None)),
            (MATCH_SPECIFIED, None) => filter.present.push(kind),
            (MATCH_DEFAULT, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .into(),
                ))
            }
            (MATCH_SPECIFIED, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                ))
            }
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        }
    }
    if seen.contains(ENTITY_IP) && (seen.contains(ENTITY_USER) || seen.contains(ENTITY_CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.".into(),
        ));
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(key: &'a str, value: f64) -> AlterOp<'a> {
        AlterOp {
            key,
            value,
            remove: false,
        }
    }

    fn remove(key: &str) -> AlterOp<'_> {
        AlterOp {
            key,
            value: 0.0,
            remove: true,
        }
    }

    fn error_of(result: Result<QuotaEntity, QuotaError>) -> String {
        result.unwrap_err().message().to_string()
    }

    #[test]
    fn alter_sets_and_removes() {
        let mut o = QuotaOverrides::default();
        let client = [(ENTITY_CLIENT_ID, Some("app"))];
        let ops = [
            set("producer_byte_rate", 1024.0),
            set("request_percentage", 12.5),
        ];
        alter(&mut o, &client, &ops).unwrap();
        assert_eq!(o.entities.len(), 1);
        alter(
            &mut o,
            &client,
            &[remove("producer_byte_rate"), remove("nonsense")],
        )
        .unwrap();
        assert_eq!(o.entities.values().next().unwrap().len(), 1);
        alter(&mut o, &client, &[remove("request_percentage")]).unwrap();
        assert!(o.entities.is_empty(), "an entity without values is dropped");
    }

    #[test]
    fn alter_refuses_what_kafka_refuses() {
        let mut o = QuotaOverrides::default();
        let client = [(ENTITY_CLIENT_ID, Some("app"))];
        type Case<'a> = (Vec<(&'a str, Option<&'a str>)>, Vec<AlterOp<'a>>, &'a str);
        let cases: Vec<Case> = vec![
            (
                client.to_vec(),
                vec![set("bogus", 1.0)],
                "Invalid configuration key bogus",
            ),
            (
                client.to_vec(),
                vec![set("producer_byte_rate", -1.0)],
                "must be greater than 0",
            ),
            (
                client.to_vec(),
                vec![set("producer_byte_rate", 0.0)],
                "must be greater than 0",
            ),
            (
                client.to_vec(),
                vec![set("consumer_byte_rate", 1.5)],
                "fractional",
            ),
            (
                client.to_vec(),
                vec![set("consumer_byte_rate", 1e19)],
                "too large for a LONG",
            ),
            (
                client.to_vec(),
                vec![set("request_percentage", f64::NAN)],
                "must be a number",
            ),
            (
                client.to_vec(),
                vec![set("connection_creation_rate", 1.0)],
                "Invalid configuration key connection_creation_rate",
            ),
            (
                vec![(ENTITY_IP, Some("10.0.0.1"))],
                vec![set("producer_byte_rate", 1.0)],
                "Invalid configuration key producer_byte_rate",
            ),
            (
                vec![(ENTITY_IP, None)],
                vec![set("connection_creation_rate", 1.5)],
                "fractional",
            ),
            (
                vec![(ENTITY_IP, None)],
                vec![set("connection_creation_rate", 3e9)],
                "too large for an INT",
            ),
            (
                vec![(ENTITY_IP, Some("no-such-host.invalid"))],
                vec![set("connection_creation_rate", 1.0)],
                "no-such-host.invalid is not a valid IP or resolvable host.",
            ),
            (
                client.to_vec(),
                vec![set("producer_byte_rate", 1.0), remove("producer_byte_rate")],
                "Duplicate quota key",
            ),
            (
                vec![],
                vec![set("producer_byte_rate", 1.0)],
                "Invalid empty client quota entity",
            ),
            (
                vec![("group", Some("g"))],
                vec![],
                "Unhandled client quota entity type: group",
            ),
            (
                vec![(ENTITY_USER, Some(""))],
                vec![],
                "Empty user not supported",
            ),
            (
                vec![(ENTITY_USER, None), (ENTITY_USER, Some("a"))],
                vec![],
                "duplicate entity entry",
            ),
            (
                vec![(ENTITY_IP, None), (ENTITY_USER, None)],
                vec![],
                "IP entity shouldnot be combined",
            ),
        ];
        for (components, ops, expected) in cases {
            let message = error_of(alter(&mut o, &components, &ops));
            assert!(message.contains(expected), "{message} lacks {expected}");
        }
        assert!(o.entities.is_empty(), "nothing applied");
        // A fractional request_percentage is fine; so is a huge byte rate below Long.MAX_VALUE.
        alter(
            &mut o,
            &client,
            &[
                set("request_percentage", 0.5),
                set("producer_byte_rate", 9e18),
                set("controller_mutation_rate", f64::INFINITY),
            ],
        )
        .unwrap();
        for ip in [Some("10.0.0.1"), Some("::1"), None] {
            let entity = [(ENTITY_IP, ip)];
            alter(&mut o, &entity, &[set("connection_creation_rate", 10.0)]).unwrap();
        }
        assert_eq!(o.entities.len(), 4);
    }

    #[test]
    fn describe_filters_like_kafka() {
        let mut o = QuotaOverrides::default();
        let op = [set("producer_byte_rate", 1.0)];
        for components in [
            vec![(ENTITY_CLIENT_ID, Some("a"))],
            vec![(ENTITY_CLIENT_ID, None)],
            vec![(ENTITY_USER, None), (ENTITY_CLIENT_ID, Some("a"))],
            vec![(ENTITY_USER, Some("u"))],
        ] {
            alter(&mut o, &components, &op).unwrap();
        }
        let c = |entity_type, match_type, name| FilterComponent {
            entity_type,
            match_type,
            name,
        };
        let count = |components: &[FilterComponent], strict| {
            describe(&o, components, strict).unwrap().len()
        };
        assert_eq!(count(&[], false), 4);
        assert_eq!(count(&[], true), 0);
        assert_eq!(
            count(&[c(ENTITY_CLIENT_ID, MATCH_EXACT, Some("a"))], false),
            2
        );
        assert_eq!(
            count(&[c(ENTITY_CLIENT_ID, MATCH_EXACT, Some("a"))], true),
            1
        );
        assert_eq!(count(&[c(ENTITY_CLIENT_ID, MATCH_DEFAULT, None)], true), 1);
        assert_eq!(
            count(&[c(ENTITY_CLIENT_ID, MATCH_SPECIFIED, None)], false),
            3
        );
        assert_eq!(count(&[c(ENTITY_USER, MATCH_SPECIFIED, None)], true), 1);
        assert_eq!(count(&[c(ENTITY_IP, MATCH_SPECIFIED, None)], false), 0);

        let error = |components: &[FilterComponent]| describe(&o, components, false).unwrap_err();
        assert!(matches!(
            error(&[c("group", MATCH_SPECIFIED, None)]),
            QuotaError::UnsupportedEntityType(_)
        ));
        for bad in [
            vec![c("", MATCH_SPECIFIED, None)],
            vec![c(ENTITY_USER, MATCH_EXACT, None)],
            vec![c(ENTITY_USER, MATCH_DEFAULT, Some("x"))],
            vec![c(ENTITY_USER, MATCH_SPECIFIED, Some("x"))],
            vec![c(ENTITY_USER, 7, None)],
            vec![
                c(ENTITY_USER, MATCH_SPECIFIED, None),
                c(ENTITY_USER, MATCH_DEFAULT, None),
            ],
            vec![
                c(ENTITY_IP, MATCH_SPECIFIED, None),
                c(ENTITY_USER, MATCH_DEFAULT, None),
            ],
        ] {
            assert!(
                matches!(error(&bad), QuotaError::InvalidRequest(_)),
                "{bad:?}"
            );
        }
    }
}
