#!/usr/bin/env bash
# Start a single-node KRaft Apache Kafka (broker+controller, node id 1) on loopback.
#   start-kafka.sh <port> <dir> [key=value ...]
# Layout: <dir>/data is log.dirs (partition folders live there), <dir>/server.properties,
# <dir>/kafka.pid, <dir>/kafka.out. The storage is formatted only on first start, so running
# it again on the same <dir> restarts Kafka on its existing data. Extra key=value pairs are
# passed to kafka.Kafka as --override key=value on this start (like sluice's --override).
# Prints the pid on stdout once the port accepts connections. Stop it with stop-kafka.sh <dir>.
# A `listeners=...` pair replaces the client listeners (it must still have PLAINTEXT on <port>):
# the script adds its controller listener, and advertises the given ones unless
# `advertised.listeners=...` is given too; name each extra listener's protocol in a
# `listener.security.protocol.map=...` pair (with CONTROLLER:PLAINTEXT).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { echo "usage: $0 <port> <dir> [key=value ...]" >&2; exit 2; }
port="$1"; dir="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2
timeout_s="${KAFKA_START_TIMEOUT_S:-60}"

# shellcheck source=lib.sh
. "$here/lib.sh"

if [ -f "$dir/kafka.pid" ] && kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
  echo "start-kafka.sh: already running with pid $(cat "$dir/kafka.pid")" >&2; exit 1
fi
if port_open "$port"; then echo "start-kafka.sh: port $port is already in use" >&2; exit 1; fi

if [ ! -f "$dir/data/meta.properties" ]; then
  cport="$(free_port)"
  cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:$cport
log.dirs=$dir/data
# A single node cannot host the internal topics with their default replication factor of 3.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
PROPS
  echo "start-kafka.sh: formatting $dir/data (controller port $cport)" >&2
  cluster_id="$("$here/run-class.sh" kafka.tools.StorageTool random-uuid)"
  "$here/run-class.sh" kafka.tools.StorageTool format --standalone -t "$cluster_id" \
    -c "$dir/server.properties" >&2
fi
overrides=() listeners="" advertised=0
for kv in "$@"; do
  case "$kv" in
    listeners=*) listeners="${kv#listeners=}" ;;
    advertised.listeners=*) advertised=1; overrides+=(--override "$kv") ;;
    *) overrides+=(--override "$kv") ;;
  esac
done
if [ -n "$listeners" ]; then
  cport="$(sed -n 's/^controller.quorum.bootstrap.servers=127.0.0.1:\([0-9]*\)$/\1/p' "$dir/server.properties")"
  overrides+=(--override "listeners=$listeners,CONTROLLER://127.0.0.1:$cport")
  [ "$advertised" = 1 ] || overrides+=(--override "advertised.listeners=$listeners")
fi

KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1g -Xms1g}" KAFKA_LOG_LEVEL="${KAFKA_LOG_LEVEL:-INFO}" \
  nohup "$here/run-class.sh" kafka.Kafka "$dir/server.properties" "${overrides[@]}" >> "$dir/kafka.out" 2>&1 < /dev/null &
pid=$!
echo "$pid" > "$dir/kafka.pid"
deadline=$(( $(date +%s) + timeout_s ))
until port_open "$port"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "start-kafka.sh: Kafka exited during startup; last lines of $dir/kafka.out:" >&2
    tail -n 30 "$dir/kafka.out" >&2; exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "start-kafka.sh: port $port not open after ${timeout_s}s; killing $pid" >&2
    kill -9 "$pid" 2>/dev/null || true; exit 1
  fi
  sleep 0.2
done
echo "$pid"
