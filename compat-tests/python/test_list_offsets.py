"""(c) ListOffsets: by timestamp (both clients), earliest/latest, and max-timestamp (KIP-734).

Partition 0 gets 12 records with timestamps T0 + 1000*i: records 0-3 and 8-11 one per batch,
records 4-7 together in one batch (so a lookup must find a record inside a batch).
Partition 1 stays empty.
"""
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from helpers import create_topic, make_producer, unique
from records import T0_MS

N = 12


def ts(i):
    return T0_MS + 1000 * i


# (target timestamp, expected offset or None when no record has a timestamp >= target)
CASES = [
    (ts(0) - 60_000, 0),   # before everything
    (ts(0), 0),            # exactly on a record
    (ts(0) + 500, 1),      # between two single-record batches
    (ts(3), 3),
    (ts(4) + 500, 5),      # between two records of the same batch
    (ts(5), 5),            # exactly on a record inside a batch
    (ts(7) + 1, 8),        # just after the batch's last record
    (ts(10) + 999, 11),
    (ts(11), 11),          # the last record
    (ts(11) + 1, None),    # after the end
]


@pytest.fixture(scope="module")
def topic(broker):
    name = unique("list-offsets")
    create_topic(broker.bootstrap, name, 2)
    p = make_producer(broker.bootstrap, **{"linger.ms": 1000})
    errors = []

    def cb(err, msg):
        if err:
            errors.append(err)

    for i in range(N):
        p.produce(name, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=0,
                  timestamp=ts(i), on_delivery=cb)
        if not 4 <= i <= 6:  # records 4..7 are flushed together, in one batch
            assert p.flush(30) == 0
    assert not errors, errors
    return name


def test_confluent_offsets_for_times(broker, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("lo")})
    try:
        for target, want in CASES:
            [res] = c.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
            assert res.error is None, res.error
            assert res.offset == (-1 if want is None else want), f"timestamp {target - T0_MS:+} ms"
        [empty] = c.offsets_for_times([TopicPartition(topic, 1, ts(0))], timeout=10)
        assert empty.offset == -1, "an empty partition has no offset for any timestamp"
    finally:
        c.close()


def test_kafka_python_offsets_for_times(broker, topic):
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = KpTopicPartition(topic, 0)
    try:
        for target, want in CASES:
            res = c.offsets_for_times({tp: target})[tp]
            if want is None:
                assert res is None, f"timestamp {target - T0_MS:+} ms: expected None, got {res}"
            else:
                assert (res.offset, res.timestamp) == (want, ts(want)), f"timestamp {target - T0_MS:+} ms"
        tp1 = KpTopicPartition(topic, 1)
        assert c.offsets_for_times({tp1: ts(0)})[tp1] is None
        assert c.beginning_offsets([tp, tp1]) == {tp: 0, tp1: 0}
        assert c.end_offsets([tp, tp1]) == {tp: N, tp1: 0}
    finally:
        c.close()


def test_watermarks(broker, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("lo")})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, N)
        assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 0)
    finally:
        c.close()


def admin_list_offsets(bootstrap, topic, spec):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=15)


def test_admin_earliest_latest_timestamp(broker, topic):
    assert admin_list_offsets(broker.bootstrap, topic, OffsetSpec.earliest()).offset == 0
    assert admin_list_offsets(broker.bootstrap, topic, OffsetSpec.latest()).offset == N
    res = admin_list_offsets(broker.bootstrap, topic, OffsetSpec.for_timestamp(ts(4) + 500))
    assert (res.offset, res.timestamp) == (5, ts(5))


def test_admin_max_timestamp(broker, topic):
    """OffsetSpec.max_timestamp() = ListOffsets timestamp -3, needs ListOffsets v7 (KIP-734)."""
    res = admin_list_offsets(broker.bootstrap, topic, OffsetSpec.max_timestamp())
    assert (res.offset, res.timestamp) == (N - 1, ts(N - 1))
