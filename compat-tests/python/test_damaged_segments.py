"""(f3) Damage segment files of a kill -9'd broker, restart, and check what it serves.

Every partition gets flushed, acknowledged data over several 1 MiB segments, then one kind of
damage each:
  p0 garbage appended to the active .log        p1 the last batch truncated in half
  p2 4096 zero bytes appended to the active .log p3 the active .index zero-filled
  p4 .index and .timeindex deleted (first and active segment)
After restart: each partition serves exactly the records it should (p1 loses the torn batch,
nothing else is lost), reads from offsets in the middle work, timestamp lookups are exact,
producing continues at the right offsets, and after a graceful stop Kafka's DumpLogSegments
finds the indexes consistent.
"""
import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from helpers import create_topic, deadline_after, make_producer, produce_all, unique
from kafka_tools import dump_log_segments
from segments import read_batches, segment_files
from test_crash import key, timestamp, value, verify_prefix

PARTITIONS = 5
PER_PARTITION = 7000  # ~2.1 MB per partition: 3 segments of 1 MiB
MORE = 100


def records(p, start, count):
    return [(p, key(p, s), value(p, s), None, timestamp(s)) for s in range(start, start + count)]


def damage(b, topic):
    """Apply one damage per partition; return {partition: records expected to survive}."""
    expected = {p: PER_PARTITION for p in range(PARTITIONS)}
    d = [b.partition_dir(topic, p) for p in range(PARTITIONS)]
    active = [segment_files(x, ".log")[-1] for x in d]
    with open(active[0], "ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 256)
    batches, trailing = read_batches(active[1])
    assert batches and not trailing, f"unexpected active segment of p1: {trailing}"
    last = batches[-1]
    os.truncate(active[1], last.position + last.size // 2)
    expected[1] = last.base_offset
    with open(active[2], "ab") as f:
        f.write(bytes(4096))
    index3 = active[3].with_suffix(".index")
    index3.write_bytes(bytes(index3.stat().st_size))
    first4 = segment_files(d[4], ".log")[0]
    for seg in {first4, active[4]}:
        seg.with_suffix(".index").unlink()
        seg.with_suffix(".timeindex").unlink()
    return expected


def first_messages(consumer, topic, starts, timeout_s=30):
    """{partition: first message fetched} after assign() at the given {partition: offset}."""
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    got, end = {}, deadline_after(timeout_s)
    while len(got) < len(starts):
        assert time.monotonic() < end, f"{topic}: nothing fetched from {starts} for {set(starts) - set(got)}"
        for m in consumer.consume(num_messages=100, timeout=1.0):
            assert not m.error(), f"{topic}: {m.error()}"
            got.setdefault(m.partition(), m)
    return got


def check_random_access(bootstrap, topic, ends):
    """Fetch from offsets in the middle (index lookups) and look up timestamps (time index)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("damage"),
                  "enable.auto.commit": False, "check.crcs": True, "auto.offset.reset": "error"})
    try:
        for fraction in (0, 1 / 3, 1 / 2, 1):
            starts = {p: max(1, min(n - 1, int(n * fraction))) for p, n in ends.items()}
            for p, m in first_messages(c, topic, starts).items():
                seq = starts[p]
                assert (m.offset(), m.key(), m.value()) == (seq, key(p, seq), value(p, seq))
            for target_of in (timestamp, lambda seq: timestamp(seq) - 5):
                tps = [TopicPartition(topic, p, target_of(seq)) for p, seq in starts.items()]
                for r in c.offsets_for_times(tps, timeout=10):
                    assert r.offset == starts[r.partition], \
                        f"partition {r.partition}: timestamp lookup gave {r.offset}, not {starts[r.partition]}"
    finally:
        c.close()


@pytest.mark.control
def test_damaged_segments_after_kill9(broker_factory):
    b = broker_factory({"log.segment.bytes": 1048576, "log.index.interval.bytes": 4096,
                        "log.flush.interval.messages": 1})
    topic = unique("damage")
    create_topic(b.bootstrap, topic, PARTITIONS)
    producer = make_producer(b.bootstrap, **{"batch.size": 16384})
    recs = [r for p in range(PARTITIONS) for r in records(p, 0, PER_PARTITION)]
    reports = produce_all(producer, topic, recs)
    assert all(err is None for err, _, _ in reports)
    del producer
    b.kill9()

    for p in range(PARTITIONS):
        assert len(segment_files(b.partition_dir(topic, p), ".log")) >= 2, "need several segments"
    expected = damage(b, topic)
    b.start()

    ends = verify_prefix(b.bootstrap, topic, PARTITIONS)
    assert ends == expected, "records served after restart (partition: count) vs expected"
    check_random_access(b.bootstrap, topic, ends)

    producer = make_producer(b.bootstrap)
    more = [r for p in range(PARTITIONS) for r in records(p, ends[p], MORE)]
    reports = produce_all(producer, topic, more)
    del producer
    for (err, p, offset), rec in zip(reports, more):
        assert err is None and p == rec[0]
        assert rec[1] == key(p, offset), f"partition {p}: new record landed at offset {offset}"
    assert verify_prefix(b.bootstrap, topic, PARTITIONS) == {p: n + MORE for p, n in ends.items()}

    b.stop()
    indexes = [f for p in range(PARTITIONS) for suffix in (".index", ".timeindex")
               for f in segment_files(b.partition_dir(topic, p), suffix)]
    dump_log_segments(indexes, "--verify-index-only")
    dump_log_segments(indexes, "--index-sanity-check")
