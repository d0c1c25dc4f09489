#!/usr/bin/env bash
# Java compatibility suite: Kafka 4.4's Java clients and CLI tools against a broker.
#   run.sh [SLUICE_BIN]            sluice (default target/release/sluice), tests listed in tests.allow;
#                                  fails on any failure: this is the CI run
#   run.sh [SLUICE_BIN] --all      every test against sluice (the full report; FINDINGS.md explains failures)
#   run.sh --kafka                 every test against Apache Kafka 4.4 (compat-tests/kafka/start-kafka.sh)
#   run.sh ... --test PATTERN      only these tests (surefire -Dtest syntax, e.g. 'AdminClientTest#listTopics')
#   run.sh ... --client 3.9        the same tests on the Java client 3.9 (pom.xml's client-3.9 profile),
#                                  without the CLI tool tests (tagged "tools"), built in target/client-3.9
# Reports: target/surefire-reports/ (XML, and <class>-output.txt with client logs and broker output tails);
# with --client 3.9, target/client-3.9/surefire-reports/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="$repo/target/release/sluice"
mode=allow broker=sluice pattern="" client=""
while [ $# -gt 0 ]; do
  case "$1" in
    --all) mode=all ;;
    --kafka) broker=kafka; [ "$mode" = pattern ] || mode=kafka ;;
    --test) pattern="${2:?--test needs a pattern}"; mode=pattern; shift ;;
    --client) client="${2:?--client needs a version}"; shift
              [ "$client" = 3.9 ] || { echo "run.sh: --client takes 3.9 (the default is pom.xml's kafka.version)" >&2; exit 2; } ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) bin="$1" ;;
  esac
  shift
done

unset KAFKA_BOOTSTRAP KAFKA_MANAGED SLUICE_BIN
if [ "$broker" = kafka ]; then
  if ! ls "$here/../.cache/kafka/libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
    "$here/../setup.sh"  # fetches the Kafka jars that start-kafka.sh runs
  fi
  export KAFKA_MANAGED=1
else
  [ -x "$bin" ] || { echo "run.sh: $bin is not an executable; build it (cargo build --release) or pass its path" >&2; exit 2; }
  # A private copy, so a concurrent cargo build cannot swap the binary in the middle of a run.
  mkdir -p "$here/target"
  cp "$bin" "$here/target/sluice-under-test"
  echo "run.sh: testing a copy of $bin ($(date -r "$bin" '+%F %T'))"
  SLUICE_BIN="$here/target/sluice-under-test"
  export SLUICE_BIN
fi

case "$mode" in
  allow) pattern="$(grep -v -e '^\s*#' -e '^\s*$' "$here/tests.allow" | paste -sd, -)"
         [ -n "$pattern" ] || { echo "run.sh: tests.allow lists no test" >&2; exit 2; } ;;
  all|kafka) pattern="" ;;
esac

cd "$here"
reports=target/surefire-reports
args=(-q -B -Dstyle.color=never test)
if [ -n "$client" ]; then
  reports=target/client-3.9/surefire-reports
  args+=(-Dold.client)
fi
rm -rf "$reports"
[ -n "$pattern" ] && args+=("-Dtest=$pattern")
echo "run.sh: $broker${SLUICE_BIN:+ ($SLUICE_BIN)}, tests: ${mode}${client:+, Java client $client}"
start=$(date +%s)
mkdir -p "${reports%/*}"
set +e
timeout --kill-after=30 2700 mvn "${args[@]}" > "${reports%/*}/mvn.log" 2>&1
rc=$?
set -e
if ! ls "$reports"/TEST-*.xml >/dev/null 2>&1; then
  echo "run.sh: Maven ran no test (exit $rc); the end of ${reports%/*}/mvn.log:" >&2
  tail -n 60 "${reports%/*}/mvn.log" >&2
  exit $(( rc == 0 ? 1 : rc ))
fi
python3 "$here/summary.py" "$reports" "$here/tests.allow" "$mode" "$(( $(date +%s) - start ))"
exit "$rc"
