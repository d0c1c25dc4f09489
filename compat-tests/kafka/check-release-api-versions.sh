#!/usr/bin/env bash
# Checks the generated table of Kafka releases (src/protocol/kafka_releases.rs, written by
# scripts/gen-kafka-api-versions.py) against real brokers of those releases.
#   check-release-api-versions.sh VERSION...     e.g. 2.8.2 3.6.2 3.9.2 4.4.0
# For each VERSION it fetches org.apache.kafka:kafka_2.13:VERSION and its runtime dependencies
# from Maven Central (mvn, into compat-tests/.cache/kafka-releases/VERSION/libs), starts a
# single node as that release is run in production with its defaults (KRaft, broker and
# controller in one process, from 3.3; a ZooKeeper broker before, with the ZooKeeper of its
# jars), reads its ApiVersions answer at v3 and v4 (api_versions.py) and compares every API's
# range and every supported feature with the table's row for that release. Prints one line per
# difference and exits 1 if there is any. Manual, not part of CI: each release is a JVM start
# and a first download of about 60 MB. keep=1 keeps the work directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 VERSION..." >&2; exit 2; }
# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=release-lib.sh
. "$here/release-lib.sh"

work="$(mktemp -d /tmp/check-release-api-versions-XXXXXX)"
cleanup() { stop_release; if [ "${keep:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT
failed=0
for version in "$@"; do
  fetch_release "$version"
  port="$(free_port)"
  start_release "$version" "$work/$version" "$port"
  python3 "$here/api_versions.py" "127.0.0.1:$port" --version 3 > "$work/$version/v3.json"
  python3 "$here/api_versions.py" "127.0.0.1:$port" --version 4 > "$work/$version/v4.json"
  stop_release
  python3 - "$repo/src/protocol/kafka_releases.rs" "$version" "$work/$version/v3.json" \
      "$work/$version/v4.json" <<'PY' || failed=1
import json, re, sys

table, version, v3, v4 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
release = ".".join(version.split(".")[:2])
text = open(table).read()
releases = re.search(r"pub const RELEASES: \[&str; \d+\] = \[([^\]]*)\]", text).group(1)
releases = re.findall(r'"([^"]+)"', releases)
column = releases.index(release)

def rows(pattern):
    out = {}
    for m in re.finditer(pattern, text):
        cells = re.findall(r"(NO|r\((-?\d+),\s*(-?\d+)\))", m.group(2))
        cell = cells[column]
        name = m.group(1).strip('"')
        if cell[0] != "NO":
            out[name] = [int(cell[1]), int(cell[2])]
    return out

expected_apis = {int(k): v for k, v in rows(r'api\((\d+), "[^"]*", \[(.*?)\]\)').items()}
expected_features = rows(r'feature\("([^"]+)", \[(.*?)\]\)')
answer = json.load(open(v3))
real_apis = {int(k): v for k, v in answer["apis"].items()}
# v4 and later list every supported feature; v3 leaves out those whose minimum is 0 (KAFKA-17492).
real_features = json.load(open(v4))["supported_features"] or answer["supported_features"]
diffs = []
for key in sorted(set(expected_apis) | set(real_apis)):
    if expected_apis.get(key) != real_apis.get(key):
        diffs.append(f"api {key}: table {expected_apis.get(key)}, Kafka {version} {real_apis.get(key)}")
for name in sorted(set(expected_features) | set(real_features)):
    if expected_features.get(name) != real_features.get(name):
        diffs.append(f"feature {name}: table {expected_features.get(name)}, Kafka {version} {real_features.get(name)}")
for d in diffs:
    print(f"{release}: {d}")
print(f"{release}: {len(real_apis)} APIs and {len(real_features)} features compared with Kafka {version}: "
      f"{'same' if not diffs else str(len(diffs)) + ' differences'}")
sys.exit(1 if diffs else 0)
PY
done
exit "$failed"
