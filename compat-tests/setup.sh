#!/usr/bin/env bash
# Install what the compat tests need; idempotent and quick when already done.
#   - kcat (Debian package)
#   - compat-tests/.venv with the pinned python/requirements.txt
#   - Apache Kafka jars (version pinned in kafka/pom.xml) in compat-tests/.cache/kafka/libs
#   - the Go modules of go/ (franz-go), from the Go module proxy into the module cache
#   - node and npm (apt, if missing) and kafkajs/node_modules (`npm ci` from kafkajs/package-lock.json)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$here/.cache"
mkdir -p "$cache"
say() { echo "setup.sh: $*"; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# 1. kcat
if command -v kcat >/dev/null 2>&1; then
  say "kcat present ($(command -v kcat))"
else
  say "installing kcat with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends kcat >/dev/null
fi

# 2. Python venv
req="$here/python/requirements.txt"
req_sum="$(sha256sum "$req" | cut -d' ' -f1)"
if [ -x "$here/.venv/bin/python" ] && stamp_ok "$here/.venv/.requirements.sha256" "$req_sum"; then
  say "venv up to date ($here/.venv)"
else
  say "creating venv $here/.venv from python/requirements.txt"
  [ -x "$here/.venv/bin/python" ] || python3 -m venv "$here/.venv"
  "$here/.venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  echo "$req_sum" > "$here/.venv/.requirements.sha256"
fi

# 3. Kafka jars
pom="$here/kafka/pom.xml"
pom_sum="$(sha256sum "$pom" | cut -d' ' -f1)"
libs="$cache/kafka/libs"
if stamp_ok "$cache/kafka/.pom.sha256" "$pom_sum" && ls "$libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
  say "Kafka jars up to date ($libs)"
else
  say "fetching Kafka jars with Maven into $libs"
  rm -rf "$libs"
  (cd "$here/kafka" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$libs")
  echo "$pom_sum" > "$cache/kafka/.pom.sha256"
fi
# 4. Go modules for go/ (franz-go; versions pinned by go/go.mod and go/go.sum)
command -v go >/dev/null 2>&1 || { echo "setup.sh: go is not on PATH (needed by go/run.sh)" >&2; exit 1; }
(cd "$here/go" && GOFLAGS="-mod=mod -buildvcs=false" timeout 600 go mod download)
say "Go modules present ($(go env GOMODCACHE))"
# 5. kafkajs (npm registry; version pinned by kafkajs/package-lock.json), node via apt if missing
"$here/kafkajs/run.sh" --setup-only
say "done"
