#!/usr/bin/env bash
# Stop the Kafka that start-kafka.sh started in <dir>: SIGTERM (graceful), then SIGKILL after
# KAFKA_STOP_TIMEOUT_S (default 30) seconds. With --kill9, SIGKILL at once (a crash).
#   stop-kafka.sh <dir> [--kill9]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 <dir> [--kill9]" >&2; exit 2; }
pidfile="$1/kafka.pid"
[ -f "$pidfile" ] || { echo "stop-kafka.sh: no $pidfile" >&2; exit 1; }
pid="$(cat "$pidfile")"
if ! kill -0 "$pid" 2>/dev/null; then rm -f "$pidfile"; echo "stop-kafka.sh: $pid not running" >&2; exit 0; fi
if [ "${2:-}" = "--kill9" ]; then kill -9 "$pid"; else kill -TERM "$pid"; fi
deadline=$(( $(date +%s) + ${KAFKA_STOP_TIMEOUT_S:-30} ))
while kill -0 "$pid" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "stop-kafka.sh: $pid still alive; sending SIGKILL" >&2; kill -9 "$pid" 2>/dev/null || true
  fi
  sleep 0.2
done
rm -f "$pidfile"
echo "stopped $pid"
