#!/usr/bin/env bash
# Version emulation seen by Kafka's own tool and the Java client (both Kafka 4.4's, from
# compat-tests/.cache/kafka/libs):
#   test-version-emulation.sh [SLUICE_BIN]   sluice (default target/release/sluice) started with
#                                           sluice.emulate.kafka.version=3.6: the CI run
#   test-version-emulation.sh --kafka        the same checks against a real Apache Kafka 3.6.2
#                                           (release-lib.sh), which validates them
# Checks:
#   1. kafka-broker-api-versions (BrokerApiVersionsCommand) shows 3.6's ranges: the lines below
#      exactly where sluice's range equals 3.6's, the maximum (what a client uses) where sluice
#      starts higher (it has no versions that KIP-896 removed), UNSUPPORTED for the APIs 3.6
#      did not have.
#   2. EmulationClient.java: a 4.4 producer and consumer work; the admin calls that need a
#      version 3.6 lacked (ListOffsets v9's latest-tiered, ListTransactions v1's duration
#      filter) fail in the client with UnsupportedVersionException, as against Kafka 3.6; a
#      transactional producer commits and aborts on transaction version 1 (3.6 advertised no
#      transaction.version), and read_committed reads only what it committed.
#   3. (sluice only) an unknown release is refused at start-up with a message naming the setting.
# Takes about 15 s on sluice (two JVMs at once), 40 s with --kafka (Kafka's start).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="$repo/target/release/sluice" broker=sluice
for arg in "$@"; do
  case "$arg" in
    --kafka) broker=kafka ;;
    -*) echo "test-version-emulation.sh: unknown option $arg" >&2; exit 2 ;;
    *) bin="$arg" ;;
  esac
done
if ! ls "$here/../.cache/kafka/libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
  "$here/../setup.sh"
fi
# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=release-lib.sh
. "$here/release-lib.sh"

work="$(mktemp -d /tmp/test-version-emulation-XXXXXX)"
sluice_pid=""
cleanup() {
  [ -n "$sluice_pid" ] && kill "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null
  stop_release
  if [ "${keep:-0}" = 1 ]; then echo "test-version-emulation.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAILED: $*"; failed=$((failed + 1)); keep=1; }

port="$(free_port)"
if [ "$broker" = kafka ]; then
  fetch_release 3.6.2
  start_release 3.6.2 "$work/kafka" "$port"
else
  [ -x "$bin" ] || { echo "test-version-emulation.sh: $bin is not an executable" >&2; exit 2; }
  "$bin" --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$work/data" \
    --override sluice.emulate.kafka.version=3.6 > "$work/sluice.out" 2>&1 &
  sluice_pid=$!
  for _ in $(seq 1 100); do port_open "$port" && break; sleep 0.1; done
  port_open "$port" || { cat "$work/sluice.out" >&2; exit 1; }
fi

"$here/run-class.sh" org.apache.kafka.tools.BrokerApiVersionsCommand \
  --bootstrap-server "127.0.0.1:$port" > "$work/tool.txt" 2> "$work/tool.err" & tool=$!
"$here/run-class.sh" "$here/EmulationClient.java" "127.0.0.1:$port" > "$work/client.txt" 2>&1 & client=$!
wait "$tool" || { fail "kafka-broker-api-versions exited non-zero"; cat "$work/tool.err"; }
client_rc=0; wait "$client" || client_rc=$?

# 1. The tool's lines, as Kafka 3.6.2 answers (equal ranges) ...
for line in \
  'Produce(0): 0 to 9 [usable: 9]' 'Metadata(3): 0 to 12 [usable: 12]' \
  'FindCoordinator(10): 0 to 4 [usable: 4]' 'JoinGroup(11): 0 to 9 [usable: 9]' \
  'Heartbeat(12): 0 to 4 [usable: 4]' 'SyncGroup(14): 0 to 5 [usable: 5]' \
  'DescribeGroups(15): 0 to 5 [usable: 5]' 'ListGroups(16): 0 to 4 [usable: 4]' \
  'ApiVersions(18): 0 to 3 [usable: 3]' 'InitProducerId(22): 0 to 4 [usable: 4]' \
  'AddPartitionsToTxn(24): 0 to 4 [usable: 4]' 'EndTxn(26): 0 to 3 [usable: 3]' \
  'TxnOffsetCommit(28): 0 to 3 [usable: 3]' \
  'DescribeCluster(60): 0 [usable: 0]' 'ListTransactions(66): 0 [usable: 0]' \
  'DescribeTopicPartitions(75): UNSUPPORTED' 'ConsumerGroupHeartbeat(68): UNSUPPORTED'; do
  if grep -qF -- "$line" "$work/tool.txt"; then ok "kafka-broker-api-versions: $line"
  else fail "kafka-broker-api-versions has no line '$line'"; fi
done
# ... and the maximum where the minimums differ (Kafka 3.6 starts these at 0).
for api in 'Fetch(1):15' 'ListOffsets(2):8' 'OffsetCommit(8):8' 'OffsetFetch(9):8' \
  'CreateTopics(19):7' 'DescribeConfigs(32):4' 'DescribeLogDirs(35):4'; do
  name="${api%:*}" max="${api##*:}"
  name_re="$(printf '%s' "$name" | sed 's/[()]/\\&/g')"
  if grep -qE -- "^\s*$name_re: [0-9]+ to $max \[usable: $max\]" "$work/tool.txt"; then
    ok "kafka-broker-api-versions: $name up to $max"
  else fail "kafka-broker-api-versions: $name does not end at $max"; fi
done
# 2. The Java client's checks.
sed 's/^/    /' "$work/client.txt" | grep -E '^    (ok|FAILED):' || true
if [ "$client_rc" = 0 ] && grep -q '^ok: describeTransactions after the abort' "$work/client.txt"; then
  ok "the Java 4.4 client: $(grep -c '^ok:' "$work/client.txt") checks"
else
  fail "the Java 4.4 client (exit $client_rc); its output:"; cat "$work/client.txt"
fi
# 3. An unknown release stops sluice before it serves.
if [ "$broker" = sluice ]; then
  set +e
  "$bin" --override "listeners=PLAINTEXT://127.0.0.1:$(free_port)" --override "log.dirs=$work/refused" \
    --override sluice.emulate.kafka.version=2.7 > "$work/refused.out" 2>&1
  rc=$?
  set -e
  if [ "$rc" != 0 ] && grep -q 'sluice.emulate.kafka.version=2.7: not a Kafka release' "$work/refused.out"; then
    ok "sluice.emulate.kafka.version=2.7 refused at start-up (exit $rc)"
  else
    fail "sluice.emulate.kafka.version=2.7: exit $rc"; cat "$work/refused.out"
  fi
fi
[ "$failed" = 0 ] || { echo "--- kafka-broker-api-versions output:"; cat "$work/tool.txt"; }
echo "test-version-emulation.sh against $broker"
echo "emulation: $passed passed, $failed failed"
[ "$failed" = 0 ]
