"""Shared helpers: topics, producing and consuming with confluent-kafka, comparing records.

Every wait here has a deadline; nothing loops forever.
"""
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def deadline_after(seconds: float) -> float:
    return time.monotonic() + seconds


def create_topic(bootstrap, name, partitions, config=None, timeout_s=30):
    """CreateTopics through the confluent AdminClient, then wait until every partition has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
    futures[name].result(timeout=timeout_s)
    wait_for_leaders(bootstrap, name, partitions, timeout_s)


def wait_for_leaders(bootstrap, topic, partitions, timeout_s=30):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    end = deadline_after(timeout_s)
    last = None
    while time.monotonic() < end:
        try:
            md = admin.list_topics(topic, timeout=5).topics.get(topic)
        except KafkaException as e:
            last = e
            time.sleep(0.2)
            continue
        last = md
        if md and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic}: not {partitions} partitions with leaders after "
                         f"{timeout_s}s; last metadata: {last}")


def produce_all(producer: Producer, topic, records, timeout_s=120):
    """Produce (partition, key, value, headers, timestamp_ms) tuples; return delivery reports
    [(error, partition, offset)] in send order. Fails if any delivery is missing at the end."""
    reports = [None] * len(records)

    def on_delivery(i):
        def cb(err, msg):
            reports[i] = (err, msg.partition(), msg.offset())
        return cb

    end = deadline_after(timeout_s)
    for i, (part, key, value, headers, ts) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=part, headers=headers,
                                 timestamp=ts or 0, on_delivery=on_delivery(i))
                break
            except BufferError:
                producer.poll(0.05)
                assert time.monotonic() < end, "producer queue stayed full until the deadline"
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(max(1.0, end - time.monotonic()))
    assert left == 0, f"{left} messages still undelivered after {timeout_s}s"
    missing = [i for i, r in enumerate(reports) if r is None]
    assert not missing, f"{len(missing)} delivery reports missing, first {missing[:5]}"
    return reports


def make_producer(bootstrap, **conf):
    """A confluent Producer with acks=all; `conf` adds or overrides librdkafka settings."""
    base = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    base.update(conf)
    return Producer(base)


def consume_partitions(bootstrap, topic, ends, start=0, timeout_s=120, **conf):
    """Read partitions from `start` (an offset, or a dict partition->offset) up to the given end
    offsets {partition: end} with assign(); return {partition: [Message]}.
    Fails on any consumer error, on a gap, or when the deadline passes."""
    starts = start if isinstance(start, dict) else {p: start for p in ends}
    base = {"bootstrap.servers": bootstrap, "group.id": unique("compat-assign"),
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "check.crcs": True, "auto.offset.reset": "error"}
    base.update(conf)
    c = Consumer(base)
    out = {p: [] for p in ends}
    try:
        todo = {p for p in ends if ends[p] > starts[p]}
        c.assign([TopicPartition(topic, p, starts[p]) for p in todo])
        end = deadline_after(timeout_s)
        while todo:
            assert time.monotonic() < end, (
                f"consume {topic}: deadline passed; still waiting on partitions "
                f"{ {p: (len(out[p]), ends[p] - starts[p]) for p in todo} } (got, wanted)")
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error on {topic}/{m.partition()}: {m.error()}")
                p = m.partition()
                if p not in todo:
                    continue
                want = starts[p] + len(out[p])
                assert m.offset() == want, (f"{topic}/{p}: expected offset {want}, "
                                            f"got {m.offset()} (gap or reorder)")
                out[p].append(m)
                if m.offset() + 1 >= ends[p]:
                    todo.discard(p)
    finally:
        c.close()
    return out


def watermarks(bootstrap, topic, partitions, timeout_s=30):
    """{partition: (low, high)} via ListOffsets, retried until the deadline (e.g. after a restart)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("compat-wm")})
    end = deadline_after(timeout_s)
    try:
        result = {}
        for p in range(partitions):
            while True:
                try:
                    result[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                    break
                except KafkaException as e:
                    if time.monotonic() > end:
                        raise AssertionError(f"watermarks of {topic}/{p}: {e}") from e
                    time.sleep(0.3)
        return result
    finally:
        c.close()


def msg_tuple(m):
    """A consumed confluent Message as (key, value, headers, timestamp_ms) with headers as a list."""
    return (m.key(), m.value(), list(m.headers() or []), m.timestamp()[1])


def assert_same_sequence(label, expected, got):
    """Element-wise comparison that reports the first difference instead of dumping everything."""
    for i, (e, g) in enumerate(zip(expected, got)):
        if e != g:
            raise AssertionError(f"{label}: first difference at index {i}:\n expected {e!r}\n"
                                 f"      got {g!r}")
    assert len(expected) == len(got), f"{label}: expected {len(expected)} items, got {len(got)}"
