"""Deterministic test records: record(i) is the same on every run, so expected content is
recomputed instead of stored. Covers null and empty keys and values, binary payloads, repeated
header keys, null and empty header values, and explicit CreateTime timestamps."""
import random
import time

# A fixed timestamp base 10 minutes in the past (brokers may reject timestamps far in the future).
T0_MS = (int(time.time()) - 600) * 1000


def payload(i: int) -> bytes:
    rnd = random.Random(i)
    n = rnd.randrange(0, 240)
    return f"value-{i}:".encode() + rnd.randbytes(n // 2) + b"abc" * (n // 6)


def key_of(i: int):
    if i % 97 == 0:
        return None
    if i % 89 == 0:
        return b""
    return f"key-{i}".encode()


def value_of(i: int):
    if i % 7 == 3:
        return None
    if i % 11 == 5:
        return b""
    return payload(i)


def headers_of(i: int, null_values=True):
    """A list of (str, bytes|None); None (no headers at all) for a third of the records."""
    kind = i % 3
    if kind == 1:
        return None
    if kind == 2:
        return [("bin", bytes((i + j) % 256 for j in range(i % 40)))]
    hs = [("h", b"first"), ("h", b"second"), ("i", str(i).encode()), ("empty", b"")]
    if null_values:
        hs.insert(2, ("null-value", None))
    return hs


def record(i: int, partitions: int, null_header_values=True):
    """(partition, key, value, headers, timestamp_ms) of record number i."""
    key, value = key_of(i), value_of(i)
    if key is None and value is None:  # some clients refuse a record with neither
        value = b"k-and-v-were-both-null"
    return (i % partitions, key, value, headers_of(i, null_header_values), T0_MS + i)


def expected_by_partition(records, partitions):
    """{partition: [(key, value, headers-as-list, timestamp)]} in send order."""
    out = {p: [] for p in range(partitions)}
    for part, key, value, headers, ts in records:
        out[part].append((key, value, list(headers or []), ts))
    return out
