//! Unit tests of the consumer-group pieces that need no broker: the assignors (balance,
//! stickiness, Kafka's range order), one reconciliation step, and the records' round trip.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::assignor::{assign, GroupSpec, MemberSpec};
use super::member::{ConsumerMember, MemberAssignment, MemberMetadata, MemberState, PartitionSet};
use super::reconcile::Reconcile;
use super::records;
use super::ResolvedRegex;

fn spec(members: &[(&str, Option<&str>, PartitionSet)], topics: &[(Uuid, i32)]) -> GroupSpec {
    let ids: BTreeSet<Uuid> = topics.iter().map(|(t, _)| *t).collect();
    GroupSpec {
        members: members
            .iter()
            .map(|(id, instance, current)| {
                let member = MemberSpec {
                    instance_id: instance.map(str::to_string),
                    topics: ids.clone(),
                    current: current.clone(),
                };
                (id.to_string(), member)
            })
            .collect(),
        homogeneous: true,
        partition_counts: topics.iter().copied().collect(),
    }
}

fn count(assignment: &BTreeMap<String, PartitionSet>) -> Vec<usize> {
    assignment
        .values()
        .map(|a| a.values().map(BTreeSet::len).sum())
        .collect()
}

#[test]
fn uniform_balances_and_keeps_what_members_hold() {
    let t = Uuid::new_v4();
    let first = assign(
        "uniform",
        &spec(&[("a", None, PartitionSet::new())], &[(t, 7)]),
    );
    assert_eq!(count(&first), vec![7]);
    let held = first["a"].clone();
    let second = assign(
        "uniform",
        &spec(
            &[("a", None, held.clone()), ("b", None, PartitionSet::new())],
            &[(t, 7)],
        ),
    );
    let mut sizes = count(&second);
    sizes.sort();
    assert_eq!(sizes, vec![3, 4]);
    // a keeps a subset of what it held; nothing is owned twice.
    assert!(second["a"][&t].is_subset(&held[&t]));
    assert!(second["a"][&t].is_disjoint(&second["b"][&t]));
}

#[test]
fn range_gives_contiguous_ranges_static_members_first() {
    let (t, u) = (Uuid::new_v4(), Uuid::new_v4());
    let members = [
        ("a", None, PartitionSet::new()),
        ("z", Some("i0"), PartitionSet::new()),
    ];
    let result = assign("range", &spec(&members, &[(t, 5), (u, 5)]));
    // The static member sorts first and takes the extra partition of each topic.
    assert_eq!(result["z"][&t], (0..3).collect());
    assert_eq!(result["z"][&u], (0..3).collect());
    assert_eq!(result["a"][&t], (3..5).collect());
}

fn member(assigned: &[(Uuid, i32, i32)], epoch: i32) -> ConsumerMember {
    let mut m = ConsumerMember::new("m");
    m.assignment.member_epoch = epoch;
    for (t, p, e) in assigned {
        m.assignment.assigned.entry(*t).or_default().insert(*p, *e);
    }
    m
}

#[test]
fn a_member_revokes_before_it_is_given_more() {
    let t = Uuid::new_v4();
    let current = member(&[(t, 0, 3), (t, 1, 3)], 3);
    let target: PartitionSet = [(t, BTreeSet::from([1, 2]))].into();
    let ids = BTreeSet::from([t]);
    let epochs: HashMap<(Uuid, i32), i32> = HashMap::new();
    let owned = Some(vec![(t, vec![0, 1])]);
    let step = Reconcile {
        target_epoch: 4,
        target: &target,
        subscription_changed: false,
        subscribed_topic_ids: &ids,
        partition_epochs: &epochs,
        owned: &owned,
    };
    let next = step.next(&current).unwrap();
    assert_eq!(next.assignment.state, MemberState::UnrevokedPartitions);
    assert_eq!(next.epoch(), 3, "no new epoch while revoking");
    assert_eq!(
        next.assignment.assigned[&t]
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![1]
    );
    // Once the member stops reporting partition 0 it moves on and gets partition 2.
    let released = Some(vec![(t, vec![1])]);
    let step = Reconcile {
        owned: &released,
        ..step
    };
    let done = step.next(&next).unwrap();
    assert_eq!(
        (done.assignment.state, done.epoch()),
        (MemberState::Stable, 4)
    );
    assert_eq!(
        done.assignment.assigned[&t],
        BTreeMap::from([(1, 3), (2, 4)])
    );
}

#[test]
fn records_round_trip() {
    let t = Uuid::new_v4();
    let metadata = MemberMetadata {
        instance_id: Some("i".into()),
        rack_id: None,
        client_id: "c".into(),
        client_host: "/h".into(),
        subscribed_topic_names: BTreeSet::from(["a".to_string(), "b".to_string()]),
        subscribed_topic_regex: String::new(),
        rebalance_timeout_ms: 300_000,
        server_assignor: Some("range".into()),
        classic: None,
    };
    let bytes = records::member_metadata_value(&metadata).unwrap();
    assert_eq!(records::decode_member_metadata(&bytes).unwrap(), metadata);
    let assignment = MemberAssignment {
        member_epoch: 5,
        previous_member_epoch: 4,
        state: MemberState::UnreleasedPartitions,
        assigned: [(t, BTreeMap::from([(0, 4), (3, 5)]))].into(),
        pending_revocation: BTreeMap::new(),
    };
    let bytes = records::current_assignment_value(&assignment).unwrap();
    assert_eq!(
        records::decode_current_assignment(&bytes).unwrap(),
        assignment
    );
    assert_eq!(
        records::decode_group_epoch(&records::group_epoch_value(7, -3)).unwrap(),
        (7, -3)
    );
    assert_eq!(
        records::decode_group_epoch(&records::group_epoch_value(7, 0)).unwrap(),
        (7, 0)
    );
    let resolved = ResolvedRegex {
        topics: BTreeSet::from(["x".to_string()]),
        version: 2,
        timestamp_ms: 9,
    };
    let bytes = records::regex_value(&resolved).unwrap();
    assert_eq!(records::decode_regex(&bytes).unwrap(), resolved);
    // Truncated or garbled values are errors, never panics.
    for cut in 0..bytes.len() {
        assert!(records::decode_regex(&bytes[..cut]).is_err());
    }
    let key = records::key(records::MEMBER_METADATA, "g", Some("m")).unwrap();
    let decoded = records::decode_key(&key).unwrap();
    assert_eq!(
        (decoded.group_id.as_str(), decoded.second.as_deref()),
        ("g", Some("m"))
    );
}
