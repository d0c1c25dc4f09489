#!/usr/bin/env bash
# Run one Apache Kafka class with the jars that setup.sh cached, e.g.
#   run-class.sh org.apache.kafka.tools.DumpLogSegments --files 00000000000000000000.log --print-data-log
#   run-class.sh org.apache.kafka.tools.ProducerPerformance --help
# Env: KAFKA_HEAP_OPTS (default -Xmx512m), KAFKA_LOG_LEVEL (default WARN), KAFKA_JVM_OPTS (extra),
# KAFKA_LIBS (another directory of Kafka jars, e.g. a newer release fetched with a copy of pom.xml;
# default the pinned version's, compat-tests/.cache/kafka/libs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libs="${KAFKA_LIBS:-$here/../.cache/kafka/libs}"
if [ $# -lt 1 ]; then
  echo "usage: $0 <main class> [args...]" >&2
  exit 2
fi
if ! ls "$libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
  echo "run-class.sh: no Kafka jars in $libs; run compat-tests/setup.sh first (or set KAFKA_LIBS)" >&2
  exit 2
fi
# shellcheck disable=SC2086  # the option strings are word lists on purpose
exec java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$here/log4j2.properties" \
  ${KAFKA_JVM_OPTS:-} -cp "$libs/*" "$@"
