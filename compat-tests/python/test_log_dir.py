"""The log directory, file for file: the broker under test and a reference Apache Kafka 4.4 run
the same workload, stop cleanly, and their log directories are compared.

Workload (identical on both brokers; every batch holds one record whose timestamp is one
millisecond past the previous one, so batch sizes, rolls and index entries do not depend on
timing):
  - topic `logdir` with 2 partitions and segment.bytes=1048576 (Kafka's minimum): partition 0
    gets 120 records of 10 KB from an idempotent producer, which rolls a segment after about
    100 of them; partition 1 gets 50 small records from the idempotent producer and 10 from a
    plain one (acks=1);
  - a compacted topic `logdir-compact` (one partition) gets 30 keyed records, 5 keys;
  - DeleteRecords: partition 1 to offset 20 (inside its only segment), partition 0 to offset
    110 (past the roll), after which retention (every second, no file-delete delay) deletes
    partition 0's first segment;
  - a clean shutdown (SIGTERM).

Compared afterwards:
  - the files at the top of the log directory. Exempt, because only KRaft's controller writes
    them: `__cluster_metadata-0/` and `bootstrap.checkpoint`. Files sluice writes where Kafka
    keeps the same data in its metadata log are expected on sluice only: SLUICE_ONLY_FILES;
  - in every partition directory: the set of files, the `.log`, `.index`, `.timeindex` and
    `.snapshot` sizes, `partition.metadata` byte for byte with the topic id masked, and
    `leader-epoch-checkpoint` byte for byte;
  - the offset checkpoints (recovery point, log start offset, replication offset, cleaner
    offset): the version line and the set of entries (Kafka writes them in hash order);
  - `.kafka_cleanshutdown`: the same JSON keys and version (the broker epoch is Kafka's own);
  - `meta.properties`: the same keys, `version` and `node.id`.

Under KAFKA_MANAGED=1 the broker under test is Kafka too, which checks the test itself: two
Kafka runs must agree.
"""
import json
import os
import re
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from brokers import Broker
from helpers import create_topic, make_producer

pytestmark = pytest.mark.control

TOPIC = "logdir"
COMPACTED = "logdir-compact"
SEGMENT_BYTES = 1048576
# Retention runs every second and deletes at once, so DeleteRecords past a roll removes the
# segment before the shutdown.
OVERRIDES = {"log.retention.check.interval.ms": "1000", "log.segment.delete.delay.ms": "0"}
# Written by KRaft's controller only; sluice has none.
KRAFT_ONLY_FILES = {"__cluster_metadata-0", "bootstrap.checkpoint"}
# sluice's own files (docs/log-format.md §13): topic configs and producer-id blocks, which Kafka
# keeps in its metadata log.
SLUICE_ONLY_FILES = {"sluice-topic-configs", "sluice-producer-id-block"}
OFFSET_CHECKPOINTS = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "replication-offset-checkpoint", "cleaner-offset-checkpoint"]


@pytest.fixture
def reference_kafka(tmp_path):
    """Apache Kafka (the pinned 4.4.0), whatever the broker under test is."""
    if os.environ.get("KAFKA_BOOTSTRAP") and not os.environ.get("SLUICE_BIN") \
            and os.environ.get("KAFKA_MANAGED") != "1":
        pytest.skip("needs brokers this harness starts itself")
    kafka = Broker("kafka", root=tmp_path / "reference-kafka", overrides=OVERRIDES)
    try:
        yield kafka.start()
    finally:
        kafka.stop()


def run_workload(broker):
    bs = broker.bootstrap
    create_topic(bs, TOPIC, 2, config={"segment.bytes": str(SEGMENT_BYTES)})
    create_topic(bs, COMPACTED, 1, config={"cleanup.policy": "compact"})
    idempotent = make_producer(bs, **{"enable.idempotence": True})
    plain = make_producer(bs, **{"enable.idempotence": False, "acks": "1"})
    # Recent timestamps, or time retention (7 days) would delete the segments.
    first_timestamp_ms = int(time.time() * 1000)
    sent = [0]

    def send(producer, topic, partition, key, value):
        # One record per batch: flush after each.
        ts = first_timestamp_ms + sent[0]
        sent[0] += 1
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=ts)
        assert producer.flush(30) == 0, f"{topic}/{partition}: not delivered"

    for i in range(120):
        send(idempotent, TOPIC, 0, b"k%03d" % i, bytes([65 + i % 26]) * 10_000)
    for i in range(50):
        send(idempotent, TOPIC, 1, None, b"small-%03d" % i)
    for i in range(10):
        send(plain, TOPIC, 1, None, b"plain-%03d" % i)
    for i in range(30):
        send(idempotent, COMPACTED, 0, b"key-%d" % (i % 5), b"value-%03d" % i)

    admin = AdminClient({"bootstrap.servers": bs})
    for partition, offset in [(1, 20), (0, 110)]:
        futures = admin.delete_records([TopicPartition(TOPIC, partition, offset)],
                                       request_timeout=30, operation_timeout=30)
        for future in futures.values():
            assert future.result(timeout=30).low_watermark == offset
    first_segment = broker.partition_dir(TOPIC, 0) / f"{0:020d}.log"
    deadline = time.monotonic() + 30
    while first_segment.exists():
        assert time.monotonic() < deadline, f"{broker.kind}: retention kept {first_segment}"
        time.sleep(0.2)
    code = broker.stop()
    assert code in (None, 0), f"{broker.kind} exited with {code}"


def listing(path):
    return {entry.name for entry in path.iterdir()}


def read_offset_checkpoint(path):
    """(version line, {(topic, partition): offset}) as Kafka reads it; a 0-byte file (which
    Kafka creates before its first write) has no entries."""
    text = path.read_text()
    if text == "":
        return None, {}
    lines = text.split("\n")
    assert lines[-1] == "", f"{path}: does not end in a newline: {text!r}"
    count = int(lines[1])
    entries = {}
    for line in lines[2:2 + count]:
        topic, partition, offset = line.split(" ")
        entries[(topic, int(partition))] = int(offset)
    assert len(lines) == 2 + count + 1, f"{path}: {count} entries announced: {text!r}"
    return lines[0], entries


def properties(path):
    props = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith(("#", "!")):
            key, value = line.split("=", 1)
            props[key] = value
    return props


def mask_topic_id(data: bytes) -> bytes:
    return re.sub(rb"topic_id: [A-Za-z0-9_-]{22}", b"topic_id: <id>", data)


def test_log_directory_matches_kafkas(broker_factory, reference_kafka):
    under_test = broker_factory(OVERRIDES)
    run_workload(under_test)
    run_workload(reference_kafka)
    ours, kafka = under_test.log_dir, reference_kafka.log_dir

    sluice_only = SLUICE_ONLY_FILES if under_test.kind == "sluice" else set()
    top_ours = listing(ours) - sluice_only - KRAFT_ONLY_FILES
    top_kafka = listing(kafka) - KRAFT_ONLY_FILES
    assert sluice_only <= listing(ours), f"expected sluice's own files: {sorted(listing(ours))}"
    assert top_ours == top_kafka, (f"only here: {sorted(top_ours - top_kafka)}, "
                                   f"only on Kafka: {sorted(top_kafka - top_ours)}")

    for name in OFFSET_CHECKPOINTS:
        version_ours, entries_ours = read_offset_checkpoint(ours / name)
        version_kafka, entries_kafka = read_offset_checkpoint(kafka / name)
        assert version_ours in (None, "0") and version_kafka in (None, "0"), name
        assert entries_ours == entries_kafka, f"{name}: {entries_ours} != Kafka's {entries_kafka}"
    # The workload leaves these, on Kafka, as asserted here: the test would pass vacuously if
    # the brokers wrote nothing.
    _, starts = read_offset_checkpoint(kafka / "log-start-offset-checkpoint")
    assert starts == {(TOPIC, 0): 110, (TOPIC, 1): 20}, starts

    marker_ours = json.loads((ours / ".kafka_cleanshutdown").read_text())
    marker_kafka = json.loads((kafka / ".kafka_cleanshutdown").read_text())
    assert marker_ours.keys() == marker_kafka.keys()
    assert marker_ours["version"] == marker_kafka["version"]

    meta_ours, meta_kafka = properties(ours / "meta.properties"), properties(kafka / "meta.properties")
    assert meta_ours.keys() == meta_kafka.keys(), (meta_ours, meta_kafka)
    for key in ["version", "node.id"]:
        assert meta_ours[key] == meta_kafka[key], key

    partitions = sorted(p for p in top_kafka if (kafka / p).is_dir())
    assert partitions == sorted([f"{TOPIC}-0", f"{TOPIC}-1", f"{COMPACTED}-0"]), partitions
    for partition in partitions:
        files_ours, files_kafka = listing(ours / partition), listing(kafka / partition)
        assert files_ours == files_kafka, (f"{partition}: only here: {sorted(files_ours - files_kafka)}, "
                                           f"only on Kafka: {sorted(files_kafka - files_ours)}")
        for name in sorted(files_kafka):
            if name.endswith((".log", ".index", ".timeindex", ".snapshot")):
                size_ours = (ours / partition / name).stat().st_size
                size_kafka = (kafka / partition / name).stat().st_size
                assert size_ours == size_kafka, f"{partition}/{name}: {size_ours} != Kafka's {size_kafka}"
        metadata_ours = (ours / partition / "partition.metadata").read_bytes()
        metadata_kafka = (kafka / partition / "partition.metadata").read_bytes()
        assert mask_topic_id(metadata_ours) == mask_topic_id(metadata_kafka), (metadata_ours, metadata_kafka)
        epochs_ours = (ours / partition / "leader-epoch-checkpoint").read_bytes()
        epochs_kafka = (kafka / partition / "leader-epoch-checkpoint").read_bytes()
        assert epochs_ours == epochs_kafka, f"{partition}: {epochs_ours!r} != Kafka's {epochs_kafka!r}"
    # What Kafka wrote, so a change in Kafka's behaviour shows up here rather than as a mystery.
    assert (kafka / f"{TOPIC}-1" / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n0 20\n"
    assert (kafka / f"{TOPIC}-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n0 110\n"
