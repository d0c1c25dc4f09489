"""kill -9 of the broker in the middle of transactions, with librdkafka's transactional producer.

Before the kill: producer A has committed four transactions, producer B has one open (its
records acknowledged), and producer C commits one transaction after another in a thread, so the
kill lands while C is sending or committing. The broker restarts on the same port and data.
Then B goes on with its transaction and commits it; a new instance of C's transactional.id
fences the old C (whose next transaction fails with librdkafka's fatal fenced error) and
commits one more. read_committed must then see exactly the committed transactions: all of A's
and B's, every C transaction whose commit returned, C's interrupted one either whole or not at
all, and the new instance's; read_uncommitted must still hold every acknowledged record.
"""
import threading
import time
import warnings

import pytest
from confluent_kafka import KafkaError, KafkaException

from helpers import create_topic, unique
from txn import (BROKER_OVERRIDES, READ_COMMITTED, READ_UNCOMMITTED, Sender, by_partition, read,
                 txn_producer)

PARTITIONS = 3


class Looper(threading.Thread):
    """Producer C: transactions of 6 records, committed one after the other until told to stop.
    `txns` holds each transaction's acknowledged records and how it ended."""

    def __init__(self, sender):
        super().__init__(daemon=True)
        self.sender, self.txns, self.stop, self.error = sender, [], threading.Event(), None

    def committed_count(self):
        return sum(1 for t in self.txns if t["state"] == "committed")

    def run(self):
        p = self.sender.producer
        n = 0
        try:
            while not self.stop.is_set():
                t = {"records": [], "state": "sending"}
                self.txns.append(t)
                p.begin_transaction()
                for i in range(6):
                    t["records"].append(self.sender.send(i % PARTITIONS, f"c{n}-{i}", timeout_s=90))
                t["state"] = "committing"
                p.commit_transaction(90)
                t["state"] = "committed"
                n += 1
        except KafkaException as e:
            self.error = e.args[0]
            self.txns[-1]["state"] = f"failed: {self.error}"


@pytest.mark.control
def test_kill9_in_the_middle_of_transactions(broker_factory):
    broker = broker_factory(BROKER_OVERRIDES)
    topic = unique("txn-crash")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    visible, acked = [], []

    a = Sender(txn_producer(broker.bootstrap, unique("crash-a")), topic)
    for t in range(4):
        a.producer.begin_transaction()
        sent = [a.send((i + t) % PARTITIONS, f"a{t}-{i}") for i in range(6)]
        a.producer.commit_transaction(60)
        visible += sent
        acked += sent
    # B's and C's transactions may stay open 5 minutes: however long the restart takes, only
    # the new instance of C's id ends one of them, not the transaction timeout.
    long = {"transaction.timeout.ms": 300000}
    b = Sender(txn_producer(broker.bootstrap, unique("crash-b"), **long), topic)
    b.producer.begin_transaction()
    b_records = [b.send(i % PARTITIONS, f"b-{i}") for i in range(6)]
    c_id = unique("crash-c")
    looper = Looper(Sender(txn_producer(broker.bootstrap, c_id, **long), topic))
    looper.start()
    end = time.monotonic() + 60
    while looper.committed_count() < 5:
        assert looper.is_alive() and time.monotonic() < end, \
            f"producer C committed {looper.committed_count()} transactions; error {looper.error}"
        time.sleep(0.01)

    broker.kill9()
    looper.stop.set()
    broker.start()
    looper.join(120)
    assert not looper.is_alive(), "producer C's call did not return within 120s of the restart"

    # B goes on with the transaction it had open at the kill.
    b_records += [b.send(i % PARTITIONS, f"b-after-{i}") for i in range(3)]
    b.producer.commit_transaction(60)
    visible += b_records
    acked += b_records

    # A new instance of C's transactional.id fences the old one.
    c2 = Sender(txn_producer(broker.bootstrap, c_id), topic)
    old = looper.sender.producer
    with pytest.raises(KafkaException) as fenced:
        old.begin_transaction()
        looper.sender.send(0, "zombie", timeout_s=30)
        old.commit_transaction(30)
    assert fenced.value.args[0].code() == KafkaError._FENCED and fenced.value.args[0].fatal(), \
        f"the old C after the new instance's init: {fenced.value.args[0]}"
    c2.producer.begin_transaction()
    c2_records = [c2.send(i % PARTITIONS, f"c2-{i}") for i in range(3)]
    c2.producer.commit_transaction(60)

    undecided = []
    for t in looper.txns:
        acked += t["records"]
        if t["state"] == "committed":
            visible += t["records"]
        else:
            undecided.append(t)
    assert len(undecided) <= 1, f"only the transaction the kill interrupted may be undecided: {undecided}"
    visible += c2_records

    got = read(broker.bootstrap, topic, PARTITIONS, READ_COMMITTED)
    seen = {r for rs in got.values() for r in rs}
    for t in undecided:  # whole or not at all
        present = [r for r in t["records"] if r in seen]
        assert present in ([], t["records"]), f"interrupted transaction ({t['state']}) partly visible: " \
            f"{present} of {t['records']}"
        visible += present
    assert got == by_partition(visible, PARTITIONS), "read_committed after the kill"

    everything = read(broker.bootstrap, topic, PARTITIONS, READ_UNCOMMITTED)
    stored = {r for rs in everything.values() for r in rs}
    lost = [r for r in acked if r not in stored]
    assert not lost, f"acknowledged records lost: {lost[:10]}"
    print(f"producer C: {looper.committed_count()} transactions committed before the kill; "
          f"interrupted: {[t['state'] for t in undecided]}")
    for p in (a.producer, b.producer, c2.producer):
        p.close()
    with warnings.catch_warnings():  # the fenced producer cannot abort on close, and says so
        warnings.simplefilter("ignore")
        old.close()
