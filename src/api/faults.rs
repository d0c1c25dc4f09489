//! Fault injection for tests, off unless `sluice.fault.injection.enable` is set: rules that
//! make the next matching requests fail with a chosen Kafka error, wait before answering, lose
//! their connection, or come back throttled; a switch that refuses new connections; and a
//! short log of the requests served. Tests drive it over the HTTP endpoint
//! (`network/http.rs`, docs/fault-injection.md) or through `EmbeddedBroker::faults`.
//!
//! `api::handle` consults it once per request (`take`); while no rule is armed that is one
//! atomic load. A rule matches by API and, when given, client id, topic and partition (a
//! request matches when it names that partition), and is used up after `count` matches.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use serde_json::{json, Value};

/// How many served requests `recent` keeps.
pub const RECENT_REQUESTS: usize = 1_000;

/// What a matching request gets.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultAction {
    /// The response carries this Kafka error code wherever the API has one (every partition of
    /// a produce or fetch); nothing is done.
    Error(i16),
    /// The request is handled after this wait.
    Delay(Duration),
    /// The connection is closed instead of answering.
    Close,
    /// The response says this throttle time, and the connection is muted for it (KIP-219).
    Throttle(Duration),
}

/// One rule: which requests it matches and what they get.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRule {
    /// Kafka's API key; None matches every API.
    pub api_key: Option<i16>,
    pub client_id: Option<String>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    /// Requests still to match; the rule goes when it reaches 0.
    pub remaining: u64,
    pub action: FaultAction,
}

impl FaultRule {
    /// The next request of `api` (Kafka's name, e.g. "Produce") fails with `error` (Kafka's
    /// name, e.g. "NOT_LEADER_OR_FOLLOWER"); narrow it with `topic`, `partition`, `client_id`
    /// and `count`.
    pub fn error(api: &str, error: &str) -> Result<FaultRule, String> {
        rule_from_json(&json!({"action": "error", "api": api, "error": error}))
    }

    /// Every request (of `api`, when given) waits `delay` before it is handled.
    pub fn delay(api: Option<&str>, delay: Duration) -> Result<FaultRule, String> {
        rule_from_json(&json!({"action": "delay", "api": api, "ms": delay.as_millis() as u64}))
    }

    /// The next request (of `api`, when given) has its connection closed instead of an answer.
    pub fn close(api: Option<&str>) -> Result<FaultRule, String> {
        rule_from_json(&json!({"action": "close", "api": api}))
    }

    /// Every response (to `client_id`, when given) says `throttle` and mutes the connection.
    pub fn throttle(throttle: Duration) -> FaultRule {
        FaultRule {
            api_key: None,
            client_id: None,
            topic: None,
            partition: None,
            remaining: u64::MAX,
            action: FaultAction::Throttle(throttle),
        }
    }

    pub fn count(mut self, count: u64) -> Self {
        self.remaining = count.max(1);
        self
    }

    pub fn topic(mut self, topic: &str) -> Self {
        self.topic = Some(topic.to_string());
        self
    }

    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn client_id(mut self, client_id: &str) -> Self {
        self.client_id = Some(client_id.to_string());
        self
    }
}

/// A request that was served, for `recent`.
#[derive(Clone, Debug)]
pub struct ServedRequest {
    pub api_key: i16,
    pub version: i16,
    pub client_id: String,
    /// The error answered at the top of the response (or injected), if any; -2: the
    /// connection was closed instead.
    pub error_code: Option<i16>,
}

/// The fault-injection state of one broker.
#[derive(Debug, Default)]
pub struct Faults {
    enabled: bool,
    /// True while `rules` is not empty: the request path's only cost when nothing is armed.
    armed: AtomicBool,
    rules: Mutex<Vec<FaultRule>>,
    refuse_connections: AtomicBool,
    recent: Mutex<VecDeque<ServedRequest>>,
}

impl Faults {
    pub fn new(enabled: bool) -> Faults {
        Faults {
            enabled,
            ..Faults::default()
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Adds a rule (checked after the ones before it).
    pub fn add(&self, rule: FaultRule) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.push(rule);
        self.armed.store(true, Ordering::SeqCst);
    }

    pub fn rules(&self) -> Vec<FaultRule> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// New connections are closed at once while set.
    pub fn set_refuse_connections(&self, refuse: bool) {
        self.refuse_connections.store(refuse, Ordering::SeqCst);
    }

    pub fn refuses_connections(&self) -> bool {
        self.enabled && self.refuse_connections.load(Ordering::Relaxed)
    }

    /// Back to a clean state: no rule, connections accepted, no request remembered.
    pub fn reset(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.armed.store(false, Ordering::SeqCst);
        self.refuse_connections.store(false, Ordering::SeqCst);
        self.recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The action for a request, using up one match of the first rule it matches.
    /// `partitions` lists the (topic, partition) pairs the request names, asked for only when
    /// a rule needs them.
    pub fn take(
        &self,
        api_key: i16,
        client_id: &str,
        partitions: impl FnOnce() -> Vec<(String, i32)>,
    ) -> Option<FaultAction> {
        if !self.enabled || !self.armed.load(Ordering::Relaxed) {
            return None;
        }
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let mut named: Option<Vec<(String, i32)>> = None;
        let mut partitions = Some(partitions);
        let index = rules.iter().position(|rule| {
            if rule.api_key.is_some_and(|k| k != api_key)
                || rule.client_id.as_deref().is_some_and(|c| c != client_id)
            {
                return false;
            }
            if rule.topic.is_none() && rule.partition.is_none() {
                return true;
            }
            let named =
                named.get_or_insert_with(|| partitions.take().map_or_else(Vec::new, |f| f()));
            named.iter().any(|(topic, partition)| {
                rule.topic.as_deref().is_none_or(|t| t == topic)
                    && rule.partition.is_none_or(|p| p == *partition)
            })
        })?;
        let rule = &mut rules[index];
        let action = rule.action.clone();
        rule.remaining = rule.remaining.saturating_sub(1);
        if rule.remaining == 0 {
            rules.remove(index);
            self.armed.store(!rules.is_empty(), Ordering::SeqCst);
        }
        Some(action)
    }

    /// Remembers a served request (only while fault injection is enabled).
    pub fn record(&self, served: ServedRequest) {
        if !self.enabled {
            return;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == RECENT_REQUESTS {
            recent.pop_front();
        }
        recent.push_back(served);
    }

    pub fn recent(&self) -> Vec<ServedRequest> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.iter().cloned().collect()
    }
}

/// Kafka's name of an API key ("Produce", "FindCoordinator"), or None for an unknown key.
pub fn api_name(api_key: i16) -> Option<String> {
    ApiKey::try_from(api_key).ok().map(|k| format!("{k:?}"))
}

/// The API key of Kafka's name for it (any case), or of its number.
pub fn api_key_named(name: &str) -> Option<i16> {
    if let Ok(key) = name.parse::<i16>() {
        return api_name(key).map(|_| key);
    }
    (0..i16::MAX)
        .take(200)
        .find(|&k| api_name(k).is_some_and(|n| n.eq_ignore_ascii_case(name)))
}

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`), or None for an unknown code.
pub fn error_name(code: i16) -> Option<String> {
    if code == 0 {
        return Some("NONE".into());
    }
    let error = ResponseError::try_from_code(code)?;
    let camel = format!("{error:?}");
    let mut name = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    Some(name)
}

/// The code of Kafka's name for an error (`NOT_LEADER_OR_FOLLOWER`, any case), or of its number.
pub fn error_code_named(name: &str) -> Option<i16> {
    if let Ok(code) = name.parse::<i16>() {
        return error_name(code).map(|_| code);
    }
    (-1..200).find(|&c| error_name(c).is_some_and(|n| n.eq_ignore_ascii_case(name)))
}

/// A rule from the JSON the HTTP endpoint takes (docs/fault-injection.md): `action` is
/// `error` (with `error`), `delay` (with `ms`), `close` or `throttle` (with `ms`); `api`,
/// `client_id`, `topic`, `partition` narrow it; `count` (default 1; `delay` and `throttle`
/// default to every request until reset) bounds it.
pub fn rule_from_json(body: &Value) -> Result<FaultRule, String> {
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
    let number = |key: &str| body.get(key).and_then(Value::as_i64);
    let api_key = match body.get("api") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(format!("api: expected a name, got {other}")),
    }
    .map(|api| api_key_named(&api).ok_or(format!("unknown api '{api}'")))
    .transpose()?;
    let ms = || {
        number("ms")
            .filter(|&ms| ms >= 0)
            .map(|ms| Duration::from_millis(ms as u64))
            .ok_or("needs \"ms\": a number of milliseconds".to_string())
    };
    let action_name = text("action").ok_or("needs \"action\"")?;
    let (action, default_count) = match action_name.as_str() {
        "error" => {
            let error = match body.get("error") {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => return Err("error: needs \"error\", Kafka's name or code".into()),
            };
            let code = error_code_named(&error).ok_or(format!("unknown error '{error}'"))?;
            let supported = |key: i16| {
                super::fault_responses::ERROR_APIS
                    .iter()
                    .any(|api| *api as i16 == key)
            };
            match api_key {
                Some(key) if supported(key) => {}
                _ => {
                    let names: Vec<String> = super::fault_responses::ERROR_APIS
                        .iter()
                        .map(|api| format!("{api:?}"))
                        .collect();
                    return Err(format!("error: needs \"api\", one of {}", names.join(", ")));
                }
            }
            (FaultAction::Error(code), 1)
        }
        "delay" => (FaultAction::Delay(ms()?), u64::MAX),
        "close" => (FaultAction::Close, 1),
        "throttle" => (FaultAction::Throttle(ms()?), u64::MAX),
        other => return Err(format!("unknown action '{other}'")),
    };
    let count = match number("count") {
        None => default_count,
        Some(n) if n > 0 => n as u64,
        Some(n) => return Err(format!("count: must be at least 1, got {n}")),
    };
    let partition = number("partition")
        .map(|p| i32::try_from(p).map_err(|_| format!("partition: {p} out of range")))
        .transpose()?;
    Ok(FaultRule {
        api_key,
        client_id: text("client_id"),
        topic: text("topic"),
        partition,
        remaining: count,
        action,
    })
}

/// A rule as the HTTP endpoint lists it.
pub fn rule_to_json(rule: &FaultRule) -> Value {
    let (action, extra) = match &rule.action {
        FaultAction::Error(code) => (
            "error",
            json!({"error": error_name(*code), "error_code": code}),
        ),
        FaultAction::Delay(d) => ("delay", json!({"ms": d.as_millis() as u64})),
        FaultAction::Close => ("close", json!({})),
        FaultAction::Throttle(d) => ("throttle", json!({"ms": d.as_millis() as u64})),
    };
    let mut value = json!({
        "action": action,
        "api": rule.api_key.and_then(api_name),
        "client_id": rule.client_id,
        "topic": rule.topic,
        "partition": rule.partition,
        "remaining": (rule.remaining != u64::MAX).then_some(rule.remaining),
    });
    if let (Some(map), Value::Object(extra)) = (value.as_object_mut(), extra) {
        map.extend(extra);
    }
    value
}

/// A served request as the HTTP endpoint lists it.
pub fn served_to_json(served: &ServedRequest) -> Value {
    let error = match served.error_code {
        Some(-2) => Some("CONNECTION_CLOSED".to_string()),
        Some(code) => error_name(code),
        None => None,
    };
    json!({
        "api": api_name(served.api_key),
        "api_key": served.api_key,
        "version": served.version,
        "client_id": served.client_id,
        "error": error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        assert_eq!(error_code_named("NOT_LEADER_OR_FOLLOWER"), Some(6));
        assert_eq!(error_name(15).as_deref(), Some("COORDINATOR_NOT_AVAILABLE"));
        assert_eq!(error_code_named("not_leader_or_follower"), Some(6));
        assert_eq!(api_key_named("findcoordinator"), Some(10));
        assert_eq!(api_key_named("Nope"), None);
    }

    #[test]
    fn a_rule_is_used_up_after_its_count_and_matches_partitions() {
        let faults = Faults::new(true);
        let rule = rule_from_json(&json!({"action": "error", "api": "Produce",
            "error": "NOT_LEADER_OR_FOLLOWER", "count": 2, "topic": "t", "partition": 1}))
        .unwrap();
        faults.add(rule);
        let on = |p| move || vec![("t".to_string(), p)];
        assert_eq!(faults.take(0, "c", on(0)), None);
        assert_eq!(faults.take(1, "c", on(1)), None);
        assert_eq!(faults.take(0, "c", on(1)), Some(FaultAction::Error(6)));
        assert_eq!(faults.take(0, "c", on(1)), Some(FaultAction::Error(6)));
        assert_eq!(faults.take(0, "c", on(1)), None);
        assert!(faults.rules().is_empty());
    }

    #[test]
    fn disabled_faults_never_fire() {
        let faults = Faults::new(false);
        faults.add(rule_from_json(&json!({"action": "close"})).unwrap());
        assert_eq!(faults.take(0, "c", Vec::new), None);
        faults.set_refuse_connections(true);
        assert!(!faults.refuses_connections());
    }
}
