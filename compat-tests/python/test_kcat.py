"""(d) kcat (Debian's, on librdkafka 2.0.2): produce key:value lines with each codec, read them
back, list metadata; and check on disk that the batches really are compressed (librdkafka
silently stops compressing when the broker's ApiVersions lacks Produce v0, KAFKA-18659)."""
import subprocess

import pytest

from helpers import CODECS, create_topic, unique
from segments import mostly_codec, partition_batches, records_by_codec

LINES = 3000
KCAT_TIMEOUT_S = 60


def kcat(*args, stdin=None):
    res = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=KCAT_TIMEOUT_S)
    assert res.returncode == 0, f"kcat {' '.join(args)} exited {res.returncode}:\n{res.stderr.decode()}"
    return res


def lines_for(codec):
    # Values may contain the ':' delimiter; only the first one separates the key.
    return b"".join(f"key-{i}:{codec} line {i}: {'x' * (i % 50)} {i * 7919 % 1000}\n".encode()
                    for i in range(LINES))


def produce_and_read(bootstrap, topic, codec):
    data = lines_for(codec)
    # A long linger makes few big batches: librdkafka leaves a batch uncompressed when that is
    # smaller, which happens to batches of a line or two.
    kcat("-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec,
         "-X", "acks=all", "-X", "linger.ms=200", stdin=data)
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
               "-f", "%k:%s\n").stdout
    return data, out


@pytest.mark.parametrize("codec", [c for c in CODECS if c != "none"])
def test_kcat_produce_consume(broker, codec):
    topic = unique(f"kcat-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    data, out = produce_and_read(broker.bootstrap, topic, codec)
    assert out.count(b"\n") == LINES
    assert out == data


def test_kcat_auto_created_topic(broker):
    """Producing to an unknown topic auto-creates it (Metadata with allow_auto_topic_creation)."""
    topic = unique("kcat-auto")
    data, out = produce_and_read(broker.bootstrap, topic, "lz4")
    assert out == data


def test_kcat_metadata(broker):
    topic = unique("kcat-meta")
    create_topic(broker.bootstrap, topic, 3)
    out = kcat("-b", broker.bootstrap, "-L", "-t", topic).stdout.decode()
    assert f'topic "{topic}" with 3 partitions:' in out, out
    for p in range(3):
        assert f"partition {p}, leader 1, replicas: 1, isrs: 1" in out, out
    assert f"broker 1 at {broker.bootstrap}" in out, out


@pytest.mark.control
def test_kcat_batches_are_compressed_on_disk(broker_factory):
    b = broker_factory()
    topics = {}
    for codec in CODECS:
        topics[codec] = unique(f"kcat-disk-{codec}")
        create_topic(b.bootstrap, topics[codec], 1)
        data, out = produce_and_read(b.bootstrap, topics[codec], codec)
        assert out == data
    b.stop()
    stored = {}  # kcat's -z codec -> {stored codec: batches}
    for codec, topic in topics.items():
        batches, trailing = partition_batches(b.partition_dir(topic, 0))
        assert not trailing, f"{codec}: bytes after the last batch: {trailing}"
        assert sum(x.record_count for x in batches) == LINES
        assert all(x.crc_ok for x in batches)
        stored[codec] = records_by_codec(batches)
    wrong = {c: got for c, got in stored.items() if not mostly_codec(got, c)}
    assert not wrong, f"records by stored codec, by kcat's -z codec: {wrong}"
