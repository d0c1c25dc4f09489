"""Helpers of the transactions suite: transactional producers (confluent-kafka), reading a topic
with one isolation level up to the end that level sees, and Kafka's DumpLogSegments.

Records are compared as (partition, offset, value) tuples, so an assertion names the exact
record that is missing or extra. Every wait has a deadline.
"""
import os
import time
import zipfile
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from helpers import deadline_after, unique
from kafka_tools import run_class

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
# Both brokers look for timed-out transactions every second (Kafka's default is 10 s).
BROKER_OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
# The partition of __transaction_state that coordinates a transactional.id (Kafka's 50).
TXN_STATE_PARTITIONS = 50


def txn_producer(bootstrap, transactional_id, **conf):
    """A librdkafka transactional producer with init_transactions() done."""
    base = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    base.update(conf)
    p = Producer(base)
    p.init_transactions(60)
    return p


class Sender:
    """Produces through one producer and remembers each acknowledged record as
    (partition, offset, value); `send` waits for the acknowledgement."""

    def __init__(self, producer, topic):
        self.producer, self.topic = producer, topic

    def send(self, partition, value, key=None, timestamp=0, timeout_s=60):
        box = []
        self.producer.produce(self.topic, value=value.encode(), key=(key or value).encode(),
                              partition=partition, timestamp=timestamp,
                              on_delivery=lambda err, msg: box.append((err, msg)))
        end = deadline_after(timeout_s)
        while not box:
            assert time.monotonic() < end, f"no delivery report for {value} in {timeout_s}s"
            self.producer.poll(0.05)
        err, msg = box[0]
        if err is not None:
            raise KafkaException(err)
        return (msg.partition(), msg.offset(), value)


def read(bootstrap, topic, partitions, isolation, timeout_s=60, settled=True):
    """{partition: [(partition, offset, value)]}: every record delivered from offset 0 to the end
    offset this isolation level sees (the last stable offset for read_committed, the high
    watermark otherwise), read with assign() until each partition reports its end.
    For read_committed, `settled` first waits until no transaction is open (last stable offset
    = high watermark everywhere): a commit returns before the broker has written its markers."""
    if isolation == READ_COMMITTED and settled:
        end = deadline_after(30)
        while True:
            lso = end_offsets(bootstrap, topic, partitions, READ_COMMITTED)
            hw = end_offsets(bootstrap, topic, partitions, READ_UNCOMMITTED)
            if lso == hw:
                break
            assert time.monotonic() < end, f"{topic}: a transaction still open after 30s: " \
                f"last stable offsets {lso}, high watermarks {hw}"
            time.sleep(0.1)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("txn-read"),
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "error"})
    out = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        todo = set(range(partitions))
        end = deadline_after(timeout_s)
        while todo:
            assert time.monotonic() < end, f"{isolation} read of {topic}: partitions {todo} did " \
                f"not reach their end in {timeout_s}s; got {out}"
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(m.partition())
                        continue
                    raise AssertionError(f"consumer error on {topic}/{m.partition()}: {m.error()}")
                out[m.partition()].append((m.partition(), m.offset(), m.value().decode()))
        for m in c.consume(num_messages=1000, timeout=0.5):  # nothing may follow the end
            if not m.error():
                out[m.partition()].append((m.partition(), m.offset(), m.value().decode() + " (past the end)"))
    finally:
        c.close()
    return out


def end_offsets(bootstrap, topic, partitions, isolation):
    """{partition: end offset} from ListOffsets(latest) with the isolation level."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("txn-end"),
                  "isolation.level": isolation})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)}
    finally:
        c.close()


def by_partition(records, partitions):
    """[(partition, offset, value)] -> {partition: [...] in offset order}."""
    out = {p: [] for p in range(partitions)}
    for r in records:
        out[r[0]].append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r[1])
    return out


def java_string_hash(s: str) -> int:
    """Java's String.hashCode of an ASCII string, as a signed 32-bit int."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(transactional_id: str) -> int:
    """The __transaction_state partition of a transactional.id: Kafka's Utils.abs(hash) % 50
    (Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % TXN_STATE_PARTITIONS


def _kafka_libs() -> Path:
    default = Path(__file__).resolve().parent.parent / ".cache" / "kafka" / "libs"
    return Path(os.environ.get("KAFKA_LIBS") or default)


def dump_log_segments_class() -> str:
    """DumpLogSegments moved from the Scala kafka.tools (4.1) to org.apache.kafka.tools (4.2+)."""
    for jar in _kafka_libs().glob("kafka-tools-*.jar"):
        with zipfile.ZipFile(jar) as z:
            if "org/apache/kafka/tools/DumpLogSegments.class" in z.namelist():
                return "org.apache.kafka.tools.DumpLogSegments"
    return "kafka.tools.DumpLogSegments"


def dump(files, *flags):
    """Runs DumpLogSegments on files; asserts exit 0; returns stdout."""
    res = run_class(dump_log_segments_class(), *flags, "--files", ",".join(str(f) for f in files))
    assert res.returncode == 0, f"DumpLogSegments {flags} exited {res.returncode}:\n" \
        f"{(res.stdout + res.stderr)[-4000:]}"
    return res.stdout
