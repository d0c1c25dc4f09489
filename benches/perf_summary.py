#!/usr/bin/env python3
"""Summarises `perf script -F comm,tid,ip,sym` output of a sluice profile (stdlib only).

  perf script -i perf.data -F comm,tid,ip,sym | perf_summary.py

Prints (1) the share of samples per phase of the request path, found by the frames on each
sample's stack, and (2) the share per nearest sluice function: each sample (including libc
and kernel time below it) is charged to the first `sluice::` frame above its leaf.
"""

import collections
import re
import sys

# (phase, frames that must all appear on the stack). The first matching rule wins, so the
# more specific rules come first.
PHASES = [
    ("produce validation: lz4 decompression", ["record_batch::validate::", "lz4"]),
    ("produce validation: CRC-32C", ["record_batch::validate::", "crc32c"]),
    ("produce validation: record walk (varints, framing)", ["record_batch::validate::"]),
    ("log append: offset/time index", ["LogSegment::append", "index::"]),
    ("log append: pwrite into the segment (page cache)", ["LogSegment::append", "pwritev"]),
    ("log append: pwrite into the segment (page cache)", ["LogSegment::append", "write_at"]),
    ("log append: other", ["PartitionLog::append"]),
    ("request read: socket → frame buffer", ["network::frame::read_frame"]),
    ("produce: decode request, encode response, other", ["api::produce::"]),
    ("response encode: records copied into the response frame", ["codec::encode_response"]),
    ("response encode: fetch frame around the records", ["encode_fetch_response"]),
    ("fetch: read from the segment", ["api::fetch::", "read_bytes"]),
    ("fetch: locate the byte range (index, batch scan)", ["api::fetch::", "read_slice"]),
    ("fetch: other", ["api::fetch::"]),
    ("response write: sendfile of the records", ["network::send::", "sendfile"]),
    ("response write: send of the other bytes", ["network::send::"]),
    ("response write: socket", ["poll_write"]),
    ("other request handling", ["sluice::api::"]),
    ("other connection handling", ["sluice::network::"]),
    ("runtime: idle, parking, wake-ups", ["worker::Context::park"]),
    ("runtime: scheduler", ["tokio::runtime::"]),
]


def samples(lines):
    stack = []
    for line in lines:
        if not line.strip():
            if stack:
                yield stack
            stack = []
            continue
        if line[0] in " \t":
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                stack.append(parts[1])
        # a header line (comm tid) starts a new sample; nothing to keep from it
    if stack:
        yield stack


def main():
    phases = collections.Counter()
    nearest = collections.Counter()
    leaves = collections.Counter()
    n = 0
    for st in samples(sys.stdin):
        n += 1
        joined = "\n".join(st)
        for name, needles in PHASES:
            if all(x in joined for x in needles):
                phases[name] += 1
                break
        else:
            phases["other (outside the request path)"] += 1
        leaf = re.sub(r" \(inlined\)$", "", st[0])
        leaves[leaf] += 1
        for fr in st:
            if fr.startswith("sluice::") or "<sluice::" in fr:
                nearest[re.sub(r"::\{\{closure\}\}| \(inlined\)", "", fr)] += 1
                break
        else:
            nearest["(no sluice frame)"] += 1
    print(f"{n} samples\n")
    print("Phase of the request path                               share")
    for k, v in phases.most_common():
        print(f"  {k:<55} {100 * v / n:5.1f} %")
    print("\nNearest sluice function (self + libc + kernel below it)   share")
    for k, v in nearest.most_common(20):
        print(f"  {k[:80]:<80} {100 * v / n:5.1f} %")
    print("\nLeaf symbols                                              share")
    for k, v in leaves.most_common(20):
        print(f"  {k[:80]:<80} {100 * v / n:5.1f} %")


if __name__ == "__main__":
    main()
