"""Differential check: one transactional workload against the broker under test and against a
reference Apache Kafka (always started, whatever the mode; under --kafka two Kafkas are
compared, which checks the test). Both must show the same records, at the same offsets, to
read_committed and to read_uncommitted consumers, and the same end offsets per isolation level,
once with a transaction still open and once after everything ended.

The workload, on a 3-partition topic with 1 MiB segments: two transactional producers whose
transactions interleave on the same partitions, commits and aborts, plain idempotent records
between them, and a transaction of 300 KB records that spans every partition and rolls their
segments. Every record is its own batch (each send waits for its acknowledgement) and after
each commit or abort the workload waits until the markers are in the log, so the offsets are
fully determined by the workload: each record takes one offset and each marker one, in the order
the workload writes them. That is why offsets can be compared. (A client that lets the next
send race the previous transaction's markers would see offsets that depend on timing, on
either broker.)
"""
import os
import time

import pytest

from brokers import Broker
from helpers import create_topic, deadline_after, make_producer, unique
from txn import (BROKER_OVERRIDES, READ_COMMITTED, READ_UNCOMMITTED, Sender, by_partition,
                 end_offsets, read, txn_producer)

PARTITIONS = 3
BIG = "x" * 300_000


@pytest.fixture
def reference_kafka(tmp_path):
    """Apache Kafka, whatever the broker under test is."""
    if os.environ.get("KAFKA_BOOTSTRAP") and not os.environ.get("SLUICE_BIN") \
            and os.environ.get("KAFKA_MANAGED") != "1":
        pytest.skip("needs brokers this harness starts itself")
    kafka = Broker("kafka", root=tmp_path / "reference-kafka", overrides=BROKER_OVERRIDES)
    try:
        yield kafka.start()
    finally:
        kafka.stop()


class Workload:
    def __init__(self, bootstrap, topic):
        self.bootstrap, self.topic = bootstrap, topic
        self.t1 = Sender(txn_producer(bootstrap, "diff-1"), topic)
        self.t2 = Sender(txn_producer(bootstrap, "diff-2"), topic)
        self.plain = Sender(make_producer(bootstrap, **{"enable.idempotence": True}), topic)
        self.next = {p: 0 for p in range(PARTITIONS)}  # the log end offset we expect
        self.open = {}  # producer -> (partitions, records) of its open transaction
        self.committed, self.all = [], []

    def begin(self, s):
        s.producer.begin_transaction()
        self.open[s] = (set(), [])

    def send(self, s, p, value):
        r = s.send(p, value)
        assert r[1] == self.next[p], f"{value}: offset {r[1]}, expected {self.next[p]}"
        self.next[p] += 1
        self.all.append(r)
        if s in self.open:
            self.open[s][0].add(p)
            self.open[s][1].append(r)
        else:
            self.committed.append(r)

    def end(self, s, commit):
        (s.producer.commit_transaction if commit else s.producer.abort_transaction)(60)
        parts, records = self.open.pop(s)
        if commit:
            self.committed += records
        for p in parts:
            self.next[p] += 1  # the marker
        end = deadline_after(30)
        while True:  # wait for the markers before anything else is written
            hw = end_offsets(self.bootstrap, self.topic, PARTITIONS, READ_UNCOMMITTED)
            if all(hw[p] == self.next[p] for p in parts):
                return
            assert time.monotonic() < end, f"markers not written in 30s: {hw} != {self.next}"
            time.sleep(0.05)

    def snapshot(self):
        # Taken after end() waited for the markers, so what read_committed sees is settled.
        return {"read_committed": read(self.bootstrap, self.topic, PARTITIONS, READ_COMMITTED,
                                       settled=False),
                "read_uncommitted": read(self.bootstrap, self.topic, PARTITIONS, READ_UNCOMMITTED),
                "lso": end_offsets(self.bootstrap, self.topic, PARTITIONS, READ_COMMITTED),
                "hw": end_offsets(self.bootstrap, self.topic, PARTITIONS, READ_UNCOMMITTED)}

    def run(self):
        """-> (snapshot with a transaction open, its expectation, final snapshot, expectation)"""
        t1, t2, plain = self.t1, self.t2, self.plain
        self.begin(t1)
        self.send(t1, 0, "t1-a")
        self.send(t1, 1, "t1-b")
        self.begin(t2)
        self.send(t2, 0, "t2-c")
        self.send(t2, 2, "t2-d")
        self.send(plain, 0, "plain-e")
        self.send(t1, 0, "t1-f")
        self.end(t1, commit=True)
        self.send(t2, 1, "t2-g")
        self.end(t2, commit=False)
        # A transaction of 300 KB records over every partition, rolling each 1 MiB segment,
        # while the other producer's transaction interleaves.
        self.begin(t1)
        for i in range(12):
            self.send(t1, i % PARTITIONS, f"t1-big-{i}-{BIG}")
            if i == 5:
                self.begin(t2)
                self.send(t2, 1, "t2-h")
        self.end(t1, commit=True)
        self.send(t2, 2, "t2-i")
        self.end(t2, commit=True)
        self.begin(t1)
        self.send(t1, 2, "t1-j")
        self.end(t1, commit=False)
        for p in range(PARTITIONS):
            self.send(plain, p, f"plain-{p}")
        # Open: t2 writes to partitions 0 and 2.
        self.begin(t2)
        self.send(t2, 0, "t2-k")
        self.send(plain, 1, "plain-l")
        self.send(t2, 2, "t2-m")
        first_open = {0: self.open[t2][1][0][1], 2: self.open[t2][1][1][1]}
        during = self.snapshot()
        want_during = {"read_committed": by_partition(self.committed, PARTITIONS),
                       "read_uncommitted": by_partition(self.all, PARTITIONS),
                       "lso": {p: first_open.get(p, self.next[p]) for p in range(PARTITIONS)},
                       "hw": dict(self.next)}
        self.end(t2, commit=True)
        final = self.snapshot()
        want_final = {"read_committed": by_partition(self.committed, PARTITIONS),
                      "read_uncommitted": by_partition(self.all, PARTITIONS),
                      "lso": dict(self.next), "hw": dict(self.next)}
        for s in (t1, t2, plain):
            s.producer.close()
        return during, want_during, final, want_final


def short(snapshot):
    """The snapshot with the 300 KB values cut, for readable assertion messages."""
    cut = lambda rs: [(p, o, v[:12]) for p, o, v in rs]  # noqa: E731
    return {k: ({p: cut(rs) for p, rs in v.items()} if k.startswith("read") else v)
            for k, v in snapshot.items()}


@pytest.mark.control
def test_same_records_per_isolation_level_as_kafka(broker_factory, reference_kafka):
    under_test = broker_factory(BROKER_OVERRIDES)
    results = {}
    for name, b in (("under test", under_test), ("kafka", reference_kafka)):
        topic = "txn-diff"  # the same name on both
        create_topic(b.bootstrap, topic, PARTITIONS, config={"segment.bytes": "1048576"})
        results[name] = Workload(b.bootstrap, topic).run()
    ours, kafka = results["under test"], results["kafka"]
    # Each against its own expectation, then against each other.
    for name, (during, want_during, final, want_final) in results.items():
        assert short(during) == short(want_during), f"{name}: with a transaction open"
        assert short(final) == short(want_final), f"{name}: after the last commit"
        assert during == want_during and final == want_final, f"{name}: record values"
    assert short(ours[0]) == short(kafka[0]), "with a transaction open: broker under test vs Kafka"
    assert short(ours[2]) == short(kafka[2]), "at the end: broker under test vs Kafka"
    assert ours[0] == kafka[0] and ours[2] == kafka[2]
    # The 300 KB transaction rolled a segment in every partition on both.
    for b in (under_test, reference_kafka):
        for p in range(PARTITIONS):
            segs = list((b.log_dir / f"txn-diff-{p}").glob("*.log"))
            assert len(segs) >= 2, f"{b.kind}: partition {p} did not roll: {segs}"
