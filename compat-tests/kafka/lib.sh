# Shell pieces the compat scripts share; source it, do not run it.
#   free_port                    a free loopback port below the ephemeral range (no reconnecting
#                                client can self-connect on it)
#   port_open PORT               whether 127.0.0.1:PORT accepts connections
#   start_side_by_side NAME BIN WORK
#                                sluice (BIN) and a single-node Kafka (start-kafka.sh) on two free
#                                ports, data under WORK; sets sluice_port and kafka_port, and an
#                                EXIT trap that stops both and removes WORK (keep=1 keeps it).
#                                Returns once both accept connections.

free_port() {
  python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    try:
        socket.socket().bind(("127.0.0.1", p)); print(p); break
    except OSError: pass'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_side_by_side() {
  local name="$1" bin="$2" kafka_dir
  side_by_side_name="$name"
  side_by_side_work="$3"
  kafka_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  side_by_side_kafka="$kafka_dir"
  sluice_port="$(free_port)"
  kafka_port="$(free_port)"
  while [ "$kafka_port" = "$sluice_port" ]; do kafka_port="$(free_port)"; done
  sluice_pid=""
  trap side_by_side_cleanup EXIT
  mkdir -p "$side_by_side_work/sluice"
  "$bin" --override "listeners=PLAINTEXT://127.0.0.1:$sluice_port" \
    --override "log.dirs=$side_by_side_work/sluice/data" > "$side_by_side_work/sluice/sluice.out" 2>&1 &
  sluice_pid=$!
  if ! "$kafka_dir/start-kafka.sh" "$kafka_port" "$side_by_side_work/kafka" > /dev/null \
      2> "$side_by_side_work/kafka-start.err"; then
    keep=1; cat "$side_by_side_work/kafka-start.err" >&2; return 1
  fi
  local _
  for _ in $(seq 1 100); do port_open "$sluice_port" && return 0; sleep 0.1; done
  keep=1; echo "$name: sluice did not start; see $side_by_side_work/sluice/sluice.out" >&2; return 1
}

side_by_side_cleanup() {
  [ -n "${sluice_pid:-}" ] && kill "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null
  "$side_by_side_kafka/stop-kafka.sh" "$side_by_side_work/kafka" >/dev/null 2>&1 || true
  if [ "${keep:-0}" = 1 ]; then
    echo "$side_by_side_name: kept $side_by_side_work" >&2
  else
    rm -rf "$side_by_side_work"
  fi
}
