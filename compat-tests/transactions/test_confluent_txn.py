"""confluent-kafka (librdkafka) transactions: commits and aborts as read_committed and
read_uncommitted consumers see them, and a consume-transform-produce loop that sends its input
offsets with each transaction (send_offsets_to_transaction) and aborts some of them.
"""
import time

from confluent_kafka import Consumer, TopicPartition

from helpers import create_topic, deadline_after, make_producer, unique
from txn import (BROKER_OVERRIDES, READ_COMMITTED, READ_UNCOMMITTED, Sender, by_partition,
                 end_offsets, read, txn_producer)

PARTITIONS = 3


def test_commit_and_abort_as_each_isolation_level_sees_them(broker):
    topic = unique("txn-vis")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    txn = Sender(txn_producer(broker.bootstrap, unique("vis")), topic)
    plain = Sender(make_producer(broker.bootstrap, **{"enable.idempotence": True}), topic)
    committed, everything = [], []
    for t, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        txn.producer.begin_transaction()
        sent = [txn.send((i + t) % PARTITIONS, f"t{t}-{outcome}-{i}") for i in range(9 + t)]
        if outcome == "commit":
            txn.producer.commit_transaction(60)
            committed += sent
        else:
            txn.producer.abort_transaction(60)
        everything += sent
        for p in range(PARTITIONS):
            r = plain.send(p, f"plain-{t}-{p}")
            committed.append(r)
            everything.append(r)

    txn.producer.begin_transaction()
    open_ = [txn.send(i % PARTITIONS, f"open-{i}") for i in range(6)]
    first_open = by_partition(open_, PARTITIONS)
    lso = end_offsets(broker.bootstrap, topic, PARTITIONS, READ_COMMITTED)
    hw = end_offsets(broker.bootstrap, topic, PARTITIONS, READ_UNCOMMITTED)
    assert lso == {p: first_open[p][0][1] for p in range(PARTITIONS)}, "last stable offsets"
    assert hw == {p: first_open[p][-1][1] + 1 for p in range(PARTITIONS)}, "high watermarks"
    assert read(broker.bootstrap, topic, PARTITIONS, READ_COMMITTED, settled=False) == \
        by_partition(committed, PARTITIONS)
    assert read(broker.bootstrap, topic, PARTITIONS, READ_UNCOMMITTED) == \
        by_partition(everything + open_, PARTITIONS)

    txn.producer.commit_transaction(60)
    assert read(broker.bootstrap, topic, PARTITIONS, READ_COMMITTED) == \
        by_partition(committed + open_, PARTITIONS)
    assert read(broker.bootstrap, topic, PARTITIONS, READ_UNCOMMITTED) == \
        by_partition(everything + open_, PARTITIONS)
    # The commit marker takes one offset after the last record of each partition.
    end = end_offsets(broker.bootstrap, topic, PARTITIONS, READ_COMMITTED)
    assert end == {p: first_open[p][-1][1] + 2 for p in range(PARTITIONS)}
    assert end == end_offsets(broker.bootstrap, topic, PARTITIONS, READ_UNCOMMITTED)
    txn.producer.close()
    plain.producer.close()


def test_consume_transform_produce_with_offsets_in_the_transaction(broker):
    src, dst, group = unique("ctp-in"), unique("ctp-out"), unique("ctp-group")
    n = 400
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    feeder = make_producer(broker.bootstrap)
    for i in range(n):
        feeder.produce(src, value=f"in-{i}".encode(), partition=i % 2)
    assert feeder.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "isolation.level": READ_COMMITTED, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    producer = txn_producer(broker.bootstrap, unique("ctp"))
    committed = {0: 0, 1: 0}  # the positions our last committed transaction stored
    transactions = aborted = 0
    try:
        consumer.subscribe([src])
        end = deadline_after(120)
        while sum(committed.values()) < n:
            assert time.monotonic() < end, f"the loop committed {committed} of {n} in 120s"
            msgs = [m for m in consumer.consume(num_messages=40, timeout=0.5) if not m.error()]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, value=b"out-" + m.value(), partition=m.partition())
            # Wait for the output to be acknowledged: librdkafka drops what it has not sent yet
            # when the transaction is aborted, and the aborted output must be in the log.
            assert producer.flush(60) == 0
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
            transactions += 1
            if transactions % 3 == 2:
                producer.abort_transaction(60)
                aborted += 1
                for tp in positions:  # redo the batch
                    consumer.seek(TopicPartition(src, tp.partition, committed[tp.partition]))
            else:
                producer.commit_transaction(60)
                for tp in positions:
                    if tp.offset >= 0:
                        committed[tp.partition] = tp.offset
        # The group's committed offsets are the ones the committed transactions carried.
        stored = consumer.committed([TopicPartition(src, p) for p in range(2)], timeout=30)
        assert {tp.partition: tp.offset for tp in stored} == {0: n // 2, 1: n // 2}
    finally:
        consumer.close()
    assert aborted > 0
    got = read(broker.bootstrap, dst, 2, READ_COMMITTED)
    for p in range(2):
        assert [v for _, _, v in got[p]] == [f"out-in-{i}" for i in range(p, n, 2)], \
            f"output partition {p}: each input exactly once, in order"
    raw = read(broker.bootstrap, dst, 2, READ_UNCOMMITTED)
    assert sum(len(v) for v in raw.values()) > n, "read_uncommitted also sees the aborted output"
    producer.close()
    feeder.close()

