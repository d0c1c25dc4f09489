"""(e) Kafka's DumpLogSegments reads the broker's segments, indexes and time indexes.

Small segments (1 MiB) and a dense index (an entry per 4 KiB) so every partition has several
segments and many index entries. Each codec writes one phase of records. After a graceful stop:
  --verify-index-only and a plain index dump: no mismatch, entries as dense as configured;
  --index-sanity-check: every index passes the check Kafka runs at startup;
  --print-data-log --deep-iteration: every batch valid, records exactly what was produced.
"""
import random

import pytest

from helpers import CODECS, create_topic, make_producer, produce_all, unique
from kafka_tools import dump_log_segments, parse_data_dump, parse_index_dump
from records import T0_MS
from segments import mostly_codec, segment_files

PARTITIONS = 2
PER_CODEC = 6000
SEGMENT_BYTES = 1048576
INDEX_INTERVAL_BYTES = 4096
BATCH_BYTES = 16384  # librdkafka batch.size: many batches per segment


def rec(i):
    """Keys and hex values print as plain ASCII; every 50th value is null; some headers."""
    value = None if i % 50 == 7 else f"v{i}-{random.Random(i).randbytes(100 + i % 150).hex()}"
    headers = [("a", b"1"), ("a", b"2"), ("b", None)] if i % 5 == 0 else None
    return (i % PARTITIONS, f"k{i}".encode(), value and value.encode(), headers, T0_MS + i)


@pytest.mark.control
def test_dump_log_segments(broker_factory):
    b = broker_factory({"log.segment.bytes": SEGMENT_BYTES,
                        "log.index.interval.bytes": INDEX_INTERVAL_BYTES})
    topic = unique("dump")
    create_topic(b.bootstrap, topic, PARTITIONS)
    records = [rec(i) for i in range(PER_CODEC * len(CODECS))]
    for n, codec in enumerate(CODECS):
        p = make_producer(b.bootstrap, **{"compression.type": codec, "batch.size": BATCH_BYTES})
        reports = produce_all(p, topic, records[n * PER_CODEC:(n + 1) * PER_CODEC])
        assert all(err is None for err, _, _ in reports), "delivery failed"
        del p  # no client left reconnecting once the broker stops
    b.stop()

    dirs = [b.partition_dir(topic, p) for p in range(PARTITIONS)]
    logs = [f for d in dirs for f in segment_files(d, ".log")]
    indexes = [f for d in dirs for f in segment_files(d, ".index") + segment_files(d, ".timeindex")]
    for d in dirs:
        n_logs = len(segment_files(d, ".log"))
        assert n_logs >= 3, f"{d.name}: expected >= 3 segments of {SEGMENT_BYTES} bytes, got {n_logs}"
        for suffix in (".index", ".timeindex"):
            assert len(segment_files(d, suffix)) == n_logs, f"{d.name}: one {suffix} per segment"

    dump_log_segments(indexes, "--verify-index-only")
    sanity = dump_log_segments(indexes, "--index-sanity-check")
    for f in indexes:
        assert f"{f} passed sanity check." in sanity or f"{f} is empty." in sanity, f"{f.name}: {sanity}"

    data = parse_data_dump(dump_log_segments(logs, "--print-data-log", "--deep-iteration"))
    check_records(dirs, data, records)
    check_index_density(dirs, data, parse_index_dump(dump_log_segments(indexes)))
    check_codecs(dirs, data)


def check_records(dirs, data, records):
    for p, d in enumerate(dirs):
        expected = [r for i, r in enumerate(records) if i % PARTITIONS == p]
        got = []
        for f in segment_files(d, ".log"):
            seg = data[str(f)]
            assert seg["start"] == int(f.name.split(".")[0])
            assert seg["records"][0]["offset"] == seg["start"], f"{f.name}: first offset != file name"
            for batch in seg["batches"]:
                assert batch["valid"] and batch["magic"] == 2, f"{f.name}: {batch}"
                assert batch["count"] == batch["last"] - batch["base"] + 1
            got.extend(seg["records"])
        assert [r["offset"] for r in got] == list(range(len(expected))), f"{d.name}: offsets"
        for r, (_, key, value, headers, ts) in zip(got, expected):
            want = dict(offset=r["offset"], timestamp=ts, key=key.decode(),
                        value=value.decode() if value is not None else None,
                        header_keys=[h for h, _ in headers or []])
            assert r == want, f"{d.name}: printed record differs from the produced one"


def check_codecs(dirs, data):
    """Batches keep the producer's codec; checked last, as a client may silently not compress."""
    stored = {}  # produced codec -> {stored codec: records}
    for p, d in enumerate(dirs):
        for f in segment_files(d, ".log"):
            for batch in data[str(f)]["batches"]:
                # the partition's n-th record is record n*PARTITIONS+p of the topic
                counts = stored.setdefault(CODECS[(batch["base"] * PARTITIONS + p) // PER_CODEC], {})
                counts[batch["codec"]] = counts.get(batch["codec"], 0) + batch["count"]
    wrong = {want: got for want, got in stored.items() if not mostly_codec(got, want)}
    assert not wrong, f"records by stored codec, by the producer's compression.type: {wrong}"


def check_index_density(dirs, data, index_entries):
    """An entry is due after more than log.index.interval.bytes of batches, so a segment of S
    bytes has about S / interval entries; allow for batches of up to ~BATCH_BYTES."""
    for d in dirs:
        for f in segment_files(d, ".log"):
            size = f.stat().st_size
            entries = index_entries.get(str(f.with_suffix(".index")), [])
            low = size // (INDEX_INTERVAL_BYTES + 2 * BATCH_BYTES)
            assert low <= len(entries) <= size // INDEX_INTERVAL_BYTES + 1, \
                f"{d.name}/{f.name}: {len(entries)} index entries for {size} bytes"
            offsets = [o for o, _ in entries]
            assert offsets == sorted(set(offsets)), f"{f.name}: index offsets not increasing"
            last_batch = data[str(f)]["batches"][-1]
            assert all(o <= last_batch["last"] for o in offsets), f"{f.name}: entry past the segment"
            times = index_entries.get(str(f.with_suffix(".timeindex")), [])
            assert times, f"{f.name}: empty time index"
            assert [t for t, _ in times] == sorted(set(t for t, _ in times))
