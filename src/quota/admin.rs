//! What AlterClientQuotas and DescribeClientQuotas do to the configured quotas, checked the way
//! Kafka's controller checks them (`ClientQuotaControlManager`, `ClientQuotasImage.describe`),
//! with the same messages. Pure functions over `QuotaOverrides`; the quota manager applies the
//! result and persists it.
//!
//! sluice refuses two things Kafka accepts, rather than store quotas it would not enforce:
//! `ip` entities (`connection_creation_rate`) and `controller_mutation_rate`. It also refuses
//! values that are not finite numbers.

use std::collections::HashSet;

use super::entity::{
    EntityName, QuotaEntity, QuotaKey, QuotaOverrides, QuotaValues, ENTITY_CLIENT_ID, ENTITY_IP,
    ENTITY_USER,
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
            changes.push((validate_value(op.key, op.value)?, Some(op.value)));
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
    let mut seen = HashSet::new();
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    for &(kind, name) in components {
        if !seen.insert(kind) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            )));
        }
        match kind {
            ENTITY_USER => entity.user = Some(EntityName::from_wire(name)),
            ENTITY_CLIENT_ID => entity.client_id = Some(EntityName::from_wire(name)),
            ENTITY_IP => {}
            _ => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {kind}"
                )))
            }
        }
        if name == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
    }
    if seen.contains(ENTITY_IP) {
        return Err(invalid(if components.len() > 1 {
            "Invalid quota entity combination, IP entity should not be combined with User or ClientId".into()
        } else {
            "sluice does not support ip quotas (connection_creation_rate)".into()
        }));
    }
    Ok(entity)
}

fn validate_value(key_name: &str, value: f64) -> Result<QuotaKey, QuotaError> {
    let Some(key) = QuotaKey::from_name(key_name) else {
        let why = if key_name == "controller_mutation_rate" {
            ": sluice does not enforce controller mutation quotas"
        } else {
            ""
        };
        return Err(invalid(format!(
            "Invalid configuration key {key_name}{why}"
        )));
    };
    if !value.is_finite() {
        return Err(invalid(format!("Quota {key_name} must be a finite number")));
    }
    if value <= 0.0 {
        return Err(invalid(format!("Quota {key_name} must be greater than 0")));
    }
    if key.is_integral() {
        if value > i64::MAX as f64 {
            return Err(invalid(format!(
                "Proposed value for {key_name} is too large for a LONG."
            )));
        }
        if (value % 1.0).abs() > 1e-6 {
            return Err(invalid(format!("{key_name} cannot be a fractional value.")));
        }
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
                "finite",
            ),
            (
                client.to_vec(),
                vec![set("controller_mutation_rate", 1.0)],
                "controller_mutation_rate",
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
            (vec![(ENTITY_IP, Some("1.2.3.4"))], vec![], "ip quotas"),
            (
                vec![(ENTITY_IP, None), (ENTITY_USER, None)],
                vec![],
                "IP entity should not",
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
            ],
        )
        .unwrap();
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
