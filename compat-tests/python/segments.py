"""Read Kafka segment files of a partition folder: batch headers of `.log` files (RecordBatch v2),
with their CRC-32C checked. Used to look at what the broker wrote, and to damage it on purpose."""
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

HEADER = struct.Struct(">qiiBIhiqqqhii")  # RecordBatch v2 header, 61 bytes
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass
class Batch:
    position: int
    base_offset: int
    last_offset: int
    size: int  # whole batch, including the 12-byte offset+length prefix
    codec: str
    record_count: int
    crc_ok: bool


def segment_files(partition_dir: Path, suffix: str):
    """Files with this suffix, sorted by base offset (their 20-digit names)."""
    return sorted(Path(partition_dir).glob(f"*{suffix}"), key=lambda p: int(p.name.split(".")[0]))


def read_batches(log_file: Path):
    """(batches, trailing_bytes): the valid batches from the start, and the bytes after them."""
    data = Path(log_file).read_bytes()
    batches, pos = [], 0
    while pos + HEADER.size <= len(data):
        (base, length, _epoch, magic, crc, attrs, last_delta,
         _t0, _tmax, _pid, _pepoch, _seq, count) = HEADER.unpack_from(data, pos)
        size = 12 + length
        if magic != 2 or length < HEADER.size - 12 or pos + size > len(data):
            break
        crc_ok = crc32c.crc32c(data[pos + 21:pos + size]) == crc
        batches.append(Batch(pos, base, base + last_delta, size, CODECS.get(attrs & 7, "?"),
                             count, crc_ok))
        pos += size
    return batches, len(data) - pos


def partition_batches(partition_dir: Path):
    """All batches of a partition in offset order, with per-file trailing bytes."""
    out, trailing = [], {}
    for f in segment_files(partition_dir, ".log"):
        batches, extra = read_batches(f)
        out.extend(batches)
        if extra:
            trailing[f.name] = extra
    return out, trailing


def records_by_codec(batches):
    """{codec: number of records stored in batches with that codec}."""
    out = {}
    for b in batches:
        out[b.codec] = out.get(b.codec, 0) + b.record_count
    return out


def mostly_codec(counts, want, share=0.9):
    """Clients send a batch uncompressed when compressing would not make it smaller (small
    batches), so "none" may appear; but most records must carry the requested codec."""
    return not set(counts) - {want, "none"} and counts.get(want, 0) >= share * sum(counts.values())
