# Shell pieces for running an older Apache Kafka release; source it (after lib.sh), do not run it.
#   fetch_release VERSION        org.apache.kafka:kafka_2.13:VERSION and its runtime dependencies
#                                from Maven Central (mvn), into compat-tests/.cache/kafka-releases/VERSION/libs
#   start_release VERSION WORK PORT
#                                a single node of VERSION as it runs in production with its defaults
#                                (KRaft, broker and controller in one process, from 3.3; a ZooKeeper
#                                broker before, with the ZooKeeper of its jars) on 127.0.0.1:PORT, data
#                                under WORK; returns once it answers ApiVersions; sets started_pids
#   stop_release                 stops what start_release started
# check-release-api-versions.sh and test-version-emulation.sh --kafka use them.

release_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
release_repo="$(cd "$release_lib_dir/../.." && pwd)"
started_pids=""

fetch_release() {
  local version="$1" dir="$release_repo/compat-tests/.cache/kafka-releases/$1"
  if ls "$dir/libs"/kafka_2.13-*.jar >/dev/null 2>&1; then return 0; fi
  mkdir -p "$dir"
  cat > "$dir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.sluice.compat</groupId><artifactId>kafka-release</artifactId><version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
  (cd "$dir" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$dir/libs") > "$dir/mvn.log" 2>&1 || { cat "$dir/mvn.log" >&2; return 1; }
}

# Starts VERSION with data under WORK on PORT; sets started_pids.
start_release() {
  local version="$1" work="$2" port="$3" libs="$release_repo/compat-tests/.cache/kafka-releases/$1/libs"
  local cport major minor
  cport="$(free_port)"
  major="${version%%.*}"; minor="${version#*.}"; minor="${minor%%.*}"
  run() { java -Xmx512m -cp "$libs/*" "$@"; }
  mkdir -p "$work"
  if [ "$major" -lt 3 ] || { [ "$major" = 3 ] && [ "$minor" -lt 3 ]; }; then
    local zport; zport="$(free_port)"
    printf 'dataDir=%s/zk\nclientPort=%s\nadmin.enableServer=false\n' "$work" "$zport" > "$work/zk.properties"
    run org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zk.properties" > "$work/zk.out" 2>&1 &
    started_pids="$!"
    cat > "$work/server.properties" <<PROPS
broker.id=1
zookeeper.connect=127.0.0.1:$zport
listeners=PLAINTEXT://127.0.0.1:$port
log.dirs=$work/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
PROPS
  else
    cat > "$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$work/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
PROPS
    run kafka.tools.StorageTool format -t "$(run kafka.tools.StorageTool random-uuid 2>/dev/null)" \
      -c "$work/server.properties" > "$work/format.out" 2>&1
    started_pids=""
  fi
  run kafka.Kafka "$work/server.properties" > "$work/kafka.out" 2>&1 &
  started_pids="$started_pids $!"
  local _
  for _ in $(seq 1 300); do
    # The port opens before the broker has caught up with its metadata; ApiVersions answers
    # once it serves.
    if port_open "$port" && python3 "$release_lib_dir/api_versions.py" "127.0.0.1:$port" > /dev/null 2>&1; then
      sleep 2; return 0
    fi
    sleep 0.2
  done
  echo "start_release: $version did not start; see $work/kafka.out" >&2
  tail -n 20 "$work/kafka.out" >&2
  return 1
}

stop_release() {
  local pid
  for pid in $started_pids; do kill "$pid" 2>/dev/null || true; done
  for pid in $started_pids; do wait "$pid" 2>/dev/null || true; done
  started_pids=""
}

