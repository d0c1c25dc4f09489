//! Online migration between the classic and the consumer group protocols over real sockets, as
//! `group.consumer.migration.policy` allows: a classic group becomes a consumer group when a
//! consumer-protocol member joins it, its classic members carry on with JoinGroup, SyncGroup
//! and Heartbeat inside it, and it turns back into a classic group when its last
//! consumer-protocol member leaves; the records Kafka writes at each conversion, both
//! conversions across kill -9, the policy's refusals, and the timers of classic members.

mod common;

use common::classic::{self as cl, Owned};
use common::consumer::{assigned, beat, describe, join as consumer_join, send, topic_id};
use common::data::create_topic;
use common::{Client, TestBroker};
use kafka_protocol::messages::*;

/// Embedded protocol bytes that are not what they claim are decoded by kafka-protocol, which
/// sizes arrays from the bytes: the broker's allocator guard keeps that from aborting.
#[global_allocator]
static ALLOCATOR: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const OVERRIDES: &[(&str, &str)] = &[
    ("group.consumer.assignment.interval.ms", "0"),
    ("group.initial.rebalance.delay.ms", "2000"),
    ("log.index.size.max.bytes", "4096"),
];

fn t(partitions: &[i32]) -> Owned {
    match partitions {
        [] => Vec::new(),
        ps => vec![("t".to_string(), ps.to_vec())],
    }
}

/// A classic group of A and B at generation 1, A owning partitions 0-1 and B 2-3.
async fn classic_pair(a: &mut Client, b: &mut Client, group: &str) -> (String, String) {
    classic_pair_with(a, b, group, 30_000).await
}

/// The same, the members' rebalance timeout `rebalance_timeout_ms`.
async fn classic_pair_with(
    a: &mut Client,
    b: &mut Client,
    group: &str,
    rebalance_timeout_ms: i32,
) -> (String, String) {
    let none = Vec::new();
    let request = |member: &str| {
        cl::join_request(group, member, &["t"], &none)
            .with_rebalance_timeout_ms(rebalance_timeout_ms)
    };
    let first_a = cl::join(a, &request("")).await;
    let first_b = cl::join(b, &request("")).await;
    assert_eq!((first_a.error_code, first_b.error_code), (79, 79));
    let (a_id, b_id) = (first_a.member_id.to_string(), first_b.member_id.to_string());
    let (ra, rb) = (request(&a_id), request(&b_id));
    let (ja, jb) = tokio::join!(cl::join(a, &ra), cl::join(b, &rb));
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    assert_eq!((ja.generation_id, jb.generation_id), (1, 1));
    let plan = [(a_id.clone(), t(&[0, 1])), (b_id.clone(), t(&[2, 3]))];
    let a_leads = ja.leader.as_str() == a_id;
    let (for_a, for_b) = if a_leads {
        (&plan[..], &[][..])
    } else {
        (&[][..], &plan[..])
    };
    let (sa, sb) = tokio::join!(
        cl::sync(a, group, &ja, for_a),
        cl::sync(b, group, &jb, for_b)
    );
    assert_eq!(cl::decode_assignment(sa.assignment), t(&[0, 1]));
    assert_eq!(cl::decode_assignment(sb.assignment), t(&[2, 3]));
    (a_id, b_id)
}

/// Rejoins a classic member until it is settled, as a cooperative consumer does: it reports
/// what it owns, keeps what SyncGroup hands it, and rejoins while told to. Its generation and
/// partitions.
async fn settle_classic(
    client: &mut Client,
    group: &str,
    member_id: &str,
    mut owned: Owned,
) -> (i32, Owned) {
    for _ in 0..6 {
        let request = cl::join_request(group, member_id, &["t"], &owned);
        let joined = cl::join(client, &request).await;
        assert_eq!(joined.error_code, 0);
        assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(joined.protocol_name.as_deref(), Some("range"));
        assert!(
            joined.leader.is_empty() && joined.members.is_empty(),
            "the broker assigns"
        );
        let synced = cl::sync(client, group, &joined, &[]).await;
        if synced.error_code == 27 {
            continue;
        }
        assert_eq!(synced.error_code, 0);
        assert_eq!(synced.protocol_name.as_deref(), Some("range"));
        owned = cl::decode_assignment(synced.assignment);
        if cl::heartbeat(client, group, member_id, joined.generation_id).await == 0 {
            return (joined.generation_id, owned);
        }
    }
    panic!("{member_id} did not settle");
}

fn partitions(owned: &[&Owned]) -> Vec<i32> {
    let mut all: Vec<i32> = owned
        .iter()
        .flat_map(|o| o.iter().flat_map(|(_, ps)| ps.clone()))
        .collect();
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_group_is_upgraded_online_and_downgraded_when_its_consumer_member_leaves() {
    let mut broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 4).await;
    let (mut ca, mut cb) = (broker.client().await, broker.client().await);
    let (a, b) = classic_pair(&mut ca, &mut cb, "g").await;

    // C joins with the consumer protocol: the group becomes a consumer group at epoch 1 (the
    // generation), and C's join moves it to 2. A and B still own everything, so C waits.
    let c = send(&mut client, &consumer_join("g", "c", &["t"])).await;
    assert_eq!(c.error_code, 0, "{:?}", c.error_message);
    assert_eq!((c.member_epoch, assigned(&c)), (2, Some(vec![])));
    let d = describe(&mut client, "g").await;
    assert_eq!((d.error_code, d.group_epoch, d.assignment_epoch), (0, 2, 2));
    assert_eq!(d.group_state.as_str(), "Reconciling");
    let kinds: Vec<(String, i32, i8)> = d
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_epoch, m.member_type))
        .collect();
    assert!(
        kinds.contains(&(a.clone(), 1, 0))
            && kinds.contains(&(b.clone(), 1, 0))
            && kinds.contains(&("c".into(), 2, 1)),
        "{kinds:?}"
    );
    let a_now = d
        .members
        .iter()
        .find(|m| m.member_id.as_str() == a)
        .unwrap();
    assert_eq!(
        a_now.assignment.topic_partitions[0].partitions,
        vec![0, 1],
        "A keeps its classic assignment"
    );

    // One batch: the group-metadata tombstone, the new group's records, then C's.
    let batches = cl::stored_batches(&mut client, "g").await;
    let upgrade = batches
        .iter()
        .find(|b| b.first() == Some(&(2, true)))
        .expect("the upgrade's batch");
    let kept = [
        (2, true),
        (5, false),
        (5, false),
        (3, false),
        (7, false),
        (7, false),
        (6, false),
        (8, false),
        (8, false),
    ];
    assert_eq!(&upgrade[..9], &kept, "{upgrade:?}");
    assert!(
        upgrade[9..].contains(&(5, false)) && upgrade[9..].contains(&(3, false)),
        "{upgrade:?}"
    );

    // The classic members are told to rejoin, and reconcile through JoinGroup and SyncGroup.
    assert_eq!(cl::heartbeat(&mut ca, "g", &a, 1).await, 27);
    assert_eq!(
        cl::heartbeat(&mut ca, "g", &a, 7).await,
        22,
        "ILLEGAL_GENERATION"
    );
    let (ga, owned_a) = settle_classic(&mut ca, "g", &a, t(&[0, 1])).await;
    let (gb, owned_b) = settle_classic(&mut cb, "g", &b, t(&[2, 3])).await;
    assert_eq!((ga, gb), (2, 2));
    let c = send(&mut client, &beat("g", "c", 2, Some(&[]))).await;
    let tid = topic_id(&mut client, "t").await;
    let owned_c: Owned = assigned(&c)
        .expect("C is given what they released")
        .into_iter()
        .map(|(id, ps)| {
            assert_eq!(id, tid);
            ("t".to_string(), ps)
        })
        .collect();
    assert_eq!(
        partitions(&[&owned_a, &owned_b, &owned_c]),
        vec![0, 1, 2, 3],
        "disjoint and complete"
    );
    assert!([&owned_a, &owned_b, &owned_c].iter().all(|o| !o.is_empty()));
    assert_eq!(
        describe(&mut client, "g").await.group_state.as_str(),
        "Stable"
    );

    // After kill -9 the consumer group is back with its classic members.
    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    let (mut ca, mut cb) = (broker.client().await, broker.client().await);
    let d = describe(&mut client, "g").await;
    assert_eq!((d.group_epoch, d.members.len()), (2, 3));
    assert_eq!(cl::heartbeat(&mut ca, "g", &a, 2).await, 0);

    // B leaves with LeaveGroup; C (consumer protocol) is still there, so nothing converts.
    assert_eq!(cl::leave(&mut cb, "g", &[&b]).await, (0, vec![0]));
    assert_eq!(describe(&mut client, "g").await.group_epoch, 3);
    // C leaves: only classic A is left, so the group turns back into a classic group at
    // generation 3, which rebalances.
    let left = send(&mut client, &beat("g", "c", -1, None)).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    assert_eq!(describe(&mut client, "g").await.error_code, 69);
    let classic = common::groups::describe(&mut client, "g").await;
    assert_eq!(
        (classic.group_state.as_str(), classic.protocol_type.as_str()),
        ("PreparingRebalance", "consumer")
    );
    assert_eq!(
        classic
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect::<Vec<_>>(),
        vec![a.clone()]
    );
    let batches = cl::stored_batches(&mut client, "g").await;
    let downgrade = batches.last().unwrap();
    let tombstones = [
        (8, true),
        (8, true),
        (7, true),
        (7, true),
        (6, true),
        (5, true),
        (5, true),
        (4, true),
        (3, true),
        (2, false),
    ];
    assert_eq!(
        &downgrade[..],
        &tombstones,
        "every consumer-group record tombstoned, then the classic group's"
    );

    // A rejoins the classic group and leads generation 4.
    assert_eq!(
        cl::heartbeat(&mut ca, "g", &a, 2).await,
        22,
        "the classic generation is 3"
    );
    let joined = cl::join(&mut ca, &cl::join_request("g", &a, &["t"], &owned_a)).await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 4));
    assert_eq!(joined.leader.as_str(), a);
    let all = vec![(a.clone(), t(&[0, 1, 2, 3]))];
    let synced = cl::sync(&mut ca, "g", &joined, &all).await;
    assert_eq!(cl::decode_assignment(synced.assignment), t(&[0, 1, 2, 3]));
    broker.restart_after_crash().await;
    let mut ca = broker.client().await;
    assert_eq!(
        cl::heartbeat(&mut ca, "g", &a, 4).await,
        0,
        "the classic group came back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_member_joins_a_consumer_group_and_gets_released_partitions() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 4).await;
    let tid = topic_id(&mut client, "t").await;
    let c = send(&mut client, &consumer_join("h", "c", &["t"])).await;
    let all = assigned(&c).unwrap();
    assert_eq!(all, vec![(tid, vec![0, 1, 2, 3])]);

    let mut cd = broker.client().await;
    let none = Vec::new();
    let first = cl::join(&mut cd, &cl::join_request("h", "", &["t"], &none)).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let d = first.member_id.to_string();
    assert!(
        uuid::Uuid::parse_str(&d).is_ok(),
        "a consumer group names members with a UUID: {d}"
    );
    let joined = cl::join(&mut cd, &cl::join_request("h", &d, &["t"], &none)).await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 3));
    let synced = cl::sync(&mut cd, "h", &joined, &[]).await;
    assert_eq!(
        (
            synced.error_code,
            cl::decode_assignment(synced.assignment.clone())
        ),
        (0, vec![])
    );
    // D waits for partitions C still owns: its heartbeats are fine until C releases them.
    assert_eq!(cl::heartbeat(&mut cd, "h", &d, 3).await, 0);
    let c = send(&mut client, &beat("h", "c", 2, Some(&all))).await;
    let kept = assigned(&c).unwrap();
    let c = send(&mut client, &beat("h", "c", 2, Some(&kept))).await;
    assert_eq!(c.member_epoch, 3);
    // Released: D is told to rejoin, and gets them.
    assert_eq!(cl::heartbeat(&mut cd, "h", &d, 3).await, 27);
    let (generation, owned_d) = settle_classic(&mut cd, "h", &d, Vec::new()).await;
    assert_eq!(generation, 3);
    let owned_c: Owned = kept
        .into_iter()
        .map(|(_, ps)| ("t".to_string(), ps))
        .collect();
    assert_eq!(partitions(&[&owned_c, &owned_d]), vec![0, 1, 2, 3]);
    // A consumer-protocol member cannot use the classic APIs.
    assert_eq!(
        cl::heartbeat(&mut cd, "h", "c", 3).await,
        25,
        "UNKNOWN_MEMBER_ID"
    );
    // C's session ends with a leave: D alone makes the group classic again.
    send(&mut client, &beat("h", "c", -1, None)).await;
    let classic = common::groups::describe(&mut client, "h").await;
    assert_eq!(classic.group_state.as_str(), "PreparingRebalance");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_policy_and_the_embedded_protocol_decide_what_converts() {
    let broker = TestBroker::start(&[
        ("group.consumer.migration.policy", "disabled"),
        ("group.initial.rebalance.delay.ms", "0"),
    ])
    .await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 2).await;
    common::groups::form_group(&mut client, "classic").await;
    let refused = send(&mut client, &consumer_join("classic", "c", &["t"])).await;
    assert_eq!(refused.error_code, 69, "GROUP_ID_NOT_FOUND");
    assert_eq!(refused.error_message.as_deref(), Some("Cannot upgrade classic group classic to consumer group because online upgrade is disabled."));
    assert_eq!(
        send(&mut client, &consumer_join("modern", "m", &["t"]))
            .await
            .error_code,
        0
    );
    let join = common::groups::join_request("modern", "");
    let refused: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &join).await;
    assert_eq!(refused.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");

    // Upgrades need the embedded consumer protocol, well formed.
    let broker = TestBroker::start(&[("group.initial.rebalance.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 2).await;
    // `form_group`'s leader hands out b"assignment", which is no consumer-protocol assignment.
    let (member, generation) = common::groups::form_group(&mut client, "opaque").await;
    let refused = send(&mut client, &consumer_join("opaque", "c", &["t"])).await;
    assert_eq!(refused.error_code, 69);
    assert!(
        refused
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("malformed")),
        "{:?}",
        refused.error_message
    );
    assert_eq!(
        common::groups::heartbeat(&mut client, "opaque", &member, generation).await,
        0,
        "still a classic group"
    );
    let connect = common::groups::join_request("workers", "")
        .with_protocol_type(common::consumer::s("connect"));
    let first: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &connect).await;
    let connect = connect.with_member_id(first.member_id);
    let _: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &connect).await;
    let refused = send(&mut client, &consumer_join("workers", "c", &["t"])).await;
    assert!(
        refused.error_message.as_deref().is_some_and(
            |m| m.ends_with("because the group does not use the consumer embedded protocol.")
        ),
        "{:?}",
        refused.error_message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_upgrade_policy_a_consumer_group_keeps_its_classic_members() {
    let overrides = [OVERRIDES, &[("group.consumer.migration.policy", "upgrade")]].concat();
    let broker = TestBroker::start(&overrides).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 4).await;
    let (mut ca, mut cb) = (broker.client().await, broker.client().await);
    let (a, _) = classic_pair(&mut ca, &mut cb, "g").await;
    assert_eq!(
        send(&mut client, &consumer_join("g", "c", &["t"]))
            .await
            .error_code,
        0
    );
    send(&mut client, &beat("g", "c", -1, None)).await;
    let d = describe(&mut client, "g").await;
    assert_eq!(d.error_code, 0, "no downgrade");
    assert!(d.members.iter().all(|m| m.member_type == 0) && d.members.len() == 2);
    assert_eq!(
        cl::heartbeat(&mut ca, "g", &a, 1).await,
        27,
        "the group epoch moved on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced() {
    let broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 4).await;
    let (mut ca, mut cb) = (broker.client().await, broker.client().await);
    let (a, b) = classic_pair_with(&mut ca, &mut cb, "g", 3_000).await;
    assert_eq!(
        send(&mut client, &consumer_join("g", "c", &["t"]))
            .await
            .error_code,
        0
    );
    // A is told to rejoin and does not within its rebalance timeout (3 s: long enough for the
    // pair to form on a loaded machine); B rejoins but never syncs within the rebalance timeout
    // of its JoinGroup.
    assert_eq!(cl::heartbeat(&mut ca, "g", &a, 1).await, 27);
    let rejoin = cl::join_request("g", &b, &["t"], &t(&[2, 3])).with_rebalance_timeout_ms(3_000);
    assert_eq!(cl::join(&mut cb, &rejoin).await.error_code, 0);
    tokio::time::sleep(std::time::Duration::from_millis(4_500)).await;
    let d = describe(&mut client, "g").await;
    let left: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(left, vec!["c"], "A and B were fenced");
    let c = send(
        &mut client,
        &beat("g", "c", d.members[0].member_epoch, Some(&[])),
    )
    .await;
    assert_eq!(assigned(&c).map(|a| a[0].1.len()), Some(4));
}
