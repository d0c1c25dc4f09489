"""The API versions Kafka 4.4 added over Kafka 4.1 and over sluice's earlier maxima, sent as raw
requests (`kafka_wire`, which encodes them from Kafka's own message schemas) to the broker under
test: ListOffsets v10 and v11 (timestamp -6, earliest pending upload), OffsetCommit and
OffsetFetch v10 (topics by id), ApiVersions v5 (the cluster and node a client expects),
DescribeLogDirs v5 (IsCordoned), DeleteGroups v3 (a per-group error message), TxnOffsetCommit v6
(topics by id) and WriteTxnMarkers v2 (each marker's transaction version decides which epochs the
partition takes). Each answer is asserted field by field, and the same assertions pass on Apache
Kafka 4.4.0 (`--kafka`).
"""
import struct
import time

import crc32c

from confluent_kafka import Consumer, Producer

from helpers import create_topic, deadline_after, unique
from kafka_wire import Connection, random_uuid

ZERO_ID = "AAAAAAAAAAAAAAAAAAAAAA"
T0 = 1_700_000_000_000


def metadata(conn, topics):
    return conn.request("Metadata", 12, {"Topics": [{"Name": t} for t in topics],
                                         "AllowAutoTopicCreation": False})


# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_NOT_READY = (14, 15, 16)


def wait_for_coordinator(conn, group):
    """Until the group's coordinator answers: Kafka creates __consumer_offsets on the first
    FindCoordinator, and names the coordinator a moment before it has loaded the group's
    partition (OffsetFetch answers NOT_COORDINATOR meanwhile)."""
    deadline = deadline_after(60)
    while True:
        r = conn.request("FindCoordinator", 4, {"KeyType": 0, "CoordinatorKeys": [group]})
        if r["Coordinators"][0]["ErrorCode"] == 0:
            r = conn.request("OffsetFetch", 8, {"Groups": [{"GroupId": group, "Topics": None}],
                                                "RequireStable": False})
            if r["Groups"][0]["ErrorCode"] not in COORDINATOR_NOT_READY:
                return
        assert time.monotonic() < deadline, f"no coordinator for {group}: {r}"
        time.sleep(0.5)


def api_versions_v5(conn, name="probe", cluster_id=None, node_id=-1):
    return conn.request("ApiVersions", 5, {"ClientSoftwareName": name, "ClientSoftwareVersion": "1",
                                           "ClusterId": cluster_id, "NodeId": node_id})


def test_api_versions_v5_checks_the_cluster_and_node(broker):
    with Connection(broker.bootstrap) as conn:
        md = metadata(conn, [])
        cluster_id, node_id = md["ClusterId"], md["Brokers"][0]["NodeId"]
        ok = api_versions_v5(conn)
        assert ok["ErrorCode"] == 0
        own = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in ok["ApiKeys"]}
        assert own[18] == (0, 5), own
        other = random_uuid()
        cases = [(None, -1, 0), (cluster_id, node_id, 0), (cluster_id, node_id + 6, 129),
                 (other, node_id, 129), (cluster_id, -1, 42), ("", -1, 42), (None, node_id, 42)]
        for cid, nid, error in cases:
            r = api_versions_v5(conn, cluster_id=cid, node_id=nid)
            assert r["ErrorCode"] == error, (cid, nid, r)
            # The API list comes only with a successful answer.
            assert bool(r["ApiKeys"]) == (error == 0), (cid, nid, r)
        # The client's software fields are checked first, at v4 as at v5.
        assert api_versions_v5(conn, name="-bad", cluster_id=other, node_id=1)["ErrorCode"] == 42
        r = conn.request("ApiVersions", 4, {"ClientSoftwareName": "-bad", "ClientSoftwareVersion": "1"})
        assert (r["ErrorCode"], r["ApiKeys"]) == (42, [])


def test_list_offsets_v10_and_v11(broker):
    topic = unique("wire-lo")
    create_topic(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(3):
        p.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=T0 + i)
    assert p.flush(30) == 0
    missing = unique("wire-missing")
    with Connection(broker.bootstrap) as conn:
        for version in (9, 10, 11):
            for ts in (-1, -2, -3, -4, -5, -6, -7, 0):
                body = {"ReplicaId": -1, "IsolationLevel": 0, "Topics": [
                    {"Name": topic, "Partitions": [{"PartitionIndex": 0, "Timestamp": ts},
                                                   {"PartitionIndex": 1, "Timestamp": ts}]},
                    {"Name": missing, "Partitions": [{"PartitionIndex": 0, "Timestamp": ts}]}]}
                if version >= 10:
                    body["TimeoutMs"] = 1000
                r = conn.request("ListOffsets", version, body)
                got = sorted((p["PartitionIndex"] if t["Name"] == topic else -1, p["ErrorCode"],
                              p["Timestamp"], p["Offset"], p["LeaderEpoch"])
                             for t in r["Topics"] for p in t["Partitions"])
                # Partition 0 holds three records stamped T0, T0+1, T0+2; partition 1 none.
                unsupported = [(-1, 35, -1, -1, -1), (0, 35, -1, -1, -1), (1, 35, -1, -1, -1)]
                expected = {
                    -1: [(-1, 3, -1, -1, -1), (0, 0, -1, 3, 0), (1, 0, -1, 0, 0)],
                    -2: [(-1, 3, -1, -1, -1), (0, 0, -1, 0, 0), (1, 0, -1, 0, 0)],
                    -3: [(-1, 3, -1, -1, -1), (0, 0, T0 + 2, 2, 0), (1, 0, -1, -1, -1)],
                    -4: [(-1, 3, -1, -1, -1), (0, 0, -1, 0, 0), (1, 0, -1, 0, 0)],
                    -5: [(-1, 3, -1, -1, -1), (0, 0, -1, -1, -1), (1, 0, -1, -1, -1)],
                    # Earliest pending upload: known from v11; nothing is tiered, so no offset.
                    -6: [(-1, 3, -1, -1, -1), (0, 0, -1, -1, -1), (1, 0, -1, -1, -1)]
                    if version >= 11 else unsupported,
                    -7: unsupported,
                    0: [(-1, 3, -1, -1, -1), (0, 0, T0, 0, 0), (1, 0, -1, -1, -1)],
                }[ts]
                assert got == expected, f"ListOffsets v{version} timestamp {ts}: {r}"


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker):
    topic, group = unique("wire-byid"), unique("wire-g")
    create_topic(broker.bootstrap, topic, 2)
    unknown = random_uuid()
    with Connection(broker.bootstrap) as conn:
        topic_id = metadata(conn, [topic])["Topics"][0]["TopicId"]
        wait_for_coordinator(conn, group)

        def parts(indexes):
            return [{"PartitionIndex": i, "CommittedOffset": 2, "CommittedMetadata": "m"} for i in indexes]

        r = conn.request("OffsetCommit", 10, {
            "GroupId": group, "GenerationIdOrMemberEpoch": -1, "MemberId": "", "GroupInstanceId": None,
            "Topics": [{"TopicId": topic_id, "Partitions": parts([0, 5])},
                       {"TopicId": unknown, "Partitions": parts([0])},
                       {"TopicId": ZERO_ID, "Partitions": parts([0])}]})
        got = sorted((t["TopicId"], p["PartitionIndex"], p["ErrorCode"])
                     for t in r["Topics"] for p in t["Partitions"])
        # Partition 5 does not exist (3); ids that name no topic, zero included: 100.
        assert got == sorted([(topic_id, 0, 0), (topic_id, 5, 3), (unknown, 0, 100), (ZERO_ID, 0, 100)]), r

        def fetch(version, topics, group_id=group):
            r = conn.request("OffsetFetch", version, {"Groups": [
                {"GroupId": group_id, "MemberId": None, "MemberEpoch": -1, "Topics": topics}],
                "RequireStable": False})
            (g,) = r["Groups"]
            assert g["ErrorCode"] == 0, r
            key = "TopicId" if version >= 10 else "Name"
            return sorted((t[key], p["PartitionIndex"], p["CommittedOffset"], p["CommittedLeaderEpoch"],
                           p["Metadata"], p["ErrorCode"]) for t in g["Topics"] for p in t["Partitions"])

        assert fetch(10, [{"TopicId": topic_id, "PartitionIndexes": [0, 1, 7]},
                          {"TopicId": unknown, "PartitionIndexes": [0]},
                          {"TopicId": ZERO_ID, "PartitionIndexes": [0]}]) == sorted([
            (topic_id, 0, 2, -1, "m", 0), (topic_id, 1, -1, -1, "", 0), (topic_id, 7, -1, -1, "", 0),
            (unknown, 0, -1, -1, "", 100), (ZERO_ID, 0, -1, -1, "", 100)])
        # Everything the group committed: by id at v10, by name at v9.
        assert fetch(10, None) == [(topic_id, 0, 2, -1, "m", 0)]
        assert fetch(9, None) == [(topic, 0, 2, -1, "m", 0)]
        # A group that committed nothing.
        assert fetch(10, [{"TopicId": topic_id, "PartitionIndexes": [0]}], unique("wire-none")) == [
            (topic_id, 0, -1, -1, "", 0)]


def test_describe_log_dirs_v5_says_not_cordoned(broker):
    topic = unique("wire-dirs")
    create_topic(broker.bootstrap, topic, 2)
    with Connection(broker.bootstrap) as conn:
        for version in (4, 5):
            deadline = deadline_after(30)
            while True:
                r = conn.request("DescribeLogDirs", version, {"Topics": [
                    {"Topic": topic, "Partitions": [0, 1, 9]},
                    {"Topic": unique("wire-none"), "Partitions": [0]}]})
                assert r["ErrorCode"] == 0 and len(r["Results"]) == 1, r
                (result,) = r["Results"]
                listed = [(t["Name"], sorted(p["PartitionIndex"] for p in t["Partitions"]))
                          for t in result["Topics"]]
                # Kafka lists a new topic's logs a moment after its partitions have leaders.
                if listed == [(topic, [0, 1])] or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert result["ErrorCode"] == 0 and result["TotalBytes"] > 0 and result["UsableBytes"] > 0
            # Only the partitions that exist, of the topics that exist.
            assert listed == [(topic, [0, 1])], r
            assert ("IsCordoned" in result) == (version >= 5)
            if version >= 5:
                assert result["IsCordoned"] is False


def test_delete_groups_v3_answers_null_error_messages(broker):
    topic = unique("wire-dg")
    committed, active, never = unique("wire-committed"), unique("wire-active"), unique("wire-never")
    create_topic(broker.bootstrap, topic, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": active,
                         "session.timeout.ms": 30000})
    try:
        consumer.subscribe([topic])
        deadline = deadline_after(60)
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never got its assignment"
            consumer.poll(0.5)
        with Connection(broker.bootstrap) as conn:
            wait_for_coordinator(conn, committed)
            r = conn.request("OffsetCommit", 9, {
                "GroupId": committed, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
                "GroupInstanceId": None, "Topics": [{"Name": topic, "Partitions": [
                    {"PartitionIndex": 0, "CommittedOffset": 0, "CommittedMetadata": ""}]}]})
            assert r["Topics"][0]["Partitions"][0]["ErrorCode"] == 0, r
            for version in (2, 3):
                r = conn.request("DeleteGroups", version, {"GroupsNames": [never, "", active, never]})
                got = sorted((g["GroupId"], g["ErrorCode"], g.get("ErrorMessage", "absent"))
                             for g in r["Results"])
                message = None if version >= 3 else "absent"
                # A name given twice is answered once; the empty id is no group (69);
                # a group with a member is NON_EMPTY_GROUP (68).
                assert got == sorted([(never, 69, message), ("", 69, message), (active, 68, message)]), r
            r = conn.request("DeleteGroups", 3, {"GroupsNames": [committed]})
            assert r["Results"] == [{"GroupId": committed, "ErrorCode": 0, "ErrorMessage": None}], r
    finally:
        consumer.close()


def transactional_batch(producer_id, epoch, count, tag):
    """A v2 RecordBatch of `count` transactional records of the producer, sequences from 0."""

    def varint(value):
        value = (value << 1) ^ (value >> 63)  # zigzag
        out = bytearray()
        while True:
            byte = value & 0x7F
            value >>= 7
            if value:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                return bytes(out)

    records = b""
    for i in range(count):
        key, value = f"k{i}".encode(), f"{tag}-{i}".encode()
        body = (b"\x00" + varint(0) + varint(i) + varint(len(key)) + key + varint(len(value))
                + value + varint(0))
        records += varint(len(body)) + body
    # attributes: transactional (bit 4); last offset delta; timestamps; producer; sequence 0.
    after_crc = struct.pack(">hiqqqhii", 0x10, count - 1, T0, T0, producer_id, epoch, 0, count) + records
    crc = crc32c.crc32c(after_crc)
    header = struct.pack(">qii", 0, len(after_crc) + 9, -1) + b"\x02" + struct.pack(">I", crc)
    return header + after_crc


def test_write_txn_markers_v2_checks_the_epoch_by_transaction_version(broker_factory):
    broker = broker_factory({"transaction.partition.verification.enable": "false"})
    topic = unique("wire-markers")
    create_topic(broker.bootstrap, topic, 1)
    producer_id = 4000
    with Connection(broker.bootstrap) as conn:
        def produce(epoch, tag):
            r = conn.request("Produce", 9, {"TransactionalId": "wire-tx", "Acks": -1, "TimeoutMs": 10000,
                                            "TopicData": [{"Name": topic, "PartitionData": [
                                                {"Index": 0, "Records": transactional_batch(
                                                    producer_id, epoch, 2 if tag == "a" else 1, tag)}]}]})
            assert r["Responses"][0]["PartitionResponses"][0]["ErrorCode"] == 0, r

        def marker(epoch, commit, version):
            r = conn.request("WriteTxnMarkers", 2, {"Markers": [{
                "ProducerId": producer_id, "ProducerEpoch": epoch, "TransactionResult": commit,
                "Topics": [{"Name": topic, "PartitionIndexes": [0]}], "CoordinatorEpoch": 0,
                "TransactionVersion": version}]})
            return r["Markers"][0]["Topics"][0]["Partitions"][0]["ErrorCode"]

        def last_stable_offset():
            r = conn.request("ListOffsets", 9, {"ReplicaId": -1, "IsolationLevel": 1, "Topics": [
                {"Name": topic, "Partitions": [{"PartitionIndex": 0, "Timestamp": -1}]}]})
            return r["Topics"][0]["Partitions"][0]["Offset"]

        # A transaction at epoch 3 holds offsets 0-1. Under transaction version 2 its markers
        # carry epoch 4: one at 3 is a late marker of the transaction before (47).
        produce(3, "a")
        assert last_stable_offset() == 0
        assert marker(3, True, 2) == 47
        assert marker(2, False, 0) == 47
        assert last_stable_offset() == 0
        assert marker(4, True, 2) == 0
        assert last_stable_offset() == 3
        # The same marker again, as a coordinator retries it, is taken (and written again).
        assert marker(4, True, 2) == 0
        assert last_stable_offset() == 4
        # A version 1 marker takes the open transaction's own epoch; a version 2 one does not.
        produce(4, "b")
        assert last_stable_offset() == 4
        assert marker(4, False, 2) == 47
        assert marker(4, False, 1) == 0
        assert last_stable_offset() == 6


def test_txn_offset_commit_v6_names_topics_by_id(broker):
    topic, group, txn_id = unique("wire-txnoff"), unique("wire-txng"), unique("wire-txn")
    create_topic(broker.bootstrap, topic, 2)
    unknown = random_uuid()
    with Connection(broker.bootstrap) as conn:
        topic_id = metadata(conn, [topic])["Topics"][0]["TopicId"]
        wait_for_coordinator(conn, group)
        deadline = deadline_after(60)
        while True:
            r = conn.request("FindCoordinator", 4, {"KeyType": 1, "CoordinatorKeys": [txn_id]})
            if r["Coordinators"][0]["ErrorCode"] == 0:
                r = conn.request("InitProducerId", 5, {"TransactionalId": txn_id, "TransactionTimeoutMs": 60000,
                                                       "ProducerId": -1, "ProducerEpoch": -1})
                if r["ErrorCode"] == 0:
                    break
            assert time.monotonic() < deadline, r
            time.sleep(0.5)
        producer_id, epoch = r["ProducerId"], r["ProducerEpoch"]

        def commit(producer_epoch, topics):
            r = conn.request("TxnOffsetCommit", 6, {
                "TransactionalId": txn_id, "GroupId": group, "ProducerId": producer_id,
                "ProducerEpoch": producer_epoch, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
                "GroupInstanceId": None, "Topics": [
                    {"TopicId": tid, "Partitions": [{"PartitionIndex": p, "CommittedOffset": 5,
                                                     "CommittedMetadata": None} for p in parts]}
                    for tid, parts in topics]})
            return sorted((t["TopicId"], p["PartitionIndex"], p["ErrorCode"])
                          for t in r["Topics"] for p in t["Partitions"])

        def stable_offset():
            r = conn.request("OffsetFetch", 9, {"Groups": [{"GroupId": group, "MemberId": None, "MemberEpoch": -1,
                                                            "Topics": [{"Name": topic, "PartitionIndexes": [0]}]}],
                                                "RequireStable": True})
            p = r["Groups"][0]["Topics"][0]["Partitions"][0]
            return p["CommittedOffset"], p["ErrorCode"]

        # v6 adds the offsets partition to the transaction itself (transaction version 2).
        # Partition 7 does not exist (3); ids that name no topic, zero included: 100.
        assert commit(epoch, [(topic_id, [0, 7]), (unknown, [1]), (ZERO_ID, [0])]) == sorted([
            (topic_id, 0, 0), (topic_id, 7, 3), (unknown, 1, 100), (ZERO_ID, 0, 100)])
        assert stable_offset() == (-1, 88)
        r = conn.request("EndTxn", 5, {"TransactionalId": txn_id, "ProducerId": producer_id,
                                       "ProducerEpoch": epoch, "Committed": True})
        assert (r["ErrorCode"], r["ProducerId"], r["ProducerEpoch"]) == (0, producer_id, epoch + 1), r
        deadline = deadline_after(30)
        while stable_offset() != (5, 0):
            assert time.monotonic() < deadline, stable_offset()
            time.sleep(0.2)
        # The EndTxn bumped the epoch: the old one is fenced (PRODUCER_FENCED, answered as
        # INVALID_PRODUCER_EPOCH to TxnOffsetCommit), for every partition it names.
        assert commit(epoch, [(topic_id, [1])]) == [(topic_id, 1, 47)]
