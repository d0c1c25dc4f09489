#!/usr/bin/env bash
# Run the franz-go compat test (group_test.go) against a broker this script starts and stops.
#   compat-tests/go/run.sh [SLUICE_BIN]   sluice (default: target/release/sluice)
#   compat-tests/go/run.sh --kafka        Apache Kafka 4.4 via ../kafka/start-kafka.sh
#   KAFKA_BOOTSTRAP=host:port compat-tests/go/run.sh --external   a broker that is already running
# The broker gets a free loopback port, a fresh data dir and group.initial.rebalance.delay.ms=300,
# as in the Python suite. Go modules come from the module proxy (go.sum pins them).
# Exits non-zero on any failure; the build, the test and the broker start are all time-bounded.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
compat="$(cd "$here/.." && pwd)"
repo="$(cd "$compat/.." && pwd)"
export GOFLAGS="-mod=mod -buildvcs=false"

mode=sluice
bin="$repo/target/release/sluice"
case "${1:-}" in
  --kafka) mode=kafka ;;
  --external) mode=external ;;
  "") ;;
  -*) echo "usage: $0 [SLUICE_BIN | --kafka | --external]" >&2; exit 2 ;;
  *) bin="$1" ;;
esac

work="$(mktemp -d /tmp/compat-go.XXXXXX)"
say() { echo "go/run.sh: $*"; }

# Build first, so compiling franz-go does not count against the test's timeout.
say "building the test binary"
(cd "$here" && timeout 600 go mod download && timeout 600 go test -c -o "$work/compat.test" .)

# free_port, port_open
# shellcheck source=../kafka/lib.sh
. "$here/../kafka/lib.sh"

pid=""
stop_broker() {
  case "$mode" in
    sluice)
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then say "sluice ignored SIGTERM for 30s; killing"; kill -9 "$pid"; fi
        wait "$pid" 2>/dev/null || true
      fi ;;
    kafka) [ -f "$work/kafka.pid" ] && "$compat/kafka/stop-kafka.sh" "$work" >/dev/null || true ;;
  esac
}
trap stop_broker EXIT

case "$mode" in
  sluice)
    [ -x "$bin" ] || { echo "go/run.sh: $bin is not an executable" >&2; exit 2; }
    port="$(free_port)"
    mkdir -p "$work/data"
    "$bin" --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$work/data" \
      --override group.initial.rebalance.delay.ms=300 > "$work/broker.out" 2>&1 < /dev/null &
    pid=$!
    for _ in $(seq 200); do port_open "$port" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    port_open "$port" || { say "sluice did not start (work dir $work):"; tail -n 30 "$work/broker.out"; exit 1; }
    bootstrap="127.0.0.1:$port"; log="$work/broker.out" ;;
  kafka)
    port="$(free_port)"
    "$compat/kafka/start-kafka.sh" "$port" "$work" group.initial.rebalance.delay.ms=300 >/dev/null
    bootstrap="127.0.0.1:$port"; log="$work/kafka.out" ;;
  external)
    bootstrap="${KAFKA_BOOTSTRAP:?set KAFKA_BOOTSTRAP=host:port}"; log="" ;;
esac

say "testing $mode at $bootstrap"
rc=0
(cd "$here" && KAFKA_BOOTSTRAP="$bootstrap" timeout --kill-after=10 300 \
  "$work/compat.test" -test.v -test.count=1 -test.timeout 240s) || rc=$?
if [ "$rc" -ne 0 ]; then
  say "FAILED (exit $rc) against $mode; work dir kept: $work"
  [ -n "$log" ] && { echo "--- last broker output ($log)"; tail -n 40 "$log"; }
else
  stop_broker
  trap - EXIT
  rm -rf "$work"
  say "passed against $mode"
fi
exit "$rc"
