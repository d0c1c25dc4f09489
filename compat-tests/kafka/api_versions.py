#!/usr/bin/env python3
"""Reads a broker's ApiVersions answer (v3, as today's clients send it) and prints it as JSON:
{"error": code, "apis": {key: [min, max]}, "supported_features": {name: [min, max]},
 "finalized_features": {name: [min, max]}, "finalized_features_epoch": n}.

    api_versions.py HOST:PORT [--version N]

Speaks the protocol with the standard library only, so it reads any broker (sluice, or a Kafka
of any release) without a JVM; check-release-api-versions.sh and the emulation compat test use it.
"""
import argparse
import json
import socket
import struct


def uvarint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def compact_string(buf, pos):
    n, pos = uvarint(buf, pos)
    return buf[pos:pos + n - 1].decode(), pos + n - 1


def skip_tags(buf, pos):
    count, pos = uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        pos += size
    return pos


def features(buf, pos, finalized):
    n, pos = uvarint(buf, pos)
    out = {}
    for _ in range(n - 1):
        name, pos = compact_string(buf, pos)
        lo, hi = struct.unpack_from(">hh", buf, pos)
        pos = skip_tags(buf, pos + 4)
        out[name] = [lo, hi]
    return out, pos


def request(version):
    # Header v2 for flexible versions (3+), v1 below; body: client software name and version.
    header = struct.pack(">hhi", 18, version, 1) + struct.pack(">h", 7) + b"compat1"
    if version >= 3:
        name, ver = b"api-versions-py", b"1.0"
        header += b"\x00"  # header tagged fields
        body = bytes([len(name) + 1]) + name + bytes([len(ver) + 1]) + ver + b"\x00"
    else:
        body = b""
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def parse(buf, version):
    # Response header v0 (correlation id) for ApiVersions at every version (KIP-511).
    pos = 4
    (error,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    out = {"error": error, "apis": {}, "supported_features": {}, "finalized_features": {},
           "finalized_features_epoch": -1}
    flexible = version >= 3 and error == 0
    if flexible:
        n, pos = uvarint(buf, pos)
        n -= 1
    else:
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
    for _ in range(n):
        key, lo, hi = struct.unpack_from(">hhh", buf, pos)
        pos += 6
        if flexible:
            pos = skip_tags(buf, pos)
        out["apis"][key] = [lo, hi]
    if not flexible:
        return out
    pos += 4  # throttle_time_ms
    count, pos = uvarint(buf, pos)
    for _ in range(count):
        tag, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        end = pos + size
        if tag == 0:
            out["supported_features"], _ = features(buf, pos, False)
        elif tag == 1:
            (out["finalized_features_epoch"],) = struct.unpack_from(">q", buf, pos)
        elif tag == 2:
            out["finalized_features"], _ = features(buf, pos, True)
        pos = end
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--version", type=int, default=3)
    args = parser.parse_args()
    host, port = args.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request(args.version))
        (size,) = struct.unpack(">i", read_exact(sock, 4))
        answer = parse(read_exact(sock, size), args.version)
    print(json.dumps(answer, sort_keys=True))


if __name__ == "__main__":
    main()
