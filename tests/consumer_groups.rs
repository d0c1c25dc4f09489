//! KIP-848 consumer groups over real sockets: members reconcile toward the broker's assignment
//! (revoke before assign, nothing given while another member still owns it), static members,
//! session timeouts, regular expressions that pick up topics created later, the member-epoch
//! checks on committed offsets, the group after a crash, and bad input answered with Kafka's
//! codes while other groups carry on.

mod common;

use common::consumer::{assigned, beat, describe, join, s, send, topic_id};
use common::data::create_topic;
use common::TestBroker;
use kafka_protocol::messages::*;

/// Target assignments at once (Kafka waits `group.consumer.assignment.interval.ms` between
/// two), and small indexes so a crash copy of the data directory is quick.
const OVERRIDES: &[(&str, &str)] = &[
    ("group.consumer.assignment.interval.ms", "0"),
    ("log.index.size.max.bytes", "4096"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_revoke_before_others_are_assigned() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 4).await;
    let t = topic_id(&mut client, "t").await;

    let a = send(&mut client, &join("g", "a", &["t"])).await;
    assert_eq!(a.error_code, 0, "{:?}", a.error_message);
    assert_eq!(a.member_epoch, 2, "Kafka 4.4 starts a group at epoch 1");
    assert_eq!(assigned(&a), Some(vec![(t, vec![0, 1, 2, 3])]));
    assert!(a.heartbeat_interval_ms > 0);

    // B joins: the group moves to epoch 3, but A still owns everything, so B waits.
    let b = send(&mut client, &join("g", "b", &["t"])).await;
    assert_eq!(b.member_epoch, 3);
    assert_eq!(assigned(&b), Some(vec![]));
    assert_eq!(
        describe(&mut client, "g").await.group_state.as_str(),
        "Reconciling"
    );

    // A must give up two partitions first: it keeps the rest, at its epoch.
    let all = [(t, vec![0, 1, 2, 3])];
    let a = send(&mut client, &beat("g", "a", 2, Some(&all))).await;
    assert_eq!(a.member_epoch, 2);
    let kept = assigned(&a).expect("A's assignment changed");
    assert_eq!(kept[0].1.len(), 2);
    let b = send(&mut client, &beat("g", "b", 3, Some(&[]))).await;
    assert_eq!(b.member_epoch, 3);
    assert_eq!(assigned(&b), None, "nothing changed for B yet");

    // A reports it released them: it moves to epoch 3, and B gets the other two.
    let a = send(&mut client, &beat("g", "a", 2, Some(&kept))).await;
    assert_eq!(a.member_epoch, 3);
    let b = send(&mut client, &beat("g", "b", 3, Some(&[]))).await;
    let given = assigned(&b).expect("B is given partitions");
    let mut union: Vec<i32> = kept[0].1.iter().chain(given[0].1.iter()).copied().collect();
    union.sort();
    assert_eq!(union, vec![0, 1, 2, 3], "disjoint and complete");

    let described = describe(&mut client, "g").await;
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!((described.group_epoch, described.assignment_epoch), (3, 3));
    assert_eq!(described.assignor_name.as_str(), "uniform");
    assert!(described
        .members
        .iter()
        .all(|m| m.member_epoch == 3 && m.member_type == 1));

    // A leaves: B is given everything once it heartbeats.
    let left = send(&mut client, &beat("g", "a", -1, None)).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let b = send(&mut client, &beat("g", "b", 3, Some(&given))).await;
    assert_eq!(b.member_epoch, 4);
    assert_eq!(assigned(&b), Some(vec![(t, vec![0, 1, 2, 3])]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_kafkas_codes_and_other_groups_carry_on() {
    let broker = TestBroker::start(&[
        ("group.consumer.assignment.interval.ms", "0"),
        ("group.consumer.max.size", "2"),
    ])
    .await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 2).await;
    let ok = send(&mut client, &join("healthy", "h", &["t"])).await;
    assert_eq!(ok.error_code, 0);

    let code = |r: &ConsumerGroupHeartbeatResponse| r.error_code;
    // INVALID_REQUEST (42), decided before the group is looked at.
    let no_member = send(&mut client, &join("g", "", &["t"])).await;
    assert_eq!(code(&no_member), 42);
    assert_eq!(
        no_member.error_message.as_deref(),
        Some("MemberId can't be empty.")
    );
    let no_timeout = join("g", "m", &["t"]).with_rebalance_timeout_ms(-1);
    assert_eq!(code(&send(&mut client, &no_timeout).await), 42);
    let owns_on_join = join("g", "m", &["t"]).with_topic_partitions(Some(vec![
        consumer_group_heartbeat_request::TopicPartitions::default().with_partitions(vec![0]),
    ]));
    assert_eq!(code(&send(&mut client, &owns_on_join).await), 42);
    let no_subscription = join("g", "m", &["t"]).with_subscribed_topic_names(None);
    assert_eq!(code(&send(&mut client, &no_subscription).await), 42);
    assert_eq!(
        code(&send(&mut client, &beat("g", "m", -3, None)).await),
        42
    );
    // UNSUPPORTED_ASSIGNOR (112) and INVALID_REGULAR_EXPRESSION (128).
    let assignor = join("g", "m", &["t"]).with_server_assignor(Some(s("sticky")));
    let refused = send(&mut client, &assignor).await;
    assert_eq!(code(&refused), 112);
    assert!(refused
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("uniform, range")));
    let regex = join("g", "m", &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("t(")));
    assert_eq!(code(&send(&mut client, &regex).await), 128);
    let lookbehind = regex_join("g", "m", "(?<=x)t");
    assert_eq!(code(&send(&mut client, &lookbehind).await), 128);
    // GROUP_ID_NOT_FOUND (69) for a heartbeat to a group that does not exist.
    assert_eq!(
        code(&send(&mut client, &beat("nope", "m", 5, None)).await),
        69
    );

    let joined = send(&mut client, &join("g", "m", &["t"])).await;
    assert_eq!(joined.error_code, 0);
    let epoch = joined.member_epoch;
    // UNKNOWN_MEMBER_ID (25), FENCED_MEMBER_EPOCH (110) for a future epoch and for an old one.
    assert_eq!(
        code(&send(&mut client, &beat("g", "other", epoch, None)).await),
        25
    );
    assert_eq!(
        code(&send(&mut client, &beat("g", "m", epoch + 1, None)).await),
        110
    );
    assert_eq!(
        code(&send(&mut client, &beat("g", "m", epoch - 1, Some(&[]))).await),
        110
    );
    // GROUP_MAX_SIZE_REACHED (81) for a third member.
    assert_eq!(
        send(&mut client, &join("g", "m2", &["t"])).await.error_code,
        0
    );
    assert_eq!(code(&send(&mut client, &join("g", "m3", &["t"])).await), 81);

    // The other group never noticed.
    let still = send(&mut client, &beat("healthy", "h", ok.member_epoch, None)).await;
    assert_eq!((still.error_code, still.member_epoch), (0, ok.member_epoch));
    // A rejoin at epoch 0 after being fenced is accepted (KAFKA-19233).
    assert_eq!(
        send(&mut client, &join("g", "m", &["t"])).await.error_code,
        0
    );
}

fn regex_join(group: &str, member: &str, pattern: &str) -> ConsumerGroupHeartbeatRequest {
    join(group, member, &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s(pattern)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regular_expression_picks_up_topics_created_later() {
    let broker = TestBroker::start_with_manual_clock(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "rx-a", 1).await;
    create_topic(&mut client, "other", 1).await;
    let a = topic_id(&mut client, "rx-a").await;
    let joined = send(&mut client, &regex_join("g", "m", "rx-.*")).await;
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(
        assigned(&joined),
        Some(vec![(a, vec![0])]),
        "whole names only"
    );

    create_topic(&mut client, "rx-b", 2).await;
    let b = topic_id(&mut client, "rx-b").await;
    // Kafka resolves a group's expressions again at most every 10 s.
    broker.advance_clock_ms(10_001);
    let owned = [(a, vec![0])];
    let next = send(
        &mut client,
        &beat("g", "m", joined.member_epoch, Some(&owned)),
    )
    .await;
    assert_eq!(next.error_code, 0);
    let mut expected = vec![(a, vec![0]), (b, vec![0, 1])];
    expected.sort();
    assert_eq!(assigned(&next), Some(expected));
    assert_eq!(next.member_epoch, joined.member_epoch + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_members_come_back_without_a_rebalance() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 2).await;
    let t = topic_id(&mut client, "t").await;
    let first = join("g", "m1", &["t"]).with_instance_id(Some(s("i1")));
    let joined = send(&mut client, &first).await;
    assert_eq!(joined.error_code, 0);
    let epoch = describe(&mut client, "g").await.group_epoch;

    // The instance id is still in use: UNRELEASED_INSTANCE_ID (111).
    let second = join("g", "m2", &["t"]).with_instance_id(Some(s("i1")));
    assert_eq!(send(&mut client, &second).await.error_code, 111);
    // A temporary leave (-2) keeps its place; the new member id takes it over at once.
    let leave = beat("g", "m1", -2, None).with_instance_id(Some(s("i1")));
    let left = send(&mut client, &leave).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -2));
    let back = send(&mut client, &second).await;
    assert_eq!(back.error_code, 0);
    assert_eq!(assigned(&back), Some(vec![(t, vec![0, 1])]));
    let described = describe(&mut client, "g").await;
    assert_eq!(described.group_epoch, epoch, "no rebalance");
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id.as_str(), "m2");
    // The old member id is fenced: FENCED_INSTANCE_ID (82).
    let stale = beat("g", "m1", joined.member_epoch, None).with_instance_id(Some(s("i1")));
    assert_eq!(send(&mut client, &stale).await.error_code, 82);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_session_expires_is_fenced() {
    let broker = TestBroker::start_with_manual_clock(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 2).await;
    let a = send(&mut client, &join("g", "a", &["t"])).await;
    let b = send(&mut client, &join("g", "b", &["t"])).await;
    assert_eq!((a.error_code, b.error_code), (0, 0));
    broker.advance_clock_ms(30_000);
    let b = send(&mut client, &beat("g", "b", b.member_epoch, Some(&[]))).await;
    assert_eq!(b.error_code, 0);
    // A has not heartbeat for 45 s (group.consumer.session.timeout.ms): it is gone.
    broker.advance_clock_ms(15_001);
    let b = send(&mut client, &beat("g", "b", b.member_epoch, None)).await;
    assert_eq!(b.error_code, 0);
    let described = describe(&mut client, "g").await;
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id.as_str(), "b");
    assert_eq!(
        send(&mut client, &beat("g", "a", a.member_epoch, None))
            .await
            .error_code,
        25
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_and_fetches_check_member_epochs() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let joined = send(&mut client, &join("g", "m", &["t"])).await;
    let epoch = joined.member_epoch;
    let commit = |member: &str, epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(s(member))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(7),
                    ]),
            ])
    };
    let code = |r: OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(
        code(
            client
                .call(ApiKey::OffsetCommit, 9, &commit("m", epoch))
                .await
        ),
        0
    );
    assert_eq!(
        code(
            client
                .call(ApiKey::OffsetCommit, 9, &commit("m", epoch + 1))
                .await
        ),
        113
    );
    assert_eq!(
        code(
            client
                .call(ApiKey::OffsetCommit, 9, &commit("x", epoch))
                .await
        ),
        25
    );
    assert_eq!(
        code(
            client
                .call(ApiKey::OffsetCommit, 8, &commit("m", epoch))
                .await
        ),
        35
    );
    // An older epoch is accepted for a partition given at or before it (KIP-1251).
    assert_eq!(
        code(
            client
                .call(ApiKey::OffsetCommit, 9, &commit("m", epoch - 1))
                .await
        ),
        113
    );

    let fetch = |epoch: i32| {
        OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(Some(s("m")))
                .with_member_epoch(epoch)
                .with_topics(None),
        ])
    };
    let fetched: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 9, &fetch(epoch)).await;
    assert_eq!(fetched.groups[0].error_code, 0);
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_offset,
        7
    );
    let stale: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 9, &fetch(epoch + 1)).await;
    assert_eq!(stale.groups[0].error_code, 113);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_and_consumer_groups_coexist() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    common::groups::form_group(&mut client, "classic").await;
    assert_eq!(
        send(&mut client, &join("modern", "m", &["t"]))
            .await
            .error_code,
        0
    );

    let list = |types: &[&str]| {
        ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect())
    };
    let all: ListGroupsResponse = client.call(ApiKey::ListGroups, 5, &list(&[])).await;
    let kinds: Vec<(String, String, String)> = all
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.group_type.to_string(),
                g.protocol_type.to_string(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("classic".into(), "classic".into(), "consumer".into()),
            ("modern".into(), "consumer".into(), "consumer".into()),
        ]
    );
    let consumer_only: ListGroupsResponse = client
        .call(ApiKey::ListGroups, 5, &list(&["Consumer"]))
        .await;
    assert_eq!(consumer_only.groups.len(), 1);

    // Each describe API answers for its own kind; the other is GROUP_ID_NOT_FOUND.
    assert_eq!(describe(&mut client, "classic").await.error_code, 69);
    assert_eq!(describe(&mut client, "modern").await.error_code, 0);
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("modern"))]);
    let classic_view: DescribeGroupsResponse =
        client.call(ApiKey::DescribeGroups, 6, &request).await;
    assert_eq!(classic_view.groups[0].error_code, 69);
    assert_eq!(classic_view.groups[0].group_state.as_str(), "Dead");
    // A heartbeat to a classic group with members is not a consumer group's.
    assert_eq!(
        send(&mut client, &beat("classic", "x", 3, None))
            .await
            .error_code,
        69
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_come_back_at_their_epochs_after_a_crash() {
    let mut broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 4).await;
    let a = send(&mut client, &join("g", "a", &["t"])).await;
    let b = send(&mut client, &join("g", "b", &["t"])).await;
    let all = assigned(&a).unwrap();
    let a = send(&mut client, &beat("g", "a", a.member_epoch, Some(&all))).await;
    let before = describe(&mut client, "g").await;

    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    let after = describe(&mut client, "g").await;
    assert_eq!(after.error_code, 0);
    assert_eq!(
        (after.group_epoch, after.assignment_epoch),
        (before.group_epoch, before.assignment_epoch)
    );
    assert_eq!(after.group_state, before.group_state);
    for (x, y) in before.members.iter().zip(after.members.iter()) {
        assert_eq!(
            (&x.member_id, x.member_epoch),
            (&y.member_id, y.member_epoch)
        );
        assert_eq!(x.assignment, y.assignment);
        assert_eq!(x.target_assignment, y.target_assignment);
    }
    // The members carry on at their epochs: A still owes its revocation, B still waits.
    let kept = assigned(&a).unwrap();
    let a = send(&mut client, &beat("g", "a", a.member_epoch, Some(&kept))).await;
    assert_eq!(a.error_code, 0);
    let b = send(&mut client, &beat("g", "b", b.member_epoch, Some(&[]))).await;
    assert_eq!(b.error_code, 0);
    assert!(assigned(&b).is_some_and(|p| !p.is_empty()));
    assert_eq!(
        describe(&mut client, "g").await.group_state.as_str(),
        "Stable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_subscription_is_refused_and_stores_nothing() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    assert_eq!(
        send(&mut client, &join("healthy", "h", &["t"]))
            .await
            .error_code,
        0
    );
    // About 1.5 MB of topic names: the member's record cannot fit in __consumer_offsets'
    // max.message.bytes (1 MiB), so the join fails as on Kafka (UNKNOWN_SERVER_ERROR) and the
    // group is not created.
    let names: Vec<String> = (0..6_000).map(|i| format!("{i:0>240}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let huge = send(&mut client, &join("big", "m", &refs)).await;
    assert_eq!(huge.error_code, -1);
    assert_eq!(describe(&mut client, "big").await.error_code, 69);
    let fine = send(&mut client, &join("big", "m", &["t"])).await;
    assert_eq!(fine.error_code, 0);
    assert_eq!(
        send(&mut client, &beat("healthy", "h", 2, None))
            .await
            .error_code,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_join_takes_over_an_empty_consumer_group_only() {
    let broker = TestBroker::start(&[("group.initial.rebalance.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    assert_eq!(
        send(&mut client, &join("g", "m", &["t"])).await.error_code,
        0
    );
    // A classic member cannot join a consumer group that has members.
    let classic = common::groups::join_request("g", "");
    let refused: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &classic).await;
    assert_eq!(refused.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");
    // Once the group is empty, a classic group replaces it.
    assert_eq!(
        send(&mut client, &beat("g", "m", -1, None))
            .await
            .error_code,
        0
    );
    common::groups::form_group(&mut client, "g").await;
    assert_eq!(describe(&mut client, "g").await.error_code, 69);
}
