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


def _retry(c, api, version, body, key, codes=(14, 16, 51)):
    """A request retried while Kafka is still creating or loading a coordinator's topic (or an
    earlier transaction is being completed)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        r = c.request(api, version, body)
        if r[key] not in codes or time.monotonic() > deadline:
            return r
        time.sleep(0.5)


def _add_partitions(c, txn_id, producer, partitions, version=3):
    r = c.request("AddPartitionsToTxn", version, {
        "V3AndBelowTransactionalId": txn_id, "V3AndBelowProducerId": producer[0],
        "V3AndBelowProducerEpoch": producer[1],
        "V3AndBelowTopics": [{"Name": t, "Partitions": [p]} for t, p in partitions]})
    codes = {(t["Name"], p["PartitionIndex"]): p["PartitionErrorCode"]
             for t in r["ResultsByTopicV3AndBelow"] for p in t["ResultsByPartition"]}
    return [codes.get(tp) for tp in partitions]


def transactions(world, login_as, admin):
    """The transaction APIs' checks, in one transaction of the caller (whose id it may write)
    and one of the super user's: InitProducerId, AddPartitionsToTxn v3 (refused, missing and
    internal topics) and v4, AddOffsetsToTxn, TxnOffsetCommit, WriteTxnMarkers, EndTxn; then
    the super user's AddPartitionsToTxn with an internal topic."""
    txn_id, admin_id = world["txw"] + unique(""), world["prefix"] + unique("-adm")
    group = world["gpfx"] + unique("tx")
    out = {}
    with login_as() as c, admin() as a:
        c.request("FindCoordinator", 4, {"KeyType": 1, "CoordinatorKeys": [txn_id]})
        init = {"TransactionalId": txn_id, "TransactionTimeoutMs": 60000, "ProducerId": -1,
                "ProducerEpoch": -1}
        r = _retry(c, "InitProducerId", 4, init, "ErrorCode")
        out["init"] = r["ErrorCode"]
        producer = (r["ProducerId"], r["ProducerEpoch"])
        w, h, ok = world["write"], world["hidden"], world["prefix"] + "-missing"
        out["add refused"] = _add_partitions(c, txn_id, producer, [(w, 0), (h, 0), (ok, 0)])
        out["add internal"] = _add_partitions(c, txn_id, producer, [(w, 0), ("__consumer_offsets", 0)])
        out["add v4"] = c.request("AddPartitionsToTxn", 4, {"Transactions": []})["ErrorCode"]
        out["add"] = _add_partitions(c, txn_id, producer, [(w, 0)])
        base = {"TransactionalId": txn_id, "ProducerId": producer[0], "ProducerEpoch": producer[1]}
        out["offsets refused"] = c.request("AddOffsetsToTxn", 3, dict(base, GroupId=unique("nope")))["ErrorCode"]
        c.request("FindCoordinator", 4, {"KeyType": 0, "CoordinatorKeys": [group]})
        out["offsets"] = _retry(c, "AddOffsetsToTxn", 3, dict(base, GroupId=group), "ErrorCode")["ErrorCode"]
        commit = []
        for k in ("hidden", "read"):
            deadline = time.monotonic() + TIMEOUT_S
            while True:  # the group's coordinator may still be loading (14, 16)
                r = c.request("TxnOffsetCommit", 3, dict(
                    base, GroupId=group, GenerationId=-1, MemberId="", GroupInstanceId=None,
                    Topics=[{"Name": world[k], "Partitions": [
                        {"PartitionIndex": 0, "CommittedOffset": 0, "CommittedLeaderEpoch": -1,
                         "CommittedMetadata": ""}]}]))
                code = r["Topics"][0]["Partitions"][0]["ErrorCode"]
                if code not in (14, 16) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            commit.append(code)
        out["txn offset commit"] = commit
        r = c.request("WriteTxnMarkers", 1, {"Markers": [{
            "ProducerId": producer[0], "ProducerEpoch": producer[1], "TransactionResult": True,
            "Topics": [{"Name": w, "PartitionIndexes": [0]}], "CoordinatorEpoch": 0}]})
        out["markers"] = r["Markers"][0]["Topics"][0]["Partitions"][0]["ErrorCode"]
        out["end"] = c.request("EndTxn", 3, dict(base, Committed=True))["ErrorCode"]
        r = _retry(a, "InitProducerId", 4, dict(init, TransactionalId=admin_id), "ErrorCode")
        out["admin add internal"] = _add_partitions(
            a, admin_id, (r["ProducerId"], r["ProducerEpoch"]), [(w, 0), ("__consumer_offsets", 0)])
    return out


def transactions_refused(world, login_as, _admin):
    """A caller without WRITE on the transactional id: every transaction API refuses it first,
    whatever the producer id."""
    txn_id = world["txw"] + unique("")
    base = {"TransactionalId": txn_id, "ProducerId": 1000, "ProducerEpoch": 0}
    with login_as() as c:
        r = c.request("InitProducerId", 4, {"TransactionalId": txn_id, "TransactionTimeoutMs": 60000,
                                            "ProducerId": -1, "ProducerEpoch": -1})
        out = {"init": r["ErrorCode"]}
        out["add"] = _add_partitions(c, txn_id, (1000, 0), [(world["write"], 0)])
        out["offsets"] = c.request("AddOffsetsToTxn", 3, dict(base, GroupId=world["gpfx"] + "x"))["ErrorCode"]
        r = c.request("TxnOffsetCommit", 3, dict(
            base, GroupId=world["gpfx"] + "x", GenerationId=-1, MemberId="", GroupInstanceId=None,
            Topics=[{"Name": world["read"], "Partitions": [
                {"PartitionIndex": 0, "CommittedOffset": 0, "CommittedLeaderEpoch": -1,
                 "CommittedMetadata": ""}]}]))
        out["txn offset commit"] = r["Topics"][0]["Partitions"][0]["ErrorCode"]
        out["end"] = c.request("EndTxn", 3, dict(base, Committed=True))["ErrorCode"]
    return out
