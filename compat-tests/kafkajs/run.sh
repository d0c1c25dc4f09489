#!/usr/bin/env bash
# Our kafkajs scenarios (test/*.test.js, node's built-in test runner) against a broker. kafkajs
# itself comes from the npm registry at the version package-lock.json pins (`npm ci`).
#
#   run.sh [SLUICE_BIN]            CI: the scenarios in tests.allow against sluice
#                                  (default target/release/sluice); exits non-zero on any failure
#   run.sh [SLUICE_BIN] --all      every scenario against sluice (the full report)
#   run.sh --kafka [--all]         the same against Apache Kafka 4.4 (compat-tests/kafka/start-kafka.sh)
#   run.sh ... --tests 'a,b'       only these scenarios (names as in the test files)
#   run.sh --setup-only            install node (apt, if missing) and kafkajs, run nothing
#
# Each scenario gets its own sluice (free loopback port, empty data dir); against Kafka one broker
# serves each test file. Results: compat-tests/.cache/results/kafkajs-<sluice|kafka>-<mode>.json.
# KAFKAJS_LOG=debug shows kafkajs's own log; KAFKAJS_KEEP=1 keeps the brokers' data dirs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
compat="$(cd "$here/.." && pwd)"
repo="$(cd "$compat/.." && pwd)"
say() { echo "kafkajs/run.sh: $*"; }

setup() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    say "installing nodejs and npm with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
  fi
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 18 ] || { say "node $major is too old: the scenarios need node 18+ (node:test)" >&2; exit 2; }
  # npm ci only when package-lock.json changed since the last install.
  local sum stamp="$here/node_modules/.lock.sha256"
  sum="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && [ -f "$here/node_modules/kafkajs/package.json" ]; then
    say "kafkajs $(node -p "require('$here/node_modules/kafkajs/package.json').version") installed"
  else
    say "npm ci (package-lock.json)"
    (cd "$here" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
    echo "$sum" > "$stamp"
  fi
}

args=() broker=sluice bin="$repo/target/release/sluice" setup_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --setup-only) setup_only=1 ;;
    --kafka) broker=kafka ;;
    --all) args+=(--all) ;;
    --tests) args+=(--tests "$2"); shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) bin="$1" ;;
  esac
  shift
done

setup
[ "$setup_only" = 1 ] && exit 0
if [ "$broker" = kafka ]; then
  ls "$compat/.cache/kafka/libs"/kafka_2.13-*.jar >/dev/null 2>&1 || "$compat/setup.sh"
  args+=(--broker kafka)
else
  [ -x "$bin" ] || { echo "run.sh: $bin is not an executable; build it (cargo build --release) or pass its path" >&2; exit 2; }
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  args+=(--broker sluice --sluice "$bin")
fi
work="$compat/.cache/kafkajs/work"
mkdir -p "$work"
# The whole run is bounded too; each scenario has its own timeout (90-150 s).
cd "$here"
KAFKAJS_WORK="$work" exec timeout --kill-after=30 1800 node run.mjs "${args[@]}"
