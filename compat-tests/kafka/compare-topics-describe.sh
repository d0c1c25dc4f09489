#!/usr/bin/env bash
# Issue 7's acceptance check: `kafka-topics --describe` prints the same for a topic on sluice as
# on Apache Kafka (the pinned 4.4.0), except for ids and timings.
#   compare-topics-describe.sh [SLUICE_BIN]     (default target/release/sluice)
# Starts sluice and a real Kafka (start-kafka.sh) side by side, creates the same topics with the
# same partitions and configs on both with TopicCommand, grows one with --alter --partitions,
# runs --describe on each, replaces topic ids with <id>, and diffs. Exits 1 on any difference,
# printing both outputs. Takes about 30 s, most of it Kafka's start.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:-$repo/target/release/sluice}"
[ -x "$bin" ] || { echo "compare-topics-describe.sh: $bin is not an executable" >&2; exit 2; }
if ! ls "$here/../.cache/kafka/libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
  "$here/../setup.sh"
fi

work="$(mktemp -d /tmp/compare-describe-XXXXXX)"
# shellcheck source=lib.sh
. "$here/lib.sh"
start_side_by_side compare-topics-describe.sh "$bin" "$work"

topics() { "$here/run-class.sh" org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$1" "${@:2}"; }

# Each topic: name, then TopicCommand arguments.
setup() {
  local port=$1
  topics "$port" --create --topic cmp-plain --partitions 1 --replication-factor 1 > /dev/null
  topics "$port" --create --topic cmp-configs --partitions 3 --replication-factor 1 \
    --config retention.ms=7200000 --config cleanup.policy=compact --config max.message.bytes=2000000 \
    --config message.timestamp.type=LogAppendTime --config compression.type=zstd > /dev/null
  topics "$port" --create --topic cmp-grown --partitions 2 > /dev/null
  topics "$port" --alter --topic cmp-grown --partitions 5 > /dev/null
}

# --describe once every partition has a leader (Kafka elects them a moment after creating).
describe() {
  local port=$1 out
  for _ in $(seq 1 60); do
    out="$(topics "$port" --describe --topic 'cmp-.*' 2>&1)" || true
    if [ "$(grep -c 'Leader: 1' <<< "$out")" = 9 ]; then
      sed -E 's/TopicId: [^[:space:]]+/TopicId: <id>/' <<< "$out"
      return 0
    fi
    sleep 0.5
  done
  echo "$out"
  return 1
}

setup "$sluice_port"
setup "$kafka_port"
describe "$sluice_port" > "$work/sluice.txt" || { keep=1; echo "sluice: partitions without a leader" >&2; cat "$work/sluice.txt"; exit 1; }
describe "$kafka_port" > "$work/kafka.txt" || { keep=1; echo "kafka: partitions without a leader" >&2; cat "$work/kafka.txt"; exit 1; }

if diff -u --label kafka "$work/kafka.txt" --label sluice "$work/sluice.txt"; then
  echo "compare-topics-describe.sh: kafka-topics --describe matches Apache Kafka ($(wc -l < "$work/kafka.txt") lines)"
else
  echo "compare-topics-describe.sh: kafka-topics --describe differs from Apache Kafka (diff above)" >&2
  exit 1
fi
