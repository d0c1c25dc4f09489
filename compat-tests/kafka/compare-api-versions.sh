#!/usr/bin/env bash
# What sluice advertises in ApiVersions against what the reference Apache Kafka advertises.
#   compare-api-versions.sh [SLUICE_BIN]     (default target/release/sluice)
# Starts sluice and a single-node Kafka (start-kafka.sh) side by side, runs Kafka's
# BrokerApiVersionsCommand (kafka-broker-api-versions) against each, and prints one markdown
# table row per API either broker advertises: API (key), sluice's range, Kafka's range, and how
# they differ. Exits 1 if sluice advertises an API or a version that Kafka does not (a client
# would then send sluice a request Kafka itself would refuse). Then the features (ApiVersions v4,
# read by api_versions.py): exits 1 if sluice advertises a feature, supported or finalized,
# otherwise than Kafka does (transaction.version and group.version decide which protocol
# clients speak).
# The Kafka is the pinned one of pom.xml (compat-tests/.cache/kafka/libs, installed by setup.sh);
# KAFKA_LIBS=<dir of jars> runs another release instead, e.g. one fetched with a copy of pom.xml
# whose kafka.version is changed. keep=1 keeps the work directory (both tools' raw output).
# Takes about 30 s, most of it Kafka's start.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:-$repo/target/release/sluice}"
[ -x "$bin" ] || { echo "compare-api-versions.sh: $bin is not an executable" >&2; exit 2; }
libs="${KAFKA_LIBS:-$here/../.cache/kafka/libs}"
if [ -z "${KAFKA_LIBS:-}" ] && ! ls "$libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
  "$here/../setup.sh"
fi
kafka_jar="$(ls "$libs"/kafka_2.13-*.jar 2>/dev/null | head -n 1)"
[ -n "$kafka_jar" ] || { echo "compare-api-versions.sh: no kafka_2.13 jar in $libs" >&2; exit 2; }
kafka_version="$(basename "$kafka_jar" .jar)"
kafka_version="${kafka_version#kafka_2.13-}"

work="$(mktemp -d /tmp/compare-api-versions-XXXXXX)"
# shellcheck source=lib.sh
. "$here/lib.sh"
start_side_by_side compare-api-versions.sh "$bin" "$work"

api_versions() {
  "$here/run-class.sh" org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "127.0.0.1:$1"
}
# Both tools at once: each is a JVM start.
api_versions "$sluice_port" > "$work/sluice.txt" 2> "$work/sluice.err" & sluice_tool=$!
api_versions "$kafka_port" > "$work/kafka.txt" 2> "$work/kafka.err" & kafka_tool=$!
failed=0
wait "$sluice_tool" || { failed=1; keep=1; echo "compare-api-versions.sh: the tool failed on sluice" >&2; cat "$work/sluice.err" >&2; }
wait "$kafka_tool" || { failed=1; keep=1; echo "compare-api-versions.sh: the tool failed on Kafka" >&2; cat "$work/kafka.err" >&2; }
[ "$failed" = 0 ] || exit 1

python3 "$here/api_versions.py" "127.0.0.1:$sluice_port" --version 4 > "$work/sluice-features.json"
python3 "$here/api_versions.py" "127.0.0.1:$kafka_port" --version 4 > "$work/kafka-features.json"

python3 - "$work/sluice.txt" "$work/kafka.txt" "$kafka_version" <<'PY' || failed=1
import re, sys

# One line per API the tool knows: "	Name(key): 0 to 13 [usable: 13]," / "Name(key): 0 [usable: 0]"
# / "Name(key): UNSUPPORTED" (not advertised) / "UNKNOWN(key): ..." (a key the tool lacks).
LINE = re.compile(r"^\s*(\w+)\((\d+)\): (?:(-?\d+)(?: to (-?\d+))?|UNSUPPORTED)")

def advertised(path):
    apis = {}
    for line in open(path):
        m = LINE.match(line)
        if m and m.group(3) is not None:
            lo = int(m.group(3))
            hi = int(m.group(4)) if m.group(4) is not None else lo
            apis[int(m.group(2))] = (m.group(1), lo, hi)
    if not apis:
        sys.exit(f"compare-api-versions.sh: no API versions in {path}")
    return apis

sluice, kafka, version = advertised(sys.argv[1]), advertised(sys.argv[2]), sys.argv[3]
fmt = lambda r: "-" if r is None else (f"{r[1]}" if r[1] == r[2] else f"{r[1]}-{r[2]}")
print(f"| API (key) | sluice | Kafka {version} | |")
print("|---|---|---|---|")
wrong, below, same = [], [], []
for key in sorted(set(sluice) | set(kafka)):
    s, k = sluice.get(key), kafka.get(key)
    name = (s or k)[0]
    if s is None:
        note = "Kafka only"
    elif k is None or s[1] < k[1] or s[2] > k[2]:
        note = "**sluice only**" if k is None else "**sluice outside Kafka's range**"
        wrong.append(name)
    elif s[1:] == k[1:]:
        note = "same"
        same.append(name)
    else:
        note = "sluice below Kafka"
        below.append(name)
    print(f"| {name} ({key}) | {fmt(s)} | {fmt(k)} | {note} |")
print()
print(f"sluice advertises {len(sluice)} APIs: {len(same)} as Kafka {version} does, "
      f"{len(below)} with fewer versions ({', '.join(below) or 'none'}); "
      f"Kafka advertises {len(set(kafka) - set(sluice))} that sluice does not.")
if wrong:
    print(f"compare-api-versions.sh: sluice advertises versions Kafka {version} does not: "
          f"{', '.join(wrong)}", file=sys.stderr)
    sys.exit(1)
PY
python3 - "$work/sluice-features.json" "$work/kafka-features.json" "$kafka_version" <<'PY' || failed=1
import json, sys

sluice, kafka = (json.load(open(p)) for p in sys.argv[1:3])
version, wrong = sys.argv[3], []
print()
print(f"| feature | sluice supported, finalized | Kafka {version} supported, finalized |")
print("|---|---|---|")
for name in sorted(set(sluice["supported_features"]) | set(kafka["supported_features"])):
    s = (sluice["supported_features"].get(name), sluice["finalized_features"].get(name))
    k = (kafka["supported_features"].get(name), kafka["finalized_features"].get(name))
    print(f"| {name} | {s[0] or '-'}, {s[1] or '-'} | {k[0] or '-'}, {k[1] or '-'} |")
    if s != (None, None) and s != k:
        wrong.append(name)
if wrong:
    print(f"compare-api-versions.sh: sluice advertises features otherwise than Kafka {version}: "
          f"{', '.join(wrong)}", file=sys.stderr)
    sys.exit(1)
PY
[ "$failed" = 0 ] || { keep=1; exit 1; }
