//! Regular-expression subscriptions (ConsumerGroupHeartbeat v1's `SubscribedTopicRegex`). Kafka
//! compiles them with RE2/J and matches whole topic names; sluice uses the `regex` crate, whose
//! syntax is RE2's (the same operators and classes, no backreferences or look-around, linear
//! time), so a pattern Kafka accepts is accepted here and matches the same names, and one it
//! refuses (say `a{2,1}` or `(?<=x)`) is refused with INVALID_REGULAR_EXPRESSION. The group keeps
//! what each expression resolved to (Kafka's `ConsumerGroupRegularExpression` records) and
//! resolves them again on a heartbeat when a topic was created since, at most every 10 s (as
//! Kafka), and at least every `group.consumer.regex.refresh.interval.ms`, so topics created
//! after the subscription are picked up. Unlike Kafka, which resolves in the background and
//! assigns on a later heartbeat, a newly subscribed expression is resolved at once. As on
//! Kafka, an expression resolves only to topics the principal of the heartbeat that resolves
//! it may DESCRIBE.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::member::ConsumerMember;
use super::request::{GroupError, Step};
use super::{Core, ResolvedRegex};

/// Kafka's fixed minimum time between two resolutions of a group's expressions.
const MIN_REFRESH_INTERVAL_MS: i64 = 10_000;

/// What a member's heartbeat did to the group's expressions.
pub(crate) struct RegexUpdate {
    /// The member changed its expression.
    pub regex_changed: bool,
    /// What the assignor sees changed: the group epoch must move.
    pub bump: bool,
}

/// Compiles a pattern to match whole names, as RE2/J's `matches()`; the pattern is checked on
/// its own first, so that wrapping it cannot make a broken one valid.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(pattern).map_err(|e| e.to_string())?;
    regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| e.to_string())
}

/// Kafka's `maybeUpdateRegularExpressions`, with the resolution done in place. `old` is the
/// member as it was (new members have no expression), `updated` as the heartbeat leaves it.
pub(crate) fn update(
    core: &mut Core,
    step: &Step,
    old: &ConsumerMember,
    updated: &ConsumerMember,
) -> Result<RegexUpdate, GroupError> {
    let mut counts = core.subscribed_regexes();
    let mut result = RegexUpdate {
        regex_changed: false,
        bump: false,
    };
    let mut resolve_now = false;
    if old.metadata.subscribed_topic_regex != updated.metadata.subscribed_topic_regex {
        result.regex_changed = true;
        if let Some(old_regex) = old.regex() {
            if core.members.contains_key(&old.member_id) {
                if let Some(count) = counts.get_mut(old_regex) {
                    *count -= 1;
                }
            }
        }
        match updated.regex() {
            Some(new_regex) if counts.get(new_regex).copied().unwrap_or(0) == 0 => {
                compile(new_regex).map_err(|e| {
                    GroupError::new(
                        ResponseError::InvalidRegularExpression,
                        format!("SubscribedTopicRegex `{new_regex}` is not a valid regular expression: {e}."),
                    )
                })?;
                resolve_now = true;
            }
            Some(new_regex) => result.bump = core.regexes.contains_key(new_regex),
            None => result.bump = old.regex().is_some(),
        }
        if let Some(new_regex) = updated.regex() {
            *counts.entry(new_regex.to_string()).or_insert(0) += 1;
        }
    }
    counts.retain(|_, count| *count > 0);
    core.regexes.retain(|regex, _| counts.contains_key(regex));
    if counts.is_empty() || !(resolve_now || refresh_due(core, step, &counts)) {
        return Ok(result);
    }
    if resolve(core, step, &counts) {
        result.bump = true;
    }
    Ok(result)
}

/// Whether the group's expressions should be resolved again now.
fn refresh_due(core: &Core, step: &Step, counts: &BTreeMap<String, usize>) -> bool {
    let now_ms = step.ctx.now_ms;
    let last = core.regexes.values().next();
    let last_ms = last.map_or(i64::MIN, |r| r.timestamp_ms);
    if now_ms <= last_ms.saturating_add(MIN_REFRESH_INTERVAL_MS) {
        return false;
    }
    counts.len() != core.regexes.len()
        || last.is_some_and(|r| r.version < step.topics.version())
        || now_ms > last_ms.saturating_add(step.ctx.config.consumer_regex_refresh_interval_ms)
}

/// Resolves every expression in `counts` against the topics the requesting principal may
/// describe; true if any now matches other topics than before. An expression stored before
/// that no longer compiles matches nothing.
fn resolve(core: &mut Core, step: &Step, counts: &BTreeMap<String, usize>) -> bool {
    let mut names = step.topics.names();
    names.retain(|n| (step.describable)(n));
    let version = step.topics.version();
    let mut changed = false;
    for regex in counts.keys() {
        let topics: BTreeSet<String> = match compile(regex) {
            Ok(compiled) => names
                .iter()
                .filter(|n| compiled.is_match(n))
                .cloned()
                .collect(),
            Err(e) => {
                tracing::warn!(
                    group_id = step.group_id,
                    regex,
                    "cannot compile a stored regular expression: {e}"
                );
                BTreeSet::new()
            }
        };
        if core.regexes.get(regex).map(|r| &r.topics) != Some(&topics) {
            changed = true;
        }
        tracing::debug!(
            group_id = step.group_id,
            regex,
            ?topics,
            "resolved a regular expression"
        );
        core.regexes.insert(
            regex.clone(),
            ResolvedRegex {
                topics,
                version,
                timestamp_ms: step.ctx.now_ms,
            },
        );
    }
    changed
}
