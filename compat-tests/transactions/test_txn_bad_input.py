"""Bad transactional requests, sent raw (`kafka_wire`, from Kafka's own schemas), get Kafka's error
codes, and nothing else is disturbed: a transaction timeout over `transaction.max.timeout.ms`
(and of 0), EndTxn for a transactional id the coordinator never saw, with the wrong epoch and
with the wrong producer id, AddPartitionsToTxn naming a topic or partition that does not exist,
and TxnOffsetCommit from a stale member: a classic group's old generation, a KIP-848 consumer
group's epoch ahead of the member's, an unknown member, a generation for a group that does not
exist. Where the answer depends on the request version (EndTxn below v2, TxnOffsetCommit v6's
GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH) both sides are asked. Afterwards the same
transactional id commits a transaction that read_committed sees, with its offsets. The same
assertions pass on Apache Kafka 4.4.0 (`run.sh --kafka`).
"""
import time
import uuid

from helpers import create_topic, deadline_after, unique
from kafka_wire import Connection
from txn import READ_COMMITTED, Sender, read, txn_producer

# Kafka's error codes.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
OPERATION_NOT_ATTEMPTED = 55
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
PRODUCER_FENCED = 90
STALE_MEMBER_EPOCH = 113
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
NOT_READY = (14, 15, 16)


def until_ready(call, what, timeout_s=60):
    """call() until its error code is not one of a coordinator that is not ready yet."""
    deadline = deadline_after(timeout_s)
    while True:
        r = call()
        code = r.get("ErrorCode", NONE)
        if code not in NOT_READY:
            return r
        assert time.monotonic() < deadline, f"{what}: the coordinator is not ready: {r}"
        time.sleep(0.5)


def coordinator_ready(conn, key_type, key):
    until_ready(lambda: conn.request("FindCoordinator", 4, {"KeyType": key_type, "CoordinatorKeys": [key]})
                ["Coordinators"][0], f"FindCoordinator {key}")


def init_producer_id(conn, txn_id, timeout_ms, producer=(-1, -1)):
    return until_ready(lambda: conn.request("InitProducerId", 5, {
        "TransactionalId": txn_id, "TransactionTimeoutMs": timeout_ms,
        "ProducerId": producer[0], "ProducerEpoch": producer[1]}), f"InitProducerId {txn_id}")


def end_txn(conn, version, txn_id, producer, committed=True):
    return until_ready(lambda: conn.request("EndTxn", version, {
        "TransactionalId": txn_id, "ProducerId": producer[0], "ProducerEpoch": producer[1],
        "Committed": committed}), f"EndTxn {txn_id}")["ErrorCode"]


def txn_offset_commit(conn, version, txn_id, group, producer, member, topic, topic_id=None):
    """One partition's TxnOffsetCommit (offset 7 of partition 0); its error code. `member` is
    (member id, generation or member epoch). v6 names the topic by id."""
    name = {"TopicId": topic_id} if version >= 6 else {"Name": topic}
    r = conn.request("TxnOffsetCommit", version, {
        "TransactionalId": txn_id, "GroupId": group, "ProducerId": producer[0],
        "ProducerEpoch": producer[1], "MemberId": member[0], "GenerationIdOrMemberEpoch": member[1],
        "GroupInstanceId": None,
        "Topics": [dict(name, Partitions=[{"PartitionIndex": 0, "CommittedOffset": 7,
                                           "CommittedLeaderEpoch": -1, "CommittedMetadata": None}])]})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"]


def join_classic_group(conn, group):
    """A classic group of one member through JoinGroup and SyncGroup: (member id, generation)."""
    join = {"GroupId": group, "SessionTimeoutMs": 30000, "RebalanceTimeoutMs": 30000, "MemberId": "",
            "GroupInstanceId": None, "ProtocolType": "txn-test",
            "Protocols": [{"Name": "only", "Metadata": b""}], "Reason": None}
    r = until_ready(lambda: conn.request("JoinGroup", 9, join), f"JoinGroup {group}")
    assert r["ErrorCode"] == MEMBER_ID_REQUIRED, r
    join["MemberId"] = r["MemberId"]
    # Answered after the group's initial rebalance delay (Kafka's 3 s).
    r = conn.request("JoinGroup", 9, join)
    assert r["ErrorCode"] == NONE, r
    member_id, generation = r["MemberId"], r["GenerationId"]
    r = conn.request("SyncGroup", 5, {
        "GroupId": group, "GenerationId": generation, "MemberId": member_id, "GroupInstanceId": None,
        "ProtocolType": "txn-test", "ProtocolName": "only",
        "Assignments": [{"MemberId": member_id, "Assignment": b""}]})
    assert r["ErrorCode"] == NONE, r
    return member_id, generation


def join_consumer_group(conn, group, topic):
    """A KIP-848 consumer group of one member (ConsumerGroupHeartbeat v1, the member id chosen by
    the client): (member id, member epoch)."""
    member_id = str(uuid.uuid4())
    r = until_ready(lambda: conn.request("ConsumerGroupHeartbeat", 1, {
        "GroupId": group, "MemberId": member_id, "MemberEpoch": 0, "InstanceId": None, "RackId": None,
        "RebalanceTimeoutMs": 30000, "SubscribedTopicNames": [topic], "SubscribedTopicRegex": None,
        "ServerAssignor": None, "TopicPartitions": []}), f"ConsumerGroupHeartbeat {group}")
    assert r["ErrorCode"] == NONE and r["MemberEpoch"] > 0, r
    return member_id, r["MemberEpoch"]


def test_bad_transactional_requests_get_kafkas_codes(broker):
    topic = unique("txn-bad")
    create_topic(broker.bootstrap, topic, 2)
    txn_id, tv1_id = unique("bad"), unique("bad-tv1")
    with Connection(broker.bootstrap) as conn:
        topic_id = conn.request("Metadata", 12, {"Topics": [{"Name": topic}],
                                                 "AllowAutoTopicCreation": False})["Topics"][0]["TopicId"]
        for key in (txn_id, tv1_id, "never-seen"):
            coordinator_ready(conn, 1, key)

        # A timeout over transaction.max.timeout.ms (15 minutes), or of 0.
        for timeout_ms in (900_001, 0):
            r = init_producer_id(conn, txn_id, timeout_ms)
            assert r["ErrorCode"] == INVALID_TRANSACTION_TIMEOUT, (timeout_ms, r)
        r = init_producer_id(conn, txn_id, 60_000)
        assert r["ErrorCode"] == NONE, r
        producer = (r["ProducerId"], r["ProducerEpoch"])

        # EndTxn: an id never seen, a producer id that is not the id's, an epoch that is not its
        # own (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH below v2), nothing open to end.
        assert end_txn(conn, 4, "never-seen", (producer[0], 0)) == INVALID_PRODUCER_ID_MAPPING
        assert end_txn(conn, 4, txn_id, (producer[0] + 1, producer[1])) == INVALID_PRODUCER_ID_MAPPING
        assert end_txn(conn, 4, txn_id, (producer[0], producer[1] + 3)) == PRODUCER_FENCED
        assert end_txn(conn, 1, txn_id, (producer[0], producer[1] + 3)) == INVALID_PRODUCER_EPOCH
        assert end_txn(conn, 4, txn_id, producer) == INVALID_TXN_STATE

        # AddPartitionsToTxn (v3, as transaction version 1 clients send it) with a topic and a
        # partition that do not exist: those are UNKNOWN_TOPIC_OR_PARTITION, the partition that
        # exists OPERATION_NOT_ATTEMPTED, and nothing is added.
        r = conn.request("AddPartitionsToTxn", 3, {
            "V3AndBelowTransactionalId": txn_id, "V3AndBelowProducerId": producer[0],
            "V3AndBelowProducerEpoch": producer[1],
            "V3AndBelowTopics": [{"Name": topic, "Partitions": [0, 9]},
                                 {"Name": unique("no-such-topic"), "Partitions": [0]}]})
        got = sorted((t["Name"] == topic, p["PartitionIndex"], p["PartitionErrorCode"])
                     for t in r["ResultsByTopicV3AndBelow"] for p in t["ResultsByPartition"])
        assert got == [(False, 0, UNKNOWN_TOPIC_OR_PARTITION), (True, 0, OPERATION_NOT_ATTEMPTED),
                       (True, 9, UNKNOWN_TOPIC_OR_PARTITION)], r
        assert end_txn(conn, 4, txn_id, producer) == INVALID_TXN_STATE, "nothing was added"

        # TxnOffsetCommit from a stale member. v5 adds the offsets partition to the transaction
        # itself (transaction version 2), so each commit below has its transaction.
        classic = unique("bad-classic")
        coordinator_ready(conn, 0, classic)
        classic_member, generation = join_classic_group(conn, classic)
        for version in (5, 6):
            for stale in (generation - 1, generation + 1):
                assert txn_offset_commit(conn, version, txn_id, classic, producer, (classic_member, stale),
                                         topic, topic_id) == ILLEGAL_GENERATION, (version, stale)
            assert txn_offset_commit(conn, version, txn_id, classic, producer, ("stranger", generation),
                                     topic, topic_id) == UNKNOWN_MEMBER_ID, version
        consumer = unique("bad-consumer")
        coordinator_ready(conn, 0, consumer)
        consumer_member, epoch = join_consumer_group(conn, consumer, topic)
        for version, code in ((5, ILLEGAL_GENERATION), (6, STALE_MEMBER_EPOCH)):
            assert txn_offset_commit(conn, version, txn_id, consumer, producer, (consumer_member, epoch + 1),
                                     topic, topic_id) == code, version
            assert txn_offset_commit(conn, version, txn_id, consumer, producer, ("stranger", epoch),
                                     topic, topic_id) == UNKNOWN_MEMBER_ID, version
        nobody = unique("bad-nobody")
        coordinator_ready(conn, 0, nobody)
        for version, code in ((5, ILLEGAL_GENERATION), (6, GROUP_ID_NOT_FOUND)):
            assert txn_offset_commit(conn, version, txn_id, nobody, producer, ("m", 3),
                                     topic, topic_id) == code, version
        # The member's own generation and epoch are taken.
        assert txn_offset_commit(conn, 5, txn_id, classic, producer, (classic_member, generation),
                                 topic) == NONE
        assert txn_offset_commit(conn, 6, txn_id, consumer, producer, (consumer_member, epoch),
                                 topic, topic_id) == NONE
        assert end_txn(conn, 5, txn_id, producer, committed=False) == NONE

        # Transaction version 1: TxnOffsetCommit v3 without AddOffsetsToTxn is not in the
        # transaction (INVALID_TXN_STATE below v4).
        r = init_producer_id(conn, tv1_id, 60_000)
        tv1 = (r["ProducerId"], r["ProducerEpoch"])
        assert txn_offset_commit(conn, 3, tv1_id, nobody, tv1, ("", -1), topic) == INVALID_TXN_STATE

    # Nothing else was disturbed: the same transactional id commits records and offsets.
    producer = txn_producer(broker.bootstrap, txn_id)
    sender = Sender(producer, topic)
    producer.begin_transaction()
    sent = [sender.send(p, f"after-{p}") for p in (0, 1)]
    producer.commit_transaction(60)
    got = read(broker.bootstrap, topic, 2, READ_COMMITTED)
    assert got == {0: [sent[0]], 1: [sent[1]]}

