"""(b) kafka-python produce -> consume round trip, one topic per codec.

kafka-python refuses None header values in send(), so these records carry no null header value.
Its producer is idempotent by default (InitProducerId); the core tests turn that off and
test_default_producer_settings covers the default on its own.
"""
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from helpers import CODECS, assert_same_sequence, deadline_after, unique, wait_for_leaders
from records import expected_by_partition, record
from segments import mostly_codec, partition_batches, records_by_codec

PARTITIONS = 4
RECORDS = 100_000


def create_topic_kp(bootstrap, topic, partitions):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                            timeout_ms=30000)
    finally:
        admin.close()
    wait_for_leaders(bootstrap, topic, partitions)


def produce_kp(producer, topic, records, timeout_s=120):
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=p, timestamp_ms=ts)
               for p, k, v, h, ts in records]
    producer.flush(timeout=timeout_s)
    return [f.get(timeout=1) for f in futures]  # raises the delivery error, if any


def consume_kp(bootstrap, topic, ends, timeout_s=120):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", check_crcs=True)
    out = {p: [] for p in ends}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        end = deadline_after(timeout_s)
        while any(len(out[p]) < ends[p] for p in ends):
            assert time.monotonic() < end, f"kafka-python consume {topic}: deadline passed " \
                f"{ {p: (len(out[p]), ends[p]) for p in ends} }"
            for tp, msgs in consumer.poll(timeout_ms=1000, max_records=5000).items():
                for m in msgs:
                    assert m.offset == len(out[tp.partition]), \
                        f"{topic}/{tp.partition}: expected offset {len(out[tp.partition])}, got {m.offset}"
                    out[tp.partition].append(m)
    finally:
        consumer.close()
    return out


def roundtrip(bootstrap, codec, count, **producer_conf):
    """Produce `count` records to a new 4-partition topic, read them back, compare; -> topic."""
    topic = unique(f"kp-{codec}")
    create_topic_kp(bootstrap, topic, PARTITIONS)
    records = [record(i, PARTITIONS, null_header_values=False) for i in range(count)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, **producer_conf)
    try:
        metas = produce_kp(producer, topic, records)
    finally:
        producer.close(timeout=10)
    acked = {p: [m.offset for m in metas if m.partition == p] for p in range(PARTITIONS)}
    for p, offsets in acked.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: acked offsets not 0..n-1"

    got = consume_kp(bootstrap, topic, {p: len(acked[p]) for p in acked})
    expected = expected_by_partition(records, PARTITIONS)
    for p in range(PARTITIONS):
        assert all(m.timestamp_type == 0 for m in got[p]), "expected CreateTime records"
        assert_same_sequence(f"{codec} partition {p}", expected[p],
                             [(m.key, m.value, list(m.headers), m.timestamp) for m in got[p]])
    return topic


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(broker, codec):
    roundtrip(broker.bootstrap, codec, RECORDS, enable_idempotence=False, acks="all",
              compression_type=None if codec == "none" else codec)


def test_default_producer_settings(broker):
    """All producer defaults: idempotent (InitProducerId + sequence numbers), acks=all."""
    roundtrip(broker.bootstrap, "default", 5_000)


@pytest.mark.control
def test_kafka_python_batches_are_compressed_on_disk(broker_factory):
    """kafka-python compresses whatever the broker advertises (librdkafka may not: see test_kcat),
    so this is where the broker surely receives, stores and serves lz4 batches."""
    b = broker_factory()
    topics = {codec: roundtrip(b.bootstrap, codec, 2000, enable_idempotence=False,
                               compression_type=None if codec == "none" else codec)
              for codec in CODECS}
    b.stop()
    stored = {}
    for codec, topic in topics.items():
        batches = []
        for p in range(PARTITIONS):
            found, trailing = partition_batches(b.partition_dir(topic, p))
            assert not trailing, f"{codec}/{p}: bytes after the last batch: {trailing}"
            batches += found
        assert sum(x.record_count for x in batches) == 2000 and all(x.crc_ok for x in batches)
        stored[codec] = records_by_codec(batches)
    wrong = {c: got for c, got in stored.items() if not mostly_codec(got, c)}
    assert not wrong, f"records by stored codec, by kafka-python compression_type: {wrong}"
