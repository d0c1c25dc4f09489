"""Raw Kafka requests at any version, encoded and decoded from Kafka's own message schemas.

Kafka publishes every request and response as a JSON schema (`common/message/*.json`, shipped in
the kafka-clients jar that setup.sh caches with the pinned Kafka). This module reads them from that
jar and encodes a request given as a dict, or decodes a response into one, at any version the
schema defines, so that tests can send a broker exactly the bytes a newer client would and compare
the answers of sluice and Apache Kafka field by field. Field names are the schema's (`Topics`,
`PartitionIndex`, ...); a field the dict leaves out takes the schema's default.

    with Connection("127.0.0.1:9092") as c:
        resp = c.request("ListOffsets", 11, {"ReplicaId": -1, "Topics": [...]})
"""
import json
import re
import socket
import struct
import uuid as uuid_mod
import zipfile
from functools import lru_cache
from pathlib import Path

LIBS = Path(__file__).resolve().parent.parent / ".cache" / "kafka" / "libs"


def _versions(spec, version):
    """Whether `version` is in a schema version range: "3+", "1-4", "0", "none"."""
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= version <= int(hi or lo)


@lru_cache(maxsize=None)
def schema(name):
    """The schema of e.g. "ListOffsetsRequest", from the cached kafka-clients jar."""
    jars = sorted(LIBS.glob("kafka-clients-*.jar"))
    if not jars:
        raise FileNotFoundError(f"no kafka-clients jar in {LIBS}; run compat-tests/setup.sh")
    with zipfile.ZipFile(jars[0]) as z:
        text = z.read(f"common/message/{name}.json").decode()
    # The schemas carry // comments, which JSON does not allow.
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


class _Writer:
    def __init__(self):
        self.buf = bytearray()

    def put(self, fmt, value):
        self.buf += struct.pack(">" + fmt, value)

    def uvarint(self, value):
        while True:
            byte = value & 0x7F
            value >>= 7
            if value:
                self.buf.append(byte | 0x80)
            else:
                self.buf.append(byte)
                return


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"response ends at {len(self.data)} bytes, {n} more wanted at {self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def get(self, fmt):
        size = struct.calcsize(">" + fmt)
        return struct.unpack(">" + fmt, self.take(size))[0]

    def uvarint(self):
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7


PRIMITIVES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q", "float64": "d"}


class Message:
    """One message schema (a request or a response) at one version."""

    def __init__(self, name, version):
        self.spec = schema(name)
        self.version = version
        valid = self.spec["validVersions"]
        if not _versions(valid, version):
            raise ValueError(f"{name} has versions {valid}, not {version}")
        self.flexible = _versions(self.spec.get("flexibleVersions"), version)
        self.structs = {s["name"]: s["fields"] for s in self.spec.get("commonStructs", [])}

    def _fields(self, field):
        return field["fields"] if "fields" in field else self.structs[field["type"].lstrip("[]")]

    def _present(self, field):
        return _versions(field["versions"], self.version)

    def _tagged(self, field):
        return "tag" in field and _versions(field.get("taggedVersions", field["versions"]), self.version)

    # ----- encoding

    def encode(self, value):
        w = _Writer()
        self._encode_struct(w, self.spec["fields"], value or {})
        return bytes(w.buf)

    def _encode_struct(self, w, fields, value):
        tagged = []
        for f in fields:
            if not self._present(f):
                if f["name"] in value:
                    raise ValueError(f"{f['name']} is not in version {self.version}")
                continue
            if self._tagged(f):
                if f["name"] in value:
                    tagged.append(f)
                continue
            self._encode_value(w, f, value.get(f["name"], self._default(f)))
        if self.flexible:
            w.uvarint(len(tagged))
            for f in sorted(tagged, key=lambda f: f["tag"]):
                inner = _Writer()
                self._encode_value(inner, f, value[f["name"]])
                w.uvarint(f["tag"])
                w.uvarint(len(inner.buf))
                w.buf += inner.buf

    def _default(self, f):
        t = f["type"]
        d = f.get("default")
        if d == "null":
            return None
        if t.startswith("[]"):
            return []
        if t in PRIMITIVES:
            return int(d, 0) if isinstance(d, str) else (d if d is not None else 0)
        if t == "bool":
            return d in (True, "true")
        if t == "string":
            return d or ""
        if t == "uuid":
            return "AAAAAAAAAAAAAAAAAAAAAA"
        if t in ("bytes", "records"):
            return b""
        return {}

    def _nullable(self, f):
        return _versions(f.get("nullableVersions"), self.version)

    def _encode_len(self, w, n):
        if self.flexible:
            w.uvarint(n + 1)
        else:
            w.put("i", n)

    def _encode_value(self, w, f, v):
        t = f["type"]
        if t.startswith("[]"):
            if v is None:
                if not self._nullable(f):
                    raise ValueError(f"{f['name']} is not nullable at version {self.version}")
                w.uvarint(0) if self.flexible else w.put("i", -1)
                return
            if self.flexible:
                w.uvarint(len(v) + 1)
            else:
                w.put("i", len(v))
            item = t[2:]
            for x in v:
                if item in PRIMITIVES or item in ("string", "uuid", "bool"):
                    self._encode_value(w, {"name": f["name"], "type": item}, x)
                else:
                    self._encode_struct(w, self._fields(f), x)
        elif t in PRIMITIVES:
            w.put(PRIMITIVES[t], v)
        elif t == "bool":
            w.put("?", bool(v))
        elif t == "uuid":
            w.buf += uuid_bytes(v)
        elif t == "string":
            if v is None:
                if not self._nullable(f):
                    raise ValueError(f"{f['name']} is not nullable at version {self.version}")
                w.uvarint(0) if self.flexible else w.put("h", -1)
                return
            data = v.encode()
            if self.flexible:
                w.uvarint(len(data) + 1)
            else:
                w.put("h", len(data))
            w.buf += data
        elif t in ("bytes", "records"):
            if v is None:
                w.uvarint(0) if self.flexible else w.put("i", -1)
                return
            self._encode_len(w, len(v))
            w.buf += v
        elif self._nullable(f):
            # A nullable struct: an int8 marker, -1 for null, 1 before the struct.
            w.put("b", -1 if v is None else 1)
            if v is not None:
                self._encode_struct(w, self._fields(f), v)
        else:
            self._encode_struct(w, self._fields(f), v)

    # ----- decoding

    def decode(self, data):
        r = _Reader(data)
        out = self._decode_struct(r, self.spec["fields"])
        if r.pos != len(data):
            raise ValueError(f"{len(data) - r.pos} bytes left after the {self.spec['name']} body")
        return out

    def _decode_struct(self, r, fields):
        out, by_tag = {}, {}
        for f in fields:
            if not self._present(f):
                continue
            if self._tagged(f):
                by_tag[f["tag"]] = f
                continue
            out[f["name"]] = self._decode_value(r, f)
        if self.flexible:
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                raw = r.take(size)
                if tag in by_tag:
                    out[by_tag[tag]["name"]] = self._decode_value(_Reader(raw), by_tag[tag])
                else:
                    out.setdefault("_unknown_tags", {})[tag] = raw
        return out

    def _decode_len(self, r, fmt):
        return r.uvarint() - 1 if self.flexible else r.get(fmt)

    def _decode_value(self, r, f):
        t = f["type"]
        if t.startswith("[]"):
            n = self._decode_len(r, "i")
            if n < 0:
                return None
            item = t[2:]
            if item in PRIMITIVES or item in ("string", "uuid", "bool"):
                return [self._decode_value(r, {"name": f["name"], "type": item}) for _ in range(n)]
            return [self._decode_struct(r, self._fields(f)) for _ in range(n)]
        if t in PRIMITIVES:
            return r.get(PRIMITIVES[t])
        if t == "bool":
            return r.get("?")
        if t == "uuid":
            return uuid_str(r.take(16))
        if t == "string":
            n = self._decode_len(r, "h")
            return None if n < 0 else r.take(n).decode()
        if t in ("bytes", "records"):
            n = self._decode_len(r, "i")
            return None if n < 0 else r.take(n)
        if self._nullable(f) and r.get("b") < 0:
            return None
        return self._decode_struct(r, self._fields(f))


def uuid_bytes(text):
    """Kafka's Uuid string (22 characters of URL-safe base64) -> its 16 bytes."""
    import base64
    return base64.urlsafe_b64decode(text + "==")


def uuid_str(raw):
    import base64
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def random_uuid():
    return uuid_str(uuid_mod.uuid4().bytes)


class Connection:
    """One TCP connection to a broker, speaking raw requests."""

    def __init__(self, bootstrap, timeout_s=30):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation_id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    def sasl_plain(self, user, password):
        """Logs in with SASL/PLAIN: SaslHandshake v1, then SaslAuthenticate v2 (raises if
        either fails)."""
        hs = self.request("SaslHandshake", 1, {"Mechanism": "PLAIN"})
        if hs["ErrorCode"]:
            raise ConnectionError(f"SaslHandshake: error {hs['ErrorCode']}")
        auth = self.request("SaslAuthenticate", 2, {"AuthBytes": f"\0{user}\0{password}".encode()})
        if auth["ErrorCode"]:
            raise ConnectionError(f"SaslAuthenticate: error {auth['ErrorCode']} {auth['ErrorMessage']}")
        return self

    def send_raw(self, api_key, version, body, flexible_header):
        """Sends one request with the given body bytes; -> the response's bytes after its
        correlation id (the response header's tagged fields included, if any)."""
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(b"sluice-wire"))
        header += b"sluice-wire"
        if flexible_header:
            header += b"\x00"  # no tagged fields
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        data = self._read(size)
        correlation_id = struct.unpack(">i", data[:4])[0]
        if correlation_id != self.correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {self.correlation_id}")
        return data[4:]

    def request(self, api, version, body):
        """Sends `<api>Request` at `version` (body: a dict of its fields) and returns the
        decoded `<api>Response` at the same version."""
        req = Message(api + "Request", version)
        resp = Message(api + "Response", version)
        data = self.send_raw(req.spec["apiKey"], version, req.encode(body), req.flexible)
        # Response header v1 (tagged fields) for flexible versions, except ApiVersions, whose
        # response header is always v0 so that any client can read it.
        if resp.flexible and api != "ApiVersions":
            r = _Reader(data)
            for _ in range(r.uvarint()):
                r.uvarint()
                r.take(r.uvarint())
            data = data[r.pos:]
        return resp.decode(data)

    def _read(self, n):
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"broker closed the connection after {len(out)}/{n} bytes")
            out += chunk
        return bytes(out)
