"""(a) confluent-kafka (librdkafka) produce -> consume round trip, one topic per codec."""
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from helpers import (CODECS, assert_same_sequence, consume_partitions, create_topic, make_producer,
                     msg_tuple, produce_all, unique)
from records import expected_by_partition, record

PARTITIONS = 4
RECORDS = 100_000


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(broker, codec):
    topic = unique(f"ck-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = [record(i, PARTITIONS) for i in range(RECORDS)]

    producer = make_producer(broker.bootstrap, **{"compression.type": codec})
    reports = produce_all(producer, topic, records)

    errors = [(i, r[0]) for i, r in enumerate(reports) if r[0] is not None]
    assert not errors, f"{len(errors)} deliveries failed, first: {errors[:3]}"
    # Each partition's acknowledged offsets are 0..n-1 in send order.
    acked = {p: [] for p in range(PARTITIONS)}
    for (_, part, offset), rec in zip(reports, records):
        assert part == rec[0]
        acked[part].append(offset)
    for p, offsets in acked.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: acked offsets not 0..n-1"

    ends = {p: len(acked[p]) for p in acked}
    got = consume_partitions(broker.bootstrap, topic, ends)
    expected = expected_by_partition(records, PARTITIONS)
    for p in range(PARTITIONS):
        assert [m.offset() for m in got[p]] == list(range(ends[p]))
        assert all(m.timestamp()[0] == TIMESTAMP_CREATE_TIME for m in got[p])
        assert_same_sequence(f"{codec} partition {p}", expected[p], [msg_tuple(m) for m in got[p]])
