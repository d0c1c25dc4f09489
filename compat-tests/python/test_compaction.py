"""Compaction, read back by real clients: a topic with cleanup.policy=compact, written in many
small time-rolled segments, is cleaned by the broker's log cleaner until each key's last record
is all that is left below the active segment, at its original offset, with the last round's
tombstone kept (delete.retention.ms is an hour). librdkafka and kafka-python both read the
cleaned log, offset gaps and all, and Kafka's DumpLogSegments finds every cleaned batch valid.
Runs the same against Apache Kafka, whose cleaner is what the expectations come from.
"""
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition

from helpers import create_topic, deadline_after, make_producer, produce_all, unique
from kafka_tools import dump_log_segments, parse_data_dump
from segments import segment_files

KEYS = 20
ROUNDS = 30
TOMBSTONED = b"k0"
BROKER = {"log.cleaner.backoff.ms": 200}
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": "100",
                "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3600000"}


def read_all_librdkafka(bootstrap, topic):
    """(offset, key, value) of every record from the start to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("compacted"),
                  "enable.auto.commit": False, "enable.partition.eof": True, "check.crcs": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out, end = [], deadline_after(60)
        while time.monotonic() < end:
            for m in c.consume(num_messages=1000, timeout=1.0):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    return out, high
                out.append((m.offset(), m.key(), m.value()))
        raise AssertionError(f"no end of partition within 60 s; read {len(out)} records")
    finally:
        c.close()


def read_all_kafka_python(bootstrap, topic, high):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=10_000)
    try:
        tp = KafkaPythonTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out = []
        for m in c:
            out.append((m.offset, m.key, m.value))
            if m.offset + 1 >= high:
                break
        return out
    finally:
        c.close()


def test_compacted_topic_keeps_the_last_record_of_each_key(broker_factory):
    broker = broker_factory(BROKER)
    topic = unique("compact")
    create_topic(broker.bootstrap, topic, 1, config=TOPIC_CONFIG)
    producer = make_producer(broker.bootstrap, **{"linger.ms": 0})
    last = {}  # key -> (offset, value) of its last record
    for round_ in range(ROUNDS):
        records = [(0, b"k%d" % k, None if (round_ == ROUNDS - 1 and b"k%d" % k == TOMBSTONED)
                    else b"%d-%d" % (round_, k), None, None) for k in range(KEYS)]
        for (err, _, offset), (_, key, value, _, _) in zip(produce_all(producer, topic, records), records):
            assert err is None, err
            last[key] = (offset, value)
        time.sleep(0.15)  # past segment.ms: the next round rolls a new segment
    # One more record rolls the last round out of the active segment, so all of it is cleanable.
    ((err, _, end_offset),) = produce_all(producer, topic, [(0, b"end", b"end", None, None)])
    assert err is None, err
    expected = sorted((offset, key, value) for key, (offset, value) in last.items())
    expected.append((end_offset, b"end", b"end"))

    deadline, got = deadline_after(90), None
    while time.monotonic() < deadline:
        got, high = read_all_librdkafka(broker.bootstrap, topic)
        if got == expected:
            break
        time.sleep(0.5)
    assert got == expected, (f"not compacted within 90 s: {len(got)} records, want {len(expected)};"
                             f" first {got[:5]}")
    assert high == end_offset + 1
    assert read_all_kafka_python(broker.bootstrap, topic, high) == expected

    producer.flush(10)
    del producer
    broker.stop()
    logs = segment_files(broker.partition_dir(topic, 0), ".log")
    data = parse_data_dump(dump_log_segments(logs, "--print-data-log", "--deep-iteration"))
    printed = [r for f in logs for r in data[str(f)]["records"]]
    assert [r["offset"] for r in printed] == [o for o, _, _ in expected]
    for f in logs:
        for batch in data[str(f)]["batches"]:
            assert batch["valid"] and batch["magic"] == 2, f"{f.name}: {batch}"
