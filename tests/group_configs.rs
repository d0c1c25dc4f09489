//! Group configs over real sockets (the GROUP config resource, `kafka-configs --entity-type
//! groups`), with the answers of Kafka 4.4: DescribeConfigs of any group id with values,
//! sources and synonyms; IncrementalAlterConfigs and legacy AlterConfigs checked against the
//! broker's `group.consumer.*` bounds with Kafka's codes and messages; ListConfigResources; the
//! coordinator applying a group's session timeout and heartbeat interval while other groups keep
//! the broker's; and the configs surviving a restart, clamped to the broker's bounds in force.

mod common;

use common::configs::{describe_configs, incremental_alter_configs, DELETE, SET};
use common::consumer::{beat, describe, join, send};
use common::data::create_topic;
use common::{Client, TestBroker};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const GROUP: i8 = 32;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_MEMBER_ID: i16 = 25;
/// Kafka's ConfigSource codes.
const GROUP_CONFIG: i8 = 8;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// Bounds low enough for short timeouts, and a broker default for the session timeout, so the
/// synonyms show a static broker setting.
const OVERRIDES: &[(&str, &str)] = &[
    ("group.consumer.assignment.interval.ms", "0"),
    ("group.consumer.min.session.timeout.ms", "6000"),
    ("group.consumer.session.timeout.ms", "30000"),
    ("group.consumer.min.heartbeat.interval.ms", "1000"),
];

/// One IncrementalAlterConfigs operation: (name, operation, value).
type Op<'a> = (&'a str, i8, Option<&'a str>);

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// The group's configs that come from the group itself: (name, value).
async fn own_configs(client: &mut Client, group: &str) -> Vec<(String, String)> {
    let result = describe_configs(client, GROUP, group).await;
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let mut own: Vec<_> = result
        .configs
        .iter()
        .filter(|c| c.config_source == GROUP_CONFIG)
        .map(|c| (c.name.to_string(), c.value.as_ref().unwrap().to_string()))
        .collect();
    own.sort();
    own
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn set(
    client: &mut Client,
    group: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    incremental_alter_configs(client, GROUP, group, ops).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_group_id_describes_kafkas_group_configs_with_their_sources() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let result = describe_configs(&mut client, GROUP, "no-such-group").await;
    assert_eq!(result.error_code, 0);
    let names: Vec<&str> = result.configs.iter().map(|c| c.name.as_str()).collect();
    for name in [
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "consumer.assignment.interval.ms",
        "share.auto.offset.reset",
        "streams.num.standby.replicas",
        "errors.deadletterqueue.topic.name",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(
        !names.contains(&"consumer.assignor.offload.enable"),
        "internal configs are listed only when set"
    );
    let find = |name: &str| {
        result
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap()
    };
    let session = find("consumer.session.timeout.ms");
    assert_eq!(session.value.as_deref(), Some("30000"));
    assert_eq!(session.config_source, STATIC_BROKER_CONFIG);
    assert_eq!(session.config_type, 3, "INT");
    assert!(!session.read_only);
    let synonyms: Vec<(&str, Option<&str>, i8)> = session
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
        .collect();
    assert_eq!(
        synonyms,
        [
            (
                "group.consumer.session.timeout.ms",
                Some("30000"),
                STATIC_BROKER_CONFIG
            ),
            (
                "group.consumer.session.timeout.ms",
                Some("45000"),
                DEFAULT_CONFIG
            ),
        ]
    );
    let heartbeat = find("consumer.heartbeat.interval.ms");
    assert_eq!(
        (heartbeat.value.as_deref(), heartbeat.config_source),
        (Some("5000"), DEFAULT_CONFIG)
    );

    // A value set on the group comes first, then the broker's.
    assert_eq!(
        set(
            &mut client,
            "g",
            &[("consumer.session.timeout.ms", SET, Some("20000"))]
        )
        .await,
        (0, None)
    );
    let result = describe_configs(&mut client, GROUP, "g").await;
    let session = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "consumer.session.timeout.ms")
        .unwrap();
    assert_eq!(
        (session.value.as_deref(), session.config_source),
        (Some("20000"), GROUP_CONFIG)
    );
    assert_eq!(
        session.synonyms[0].name.as_str(),
        "consumer.session.timeout.ms"
    );
    assert_eq!(session.synonyms.len(), 3);

    // The empty name is no group.
    let result = describe_configs(&mut client, GROUP, "").await;
    assert_eq!(result.error_code, INVALID_REQUEST);
    assert_eq!(
        result.error_message.as_deref(),
        Some("Group name must not be empty")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_changes_get_kafkas_codes_and_messages_and_change_nothing() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let ok = set(
        &mut client,
        "g",
        &[("consumer.heartbeat.interval.ms", SET, Some("2000"))],
    )
    .await;
    assert_eq!(ok, (0, None));
    let refusals: &[(&[Op], i16, &str)] = &[
        (&[("consumer.session.timeout.ms", SET, Some("5000"))], INVALID_CONFIG,
         "consumer.session.timeout.ms must be in the range 6000 to 60000 inclusive."),
        (&[("consumer.heartbeat.interval.ms", SET, Some("20000"))], INVALID_CONFIG,
         "consumer.heartbeat.interval.ms must be in the range 1000 to 15000 inclusive."),
        (&[("consumer.session.timeout.ms", SET, Some("abc"))], INVALID_CONFIG,
         "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        (&[("consumer.session.timeout.ms", SET, Some("0"))], INVALID_CONFIG,
         "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
        (&[("consumer.session.timeout.ms", SET, Some("7000")), ("consumer.heartbeat.interval.ms", SET, Some("7000"))],
         INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
        (&[("no.such.config", SET, Some("1"))], INVALID_CONFIG, "Unknown group config name: no.such.config"),
        (&[("share.isolation.level", SET, Some("READ_COMMITTED"))], INVALID_CONFIG,
         "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
        (&[("streams.rack.aware.assignment.tags", 2, Some("a"))], INVALID_CONFIG,
         "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST."),
        (&[("consumer.session.timeout.ms", SET, None)], INVALID_REQUEST,
         "Null value not supported for : consumer.session.timeout.ms"),
        (&[("consumer.session.timeout.ms", SET, Some("7000")), ("consumer.session.timeout.ms", SET, Some("8000"))],
         INVALID_REQUEST, "Error due to duplicate config keys"),
    ];
    for (ops, code, message) in refusals {
        let answer = set(&mut client, "g", ops).await;
        assert_eq!(answer, (*code, Some(message.to_string())), "{ops:?}");
    }
    let answer = set(
        &mut client,
        "",
        &[("consumer.session.timeout.ms", SET, Some("7000"))],
    )
    .await;
    assert_eq!(
        answer,
        (
            INVALID_REQUEST,
            Some("Default group resources are not allowed.".to_string())
        )
    );
    assert_eq!(
        own_configs(&mut client, "g").await,
        pairs(&[("consumer.heartbeat.interval.ms", "2000")]),
        "no refused change left anything behind"
    );

    // validate_only checks without storing.
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(true)
        .with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(s("g"))
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(s("consumer.session.timeout.ms"))
                        .with_config_operation(SET)
                        .with_value(Some(s("9000"))),
                ]),
        ]);
    let response: IncrementalAlterConfigsResponse = client
        .call(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        own_configs(&mut client, "g").await,
        pairs(&[("consumer.heartbeat.interval.ms", "2000")])
    );
    assert!(
        own_configs(&mut client, "other").await.is_empty(),
        "other groups unaffected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_alter_configs_replaces_the_whole_set_and_delete_removes_one() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let ops = [
        ("consumer.session.timeout.ms", SET, Some("20000")),
        ("share.auto.offset.reset", SET, Some("by_duration:PT1H")),
    ];
    assert_eq!(set(&mut client, "g", &ops).await, (0, None));
    assert_eq!(
        set(
            &mut client,
            "g",
            &[("share.auto.offset.reset", DELETE, None)]
        )
        .await,
        (0, None)
    );
    assert_eq!(
        own_configs(&mut client, "g").await,
        pairs(&[("consumer.session.timeout.ms", "20000")])
    );

    let request =
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(s("g"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s("consumer.heartbeat.interval.ms"))
                .with_value(Some(s("3000")))])]);
    let response: AlterConfigsResponse = client.call(ApiKey::AlterConfigs, 2, &request).await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        own_configs(&mut client, "g").await,
        pairs(&[("consumer.heartbeat.interval.ms", "3000")]),
        "AlterConfigs sets the whole set"
    );
}

async fn listed_groups(client: &mut Client) -> Vec<String> {
    let request = ListConfigResourcesRequest::default().with_resource_types(vec![GROUP]);
    let response: ListConfigResourcesResponse =
        client.call(ApiKey::ListConfigResources, 1, &request).await;
    assert_eq!(response.error_code, 0);
    response
        .config_resources
        .iter()
        .map(|r| r.resource_name.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_config_resources_lists_the_groups_that_have_configs() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    assert!(listed_groups(&mut client).await.is_empty());
    set(
        &mut client,
        "b",
        &[("consumer.session.timeout.ms", SET, Some("20000"))],
    )
    .await;
    set(
        &mut client,
        "a",
        &[("consumer.session.timeout.ms", SET, Some("20000"))],
    )
    .await;
    assert_eq!(listed_groups(&mut client).await, ["a", "b"]);
    set(
        &mut client,
        "a",
        &[("consumer.session.timeout.ms", DELETE, None)],
    )
    .await;
    assert_eq!(listed_groups(&mut client).await, ["b"]);

    // Every type: groups, the broker as broker logger and broker, every topic.
    let all: ListConfigResourcesResponse = client
        .call(
            ApiKey::ListConfigResources,
            1,
            &ListConfigResourcesRequest::default(),
        )
        .await;
    let listed: Vec<(i8, &str)> = all
        .config_resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.as_str()))
        .collect();
    assert_eq!(listed, [(GROUP, "b"), (8, "1"), (4, "1"), (2, "t")]);
    // Version 0 lists client-metrics subscriptions only, and a type Kafka cannot list is
    // UNSUPPORTED_VERSION (35).
    let v0: ListConfigResourcesResponse = client
        .call(
            ApiKey::ListConfigResources,
            0,
            &ListConfigResourcesRequest::default(),
        )
        .await;
    assert_eq!((v0.error_code, v0.config_resources.len()), (0, 0));
    let request = ListConfigResourcesRequest::default().with_resource_types(vec![99]);
    let bad: ListConfigResourcesResponse =
        client.call(ApiKey::ListConfigResources, 1, &request).await;
    assert_eq!(bad.error_code, 35);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_applies_a_groups_session_timeout_and_heartbeat_interval() {
    let broker = TestBroker::start_with_manual_clock(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 2).await;
    let ops = [
        ("consumer.session.timeout.ms", SET, Some("8000")),
        ("consumer.heartbeat.interval.ms", SET, Some("2000")),
    ];
    assert_eq!(set(&mut client, "short", &ops).await, (0, None));
    let a = send(&mut client, &join("short", "a", &["t"])).await;
    let b = send(&mut client, &join("short", "b", &["t"])).await;
    let other = send(&mut client, &join("other", "x", &["t"])).await;
    assert_eq!((a.error_code, b.error_code, other.error_code), (0, 0, 0));
    assert_eq!(
        (a.heartbeat_interval_ms, b.heartbeat_interval_ms),
        (2000, 2000)
    );
    assert_eq!(
        other.heartbeat_interval_ms, 5000,
        "the broker's group.consumer.heartbeat.interval.ms"
    );

    // 8 s without a heartbeat fence A (the group's timeout, not the broker's 30 s); B keeps
    // beating, and the other group's member, silent as long, stays.
    broker.advance_clock_ms(5_000);
    let b = send(&mut client, &beat("short", "b", b.member_epoch, None)).await;
    assert_eq!(b.error_code, 0);
    broker.advance_clock_ms(3_001);
    let b = send(&mut client, &beat("short", "b", b.member_epoch, None)).await;
    assert_eq!(b.error_code, 0);
    let members = describe(&mut client, "short").await.members;
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].member_id.as_str(), "b");
    let a = send(&mut client, &beat("short", "a", a.member_epoch, None)).await;
    assert_eq!(a.error_code, UNKNOWN_MEMBER_ID);
    assert_eq!(describe(&mut client, "other").await.members.len(), 1);

    // A change applies from the next heartbeat; deleting it brings back the broker's value.
    set(
        &mut client,
        "short",
        &[("consumer.heartbeat.interval.ms", SET, Some("3000"))],
    )
    .await;
    let b = send(&mut client, &beat("short", "b", b.member_epoch, None)).await;
    assert_eq!(b.heartbeat_interval_ms, 3000);
    let ops = [
        ("consumer.heartbeat.interval.ms", DELETE, None),
        ("consumer.session.timeout.ms", DELETE, None),
    ];
    set(&mut client, "short", &ops).await;
    let b = send(&mut client, &beat("short", "b", b.member_epoch, None)).await;
    assert_eq!(b.heartbeat_interval_ms, 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_configs_survive_a_restart_and_are_clamped_to_narrowed_bounds() {
    let mut broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let odd = "a group = with spaces\nand a line break";
    let ops = [
        ("consumer.session.timeout.ms", SET, Some("20000")),
        ("consumer.heartbeat.interval.ms", SET, Some("4000")),
    ];
    assert_eq!(set(&mut client, odd, &ops).await, (0, None));
    drop(client);

    // The broker comes back with a narrower heartbeat range: the stored value stays as set,
    // and the value in force is capped to the new maximum, as Kafka's GroupConfig.evaluate does.
    broker.shutdown().await;
    for (key, value) in [
        ("group.consumer.max.heartbeat.interval.ms", "3000"),
        ("group.consumer.heartbeat.interval.ms", "2000"),
    ] {
        broker.overrides.push((key.into(), value.into()));
    }
    broker.start_again().await;
    let mut client = broker.client().await;
    assert_eq!(
        own_configs(&mut client, odd).await,
        pairs(&[
            ("consumer.heartbeat.interval.ms", "4000"),
            ("consumer.session.timeout.ms", "20000"),
        ])
    );
    let joined = send(&mut client, &join(odd, "m", &["t"])).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.heartbeat_interval_ms, 3000);
    assert_eq!(listed_groups(&mut client).await, [odd]);
}
