//! The quota manager on a manual clock: throttle times, fetch caps, request time, and
//! AlterClientQuotas applied live and persisted.

use std::time::Duration;

use super::*;
use crate::time::{Clock, ManualClock};
use std::net::IpAddr;

fn manager(dir: &std::path::Path, pairs: &[(&str, &str)]) -> QuotaManager {
    let mut all: Vec<(String, String)> = vec![("log.dirs".into(), dir.display().to_string())];
    all.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    QuotaManager::open(
        &Config::from_pairs(&all).unwrap(),
        &crate::disk::Disk::real(),
    )
    .unwrap()
}

fn set_client(m: &QuotaManager, client: &str, key: &str, value: f64) {
    let entry = AlterEntry {
        components: vec![("client-id", Some(client))],
        ops: vec![AlterOp {
            key,
            value,
            remove: false,
        }],
    };
    assert_eq!(m.alter(&[entry], false), vec![Ok(())]);
}

#[test]
fn produce_throttle_follows_the_measured_rate() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[]);
    let clock = ManualClock::new(5_000_000);
    // No quota: never throttled, nothing measured.
    assert_eq!(m.record_produce("app", 10_000_000, clock.now_ms()), 0);
    set_client(&m, "app", "producer_byte_rate", 1000.0);
    // 10,000 B over the 10 s minimum window is exactly the bound.
    assert_eq!(m.record_produce("app", 10_000, clock.now_ms()), 0);
    // 12,000 B: 1,200 B/s, X = 0.2 × 10 s.
    assert_eq!(m.record_produce("app", 2_000, clock.now_ms()), 2_000);
    // Another client id has its own rate.
    assert_eq!(m.record_produce("other", 2_000, clock.now_ms()), 0);
    clock.advance_ms(2_000);
    // 12,000 B over 10 s is still 1,200 B/s: the minimum window has not passed.
    assert_eq!(m.record_produce("app", 0, clock.now_ms()), 2_000);
    clock.advance_ms(10_000);
    assert_eq!(m.record_produce("app", 0, clock.now_ms()), 0);
}

#[test]
fn user_quota_is_shared_by_every_client_and_applies_live() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[]);
    set_client(&m, "a", "producer_byte_rate", 1_000_000.0);
    let entry = AlterEntry {
        components: vec![("user", Some(ANONYMOUS_USER))],
        ops: vec![AlterOp {
            key: "producer_byte_rate",
            value: 1000.0,
            remove: false,
        }],
    };
    assert_eq!(m.alter(&[entry], false), vec![Ok(())]);
    // The user quota beats the client-id quota, and both clients fill one rate.
    assert_eq!(m.record_produce("a", 6_000, 0), 0);
    assert_eq!(m.record_produce("b", 6_000, 0), 2_000);
}

#[test]
fn fetch_is_capped_and_can_be_unrecorded() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[("quota.window.num", "6")]);
    assert_eq!(m.fetch_max_bytes("c"), i32::MAX);
    set_client(&m, "c", "consumer_byte_rate", 1_000.0);
    // 1,000 B/s × 5 windows × 1 s.
    assert_eq!(m.fetch_max_bytes("c"), 5_000);
    assert_eq!(m.record_fetch("c", 4_000, 0), 0);
    let throttle_ms = m.record_fetch("c", 4_000, 0);
    // 8,000 B over 5 s = 1,600 B/s: X = 0.6 × 5 s.
    assert_eq!(throttle_ms, 3_000);
    m.unrecord_fetch("c", 4_000, 0);
    assert_eq!(m.record_fetch("c", 1_000, 0), 0);
    set_client(&m, "big", "consumer_byte_rate", 1e12);
    assert_eq!(m.fetch_max_bytes("big"), i32::MAX, "saturates");
}

#[test]
fn request_time_throttle_is_capped_at_one_window() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[]);
    set_client(&m, "r", "request_percentage", 10.0);
    // 1 s of handler time over the 10 s minimum window: 10%, the bound.
    assert_eq!(m.record_request_time("r", Duration::from_secs(1), 0), 0);
    // 1.5 s: 15%, X = 0.5 × 10 s, capped at the 1 s window.
    assert_eq!(
        m.record_request_time("r", Duration::from_millis(500), 0),
        1_000
    );
}

#[test]
fn static_defaults_sit_below_every_configured_quota() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[("sluice.quota.producer.default", "1000")]);
    assert_eq!(m.record_produce("s", 12_000, 0), 2_000);
    let entry = AlterEntry {
        components: vec![("client-id", None)],
        ops: vec![AlterOp {
            key: "producer_byte_rate",
            value: 1_000_000.0,
            remove: false,
        }],
    };
    assert_eq!(m.alter(&[entry], false), vec![Ok(())]);
    assert_eq!(m.record_produce("s", 12_000, 0), 0);
    // Static defaults are not listed, as Kafka never listed its static quotas.
    assert_eq!(m.describe(&[], false).unwrap().len(), 1);
}

#[test]
fn alterations_persist_and_validate_only_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[]);
    let entry = |value| AlterEntry {
        components: vec![("user", None), ("client-id", Some("x"))],
        ops: vec![AlterOp {
            key: "consumer_byte_rate",
            value,
            remove: false,
        }],
    };
    assert_eq!(m.alter(&[entry(5.0)], true), vec![Ok(())]);
    assert!(m.describe(&[], false).unwrap().is_empty());
    assert!(!dir.path().join(QUOTA_FILE_NAME).exists());
    let results = m.alter(&[entry(5.0), entry(6.0), entry(-1.0)], false);
    assert_eq!(results[0], Ok(()));
    assert!(results[1].is_err() && results[2].is_err(), "{results:?}");

    let reopened = manager(dir.path(), &[]);
    let described = reopened.describe(&[], false).unwrap();
    assert_eq!(described.len(), 1);
    let (entity, values) = &described[0];
    assert_eq!(entity.user, Some(EntityName::Default));
    assert_eq!(values.get(&QuotaKey::ConsumerByteRate), Some(&5.0));
}

fn set_entity(m: &QuotaManager, components: Vec<(&str, Option<&str>)>, key: &str, value: f64) {
    let entry = AlterEntry {
        components,
        ops: vec![AlterOp {
            key,
            value,
            remove: false,
        }],
    };
    assert_eq!(m.alter(&[entry], false), vec![Ok(())]);
}

#[test]
fn controller_mutations_strict_refuse_permissive_only_throttle() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[]);
    let now_ms = 1_700_000_000_000;
    let mut unlimited = m.controller_mutation("m", true);
    assert_eq!(unlimited.record(1_000_000, now_ms), Ok(()));
    assert_eq!(unlimited.throttle_time_ms(now_ms), 0);
    set_client(&m, "m", "controller_mutation_rate", 2.0);
    // A burst of 22; the request that empties the bucket still passes.
    let mut strict = m.controller_mutation("m", true);
    assert_eq!(strict.record(30, now_ms), Ok(()));
    assert_eq!(strict.record(1, now_ms), Err(ThrottlingQuotaExceeded));
    assert_eq!(strict.throttle_time_ms(now_ms), 4_000);
    assert_eq!(strict.throttle_time_ms(now_ms + 1_500), 2_500);
    // The refused topic charged nothing; a permissive request charges and reports.
    let mut permissive = m.controller_mutation("m", false);
    assert_eq!(permissive.record(2, now_ms), Ok(()));
    assert_eq!(permissive.throttle_time_ms(now_ms), 5_000);
    // The bucket is per client id.
    assert_eq!(m.controller_mutation("n", true).record(1, now_ms), Ok(()));
}

#[test]
fn connections_over_an_ip_rate_are_refused_and_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), &[]);
    let ip: IpAddr = "10.1.2.3".parse().unwrap();
    let other: IpAddr = "10.1.2.4".parse().unwrap();
    assert_eq!(m.record_connection(ip, 0), 0, "no quota");
    set_entity(
        &m,
        vec![("ip", Some("10.1.2.3"))],
        "connection_creation_rate",
        1.0,
    );
    // 1 per second over the 10 s minimum window: 10 connections, then a refusal.
    for _ in 0..10 {
        assert_eq!(m.record_connection(ip, 0), 0);
    }
    // 11 over 10 s: X = 0.1 × 10 s.
    assert_eq!(m.record_connection(ip, 0), 1_000);
    assert_eq!(m.record_connection(other, 0), 0, "only that ip");
    // The default ip entity covers every other address.
    set_entity(&m, vec![("ip", None)], "connection_creation_rate", 1.0);
    for _ in 0..10 {
        assert_eq!(m.record_connection(other, 0), 0);
    }
    assert!(m.record_connection(other, 0) > 0);
}
