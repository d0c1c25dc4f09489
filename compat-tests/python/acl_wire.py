"""Raw-wire requests for test_security.py's differential table: the APIs no Python client sends
(KIP-848 ConsumerGroupHeartbeat and ConsumerGroupDescribe, DescribeTopicPartitions,
DescribeProducers, DescribeTransactions, OffsetDelete, DescribeGroups with authorized
operations, ElectLeaders), sent by a principal logged in with SASL/PLAIN. Each action returns a small
outcome (error codes, which topics or groups came back, the authorized-operations bits) that
the table compares, the same on Apache Kafka and sluice; names are given back as the keys of
`world` so that the expected values do not depend on the run's unique prefix.
"""
import time

from helpers import unique
from kafka_wire import Connection, random_uuid

NOT_REQUESTED = -2147483648  # KIP-430: authorized operations not asked for
TIMEOUT_S = 20


def login(broker, user, password):
    return Connection(broker.bootstrap).sasl_plain(user, password)


def key_of(world, name):
    """The `world` key of a topic or group name; else the name without the run's prefix."""
    for k, v in world.items():
        if v == name:
            return k
    return name.removeprefix(world["prefix"] + "-")


def topic_names(conn):
    md = conn.request("Metadata", 12, {"Topics": None, "AllowAutoTopicCreation": False})
    return {t["TopicId"]: t["Name"] for t in md["Topics"]}


class Member:
    """One KIP-848 consumer (ConsumerGroupHeartbeat v1) on its own connection."""

    def __init__(self, conn, group, names=None, regex=None):
        self.conn, self.group, self.member_id = conn, group, random_uuid()
        self.epoch, self.owned = 0, {}
        self.first = {"GroupId": group, "MemberId": self.member_id, "MemberEpoch": 0,
                      "RebalanceTimeoutMs": 30000, "SubscribedTopicNames": names,
                      "SubscribedTopicRegex": regex, "TopicPartitions": []}

    def join(self):
        """The first heartbeat. Kafka answers NOT_COORDINATOR (16) or
        COORDINATOR_LOAD_IN_PROGRESS (14) until __consumer_offsets exists and is loaded;
        FindCoordinator creates it."""
        self.conn.request("FindCoordinator", 4, {"KeyType": 0, "CoordinatorKeys": [self.group]})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            r = self.beat()
            if r["ErrorCode"] not in (14, 16) or time.monotonic() > deadline:
                return r
            time.sleep(0.5)

    def beat(self):
        body = self.first or {"GroupId": self.group, "MemberId": self.member_id,
                              "MemberEpoch": self.epoch,
                              "TopicPartitions": [{"TopicId": t, "Partitions": p}
                                                  for t, p in sorted(self.owned.items())]}
        r = self.conn.request("ConsumerGroupHeartbeat", 1, body)
        if r["ErrorCode"] == 0:
            self.first = None
            self.epoch = r["MemberEpoch"]
            if r["Assignment"] is not None:
                self.owned = {tp["TopicId"]: sorted(tp["Partitions"])
                              for tp in r["Assignment"]["TopicPartitions"]}
        return r

    def wait_assigned(self, count):
        """Heartbeats until `count` topics are owned (Kafka resolves a regular expression in
        the background, so the assignment may come on a later heartbeat) and two beats in a
        row change nothing; -> the error code of the last heartbeat."""
        deadline, steady = time.monotonic() + TIMEOUT_S, 0
        while time.monotonic() < deadline:
            before = dict(self.owned)
            r = self.beat()
            if r["ErrorCode"]:
                return r["ErrorCode"]
            steady = steady + 1 if self.owned == before and len(self.owned) >= count else 0
            if steady >= 2:
                return 0
            time.sleep(0.3)
        return 0

    def leave(self):
        self.conn.request("ConsumerGroupHeartbeat", 1, {"GroupId": self.group,
                                                         "MemberId": self.member_id,
                                                         "MemberEpoch": -1})


def heartbeat_unauthorized_group(world, login_as, _admin):
    with login_as() as c:
        return Member(c, world["prefix"] + "-other").join()["ErrorCode"]


def heartbeat_names_one_hidden(world, login_as, _admin):
    with login_as() as c:
        m = Member(c, world["gpfx"] + unique("n"), names=[world["read"], world["hidden"]])
        r = m.join()
        return r["ErrorCode"], r["MemberId"]


def heartbeat_regex_resolves_describable_topics(world, login_as, _admin):
    """The topics a regular expression over the run's prefix is assigned."""
    with login_as() as c:
        m = Member(c, world["gpfx"] + unique("rx"), regex=world["prefix"] + "-.*")
        error = m.join()["ErrorCode"] or m.wait_assigned(1)
        ids = topic_names(c)
        topics = sorted(key_of(world, ids[t]) for t in m.owned)
        m.leave()
        return error, topics


def consumer_group_describe(world, login_as, admin):
    """A group the caller may not describe, one whose member (the super user's) is assigned a
    topic the caller may not describe, and the caller's own: the first group answered (the
    refused one comes first), and each (group, error, operations, members) in name order
    (Kafka answers the others in the order of their __consumer_offsets partitions)."""
    shared, own, nope = world["spfx"] + unique("s"), world["gpfx"] + unique("d"), unique("nope")
    with admin() as a, login_as() as c:
        other = Member(a, shared, names=[world["read"], world["hidden"]])
        mine = Member(c, own, names=[world["read"]])
        for m, count in ((other, 2), (mine, 1)):
            assert m.join()["ErrorCode"] == 0
            assert m.wait_assigned(count) == 0
        r = c.request("ConsumerGroupDescribe", 1, {"GroupIds": [nope, shared, own],
                                                    "IncludeAuthorizedOperations": True})
        labels = {nope: "nope", shared: "shared", own: "own"}
        out = [(labels[g["GroupId"]], g["ErrorCode"], g["AuthorizedOperations"], len(g["Members"]))
               for g in r["Groups"]]
        other.leave()
        mine.leave()
        return out[0][0], sorted(out)


def describe_topic_partitions(topics):
    def action(world, login_as, _admin):
        with login_as() as c:
            names = [world.get(t, world["prefix"] + "-" + t) for t in topics]
            r = c.request("DescribeTopicPartitions", 0, {
                "Topics": [{"Name": n} for n in names], "ResponsePartitionLimit": 100})
            mine = [t for t in r["Topics"] if t["Name"].startswith(world["prefix"])]
            return sorted((key_of(world, t["Name"]), t["ErrorCode"], t["TopicAuthorizedOperations"])
                          for t in mine)
    action.__name__ = f"describe_topic_partitions_{'_'.join(topics) or 'all'}"
    return action


def describe_producers(world, login_as, _admin):
    with login_as() as c:
        r = c.request("DescribeProducers", 0, {"Topics": [
            {"Name": world[k], "PartitionIndexes": [0]} for k in ("hidden", "read")]})
        return [(key_of(world, t["Name"]), t["Partitions"][0]["ErrorCode"]) for t in r["Topics"]]


def describe_transactions(world, login_as, _admin):
    """An id the caller may not describe, and one it may that was never used."""
    ids = [world["txn"] + "-other", world["txn"]]
    with login_as() as c:
        # Kafka answers NOT_COORDINATOR (16) or COORDINATOR_LOAD_IN_PROGRESS (14) until
        # __transaction_state exists and is loaded; FindCoordinator creates it.
        c.request("FindCoordinator", 4, {"KeyType": 1, "CoordinatorKeys": [world["txn"]]})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            r = c.request("DescribeTransactions", 0, {"TransactionalIds": ids})
            codes = [s["ErrorCode"] for s in r["TransactionStates"]]
            if not {14, 16} & set(codes) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        return [(s["TransactionalId"].replace(world["txn"], "txn"), s["ErrorCode"])
                for s in r["TransactionStates"]]


def offset_delete_and_describe_groups(world, login_as, _admin):
    """A group the caller committed to (a simple classic group): OffsetDelete of a topic it may
    read and one it may not, then DescribeGroups of it and of a group it may not describe."""
    group, nope = world["gpfx"] + unique("od"), unique("nope")
    with login_as() as c:
        # Kafka answers NOT_COORDINATOR (16) or COORDINATOR_LOAD_IN_PROGRESS (14) until
        # __consumer_offsets exists and is loaded; FindCoordinator creates it.
        c.request("FindCoordinator", 4, {"KeyType": 0, "CoordinatorKeys": [group]})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            commit = c.request("OffsetCommit", 9, {
                "GroupId": group, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
                "Topics": [{"Name": world["read"], "Partitions": [
                    {"PartitionIndex": 0, "CommittedOffset": 0, "CommittedLeaderEpoch": -1,
                     "CommittedMetadata": ""}]}]})
            committed = [p["ErrorCode"] for t in commit["Topics"] for p in t["Partitions"]]
            if not {14, 16} & set(committed) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        deleted = c.request("OffsetDelete", 0, {"GroupId": group, "Topics": [
            {"Name": world[k], "Partitions": [{"PartitionIndex": 0}]} for k in ("hidden", "read")]})
        topics = sorted((key_of(world, t["Name"]), t["Partitions"][0]["ErrorCode"])
                        for t in deleted["Topics"])
        described = c.request("DescribeGroups", 5, {"Groups": [group, nope],
                                                     "IncludeAuthorizedOperations": True})
        labels = {group: "own", nope: "nope"}
        groups = [(labels[g["GroupId"]], g["ErrorCode"], g["AuthorizedOperations"])
                  for g in described["Groups"]]
        return committed, deleted["ErrorCode"], topics, groups


def elect_leaders(world, login_as, _admin):
    """CLUSTER ALTER: the error on top and on every partition named."""
    with login_as() as c:
        r = c.request("ElectLeaders", 2, {"ElectionType": 0, "TimeoutMs": 10000, "TopicPartitions": [
            {"Topic": world["read"], "Partitions": [0]}]})
        return r["ErrorCode"], [p["ErrorCode"] for t in r["ReplicaElectionResults"]
                                for p in t["PartitionResult"]]
