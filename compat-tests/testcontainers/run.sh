#!/usr/bin/env bash
# compat-tests/testcontainers/run.sh [SLUICE_BIN]: sluice as a test broker.
#  1. metrics (Python, prometheus_client's parser) and fault injection (the Java client,
#     faults armed by Python over HTTP) against SLUICE_BIN (default target/release/sluice);
#  2. the container image (container/build.sh) under Testcontainers for Java (KafkaContainer),
#     testcontainers-python and testcontainers-go, through podman's Docker API socket.
# Where containers cannot run, step 2 runs the image's entrypoint outside a container instead
# and says so. Installs podman, runc and busybox-static (apt) when missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$(realpath "${1:-$root/target/release/sluice}")"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

venv="$here/.venv"
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q -r "$here/python/requirements.txt"
fi
(cd "$here/java" && mvn -q -B dependency:go-offline -DincludeScope=test >/dev/null)

python3 "$here/readme_check.py"
echo "== metrics: prometheus_client parses /metrics after a known workload"
SLUICE_BIN="$bin" timeout 300 "$venv/bin/pytest" -q -p no:cacheprovider "$here/python/test_metrics.py"

echo "== fault injection: armed by Python over HTTP, checked by the Java client"
kafka_port=$(free_port); http_port=$(free_port)
"$bin" --override "listeners=PLAINTEXT://127.0.0.1:$kafka_port" --override "log.dirs=$work/faults" \
  --override "sluice.http.listener=127.0.0.1:$http_port" --override sluice.fault.injection.enable=true \
  --override group.initial.rebalance.delay.ms=0 2>"$work/faults.log" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http_port/ready" >/dev/null && break; sleep 0.1; done
(cd "$here/java" && timeout 300 mvn -q -B -o test -Dtest=FaultInjectionTest \
  "-Dsluice.bootstrap=127.0.0.1:$kafka_port" "-Dsluice.http=http://127.0.0.1:$http_port" \
  "-Dsluice.faults=$venv/bin/python $here/python/faults.py") || { tail -20 "$work/faults.log"; exit 1; }
grep -h "Tests run" "$here"/java/target/surefire-reports/*FaultInjectionTest.txt

echo "== container image"
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v busybox >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc busybox-static >/dev/null 2>&1 || true
fi
# Debian's podman runs here with runc, cgroupfs and no default ulimits (containers.conf).
export CONTAINERS_CONF="$work/containers.conf"
cat > "$CONTAINERS_CONF" <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
image=localhost/sluice:testcontainers
can_run=no
if command -v podman >/dev/null && command -v busybox >/dev/null; then
  mkdir -p "$work/scratch" && cp "$(command -v busybox)" "$work/scratch/busybox"
  printf 'FROM scratch\nCOPY busybox /busybox\n' > "$work/scratch/Containerfile"
  if podman build -q -t localhost/sluice-scratch-check "$work/scratch" >/dev/null 2>&1 \
     && podman run --rm -p 127.0.0.1::80 localhost/sluice-scratch-check /busybox true >/dev/null 2>&1; then
    can_run=yes
  fi
fi
if [ "$can_run" = yes ]; then
  "$root/container/build.sh" "$bin" "$image" >/dev/null
  echo "image size: $(podman image inspect "$image" --format '{{.Size}}') bytes"
  socket="$work/podman.sock"
  podman system service --time=0 "unix://$socket" >"$work/podman-service.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
  export DOCKER_HOST="unix://$socket" TESTCONTAINERS_RYUK_DISABLED=true SLUICE_IMAGE="$image"
  # This machine is itself a container (/.dockerenv): testcontainers-python must still use
  # the Docker host's address, not a bridge's.
  export TESTCONTAINERS_CONNECTION_MODE=docker_host
  started=$(date +%s%N)
  cid=$(podman run -d --rm -p 127.0.0.1::9092 "$image")
  until podman logs "$cid" 2>&1 | grep -q "Transitioning from RECOVERY to RUNNING"; do sleep 0.01; done
  echo "start to RUNNING: $(( ($(date +%s%N) - started) / 1000000 )) ms (podman run included)"
  podman rm -f "$cid" >/dev/null
  echo "== Testcontainers for Java: KafkaContainer"
  (cd "$here/java" && timeout 300 mvn -q -B -o test -Dtest=KafkaContainerTest "-Dsluice.image=$image")
  grep -h "Tests run" "$here"/java/target/surefire-reports/*KafkaContainerTest.txt
  echo "== testcontainers-python"
  timeout 300 "$venv/bin/pytest" -q -p no:cacheprovider "$here/python/test_testcontainers.py"
  echo "== testcontainers-go"
  (cd "$here/go" && GOFLAGS=-mod=mod timeout 400 go test -count=1 ./...)
else
  echo "containers cannot run here: running the image's entrypoint outside a container instead"
  port=$(free_port)
  env -i PATH="$PATH" CLUSTER_ID=4L6g3nShT-eMCtK--X86sw KAFKA_NODE_ID=1 \
    KAFKA_LISTENERS="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$(free_port)" \
    KAFKA_ADVERTISED_LISTENERS="PLAINTEXT://127.0.0.1:$port" KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER \
    KAFKA_PROCESS_ROLES=broker,controller KAFKA_LOG_DIRS="$work/entrypoint" \
    "$bin" --config "$root/container/rootfs/etc/kafka/docker/server.properties" --kafka-env \
    >"$work/entrypoint.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q "Transitioning from RECOVERY to RUNNING" "$work/entrypoint.log" && break; sleep 0.1; done
  grep -q "Transitioning from RECOVERY to RUNNING" "$work/entrypoint.log"
  echo entrypoint | kcat -P -b "127.0.0.1:$port" -t outside
  [ "$(kcat -C -b "127.0.0.1:$port" -t outside -e -q)" = entrypoint ]
  echo "1 passed, 0 failed: the entrypoint's settings serve a produce and a consume"
fi
