#!/usr/bin/env bash
# Run the core compat suite: setup.sh, pytest against one broker, then the franz-go test (go/run.sh).
#   compat-tests/run-core.sh [SLUICE_BIN] [pytest args...]   sluice (default: target/release/sluice)
#   compat-tests/run-core.sh --kafka [pytest args...]         Apache Kafka 4.4 from the jar cache
# Writes a JUnit XML report to compat-tests/.cache/results/; exits non-zero on any failure of either.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

"$here/setup.sh"
mkdir -p "$here/.cache/results"
if [ "${1:-}" = "--kafka" ]; then
  shift
  export KAFKA_MANAGED=1
  unset SLUICE_BIN KAFKA_BOOTSTRAP
  name=kafka
else
  bin="$repo/target/release/sluice"
  if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then bin="$1"; shift; fi
  [ -x "$bin" ] || { echo "run-core.sh: $bin is not an executable; build it or pass its path" >&2; exit 2; }
  SLUICE_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  export SLUICE_BIN
  unset KAFKA_MANAGED KAFKA_BOOTSTRAP
  name=sluice
fi
cd "$here/python"
# The whole run is bounded too; each test also has its own timeout (pytest.ini).
rc=0
timeout --kill-after=30 1800 "$here/.venv/bin/pytest" -v \
  --junitxml="$here/.cache/results/core-$name.xml" "$@" || rc=$?
# franz-go (Go): its own broker, bounded timeouts; see go/run.sh.
"$here/go/run.sh" "$([ "$name" = kafka ] && echo --kafka || echo "$SLUICE_BIN")" || rc=$?
exit "$rc"
