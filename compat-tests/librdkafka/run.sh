#!/usr/bin/env bash
# librdkafka's own test suite (tests/0xxx from Debian bookworm's librdkafka source package)
# against a broker. The suite is never copied into this tree: this script fetches the pinned source
# package with `apt-get source`, builds librdkafka and its test-runner, and caches the build.
#
#   run.sh [SLUICE_BIN]            CI: the tests in tests.allow against sluice
#                                  (default target/release/sluice); exits non-zero on any failure
#   run.sh [SLUICE_BIN] --all      every broker test against sluice (the full report)
#   run.sh --kafka [--all]         the same against Apache Kafka 4.4 (compat-tests/kafka/start-kafka.sh)
#   run.sh ... --tests 0001,0045   only these test numbers
#   run.sh ... -j N                N test numbers at a time, each with its own sluice (default 3; env LIBRDKAFKA_JOBS)
#   run.sh --build-only            fetch and build the suite, run nothing
#
# Results: compat-tests/.cache/results/librdkafka-<sluice|kafka>.json (one entry per test:
# pass/fail/skip/excluded, seconds, reason); logs in compat-tests/.cache/librdkafka/logs/.
# The build is cached in $LIBRDKAFKA_CACHE (default compat-tests/.cache/librdkafka).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
compat="$(cd "$here/.." && pwd)"
repo="$(cd "$compat/.." && pwd)"

# The version Debian bookworm ships (apt-cache policy librdkafka1). Bump it with the allowlist.
DEB_VERSION="2.0.2-1"
UPSTREAM_VERSION="${DEB_VERSION%-*}"
cache="${LIBRDKAFKA_CACHE:-$compat/.cache/librdkafka}"
tree="$cache/librdkafka-$DEB_VERSION"
stamp="$tree/.built"
# What the stamp records: the version and the patch below, so a change of either rebuilds.
BUILD_ID="$DEB_VERSION rf1"

say() { echo "librdkafka/run.sh: $*"; }

build() {
  if [ -x "$tree/tests/test-runner" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$BUILD_ID" ]; then
    say "test-runner $DEB_VERSION cached in $tree"
    return
  fi
  local t0; t0=$(date +%s)
  export DEBIAN_FRONTEND=noninteractive
  # Source packages need deb-src lines; add bookworm's if none is configured.
  if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    say "adding deb-src for bookworm (/etc/apt/sources.list.d/sluice-compat-deb-src.sources)"
    cat > /etc/apt/sources.list.d/sluice-compat-deb-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -q >/dev/null
  fi
  local deps=(dpkg-dev build-essential pkg-config python3 libssl-dev zlib1g-dev liblz4-dev
              libzstd-dev libsasl2-dev rapidjson-dev)
  local missing=()
  for p in "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing build dependencies: ${missing[*]}"
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || {
      apt-get update -q >/dev/null
      apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    }
  fi
  rm -rf "$tree" "$cache/src"
  mkdir -p "$cache/src"
  say "fetching the librdkafka $DEB_VERSION source package"
  (cd "$cache/src" && { apt-get source -q --download-only "librdkafka=$DEB_VERSION" >/dev/null 2>&1 || {
     apt-get update -q >/dev/null
     apt-get source -q --download-only "librdkafka=$DEB_VERSION" >/dev/null; }; })
  # apt-get checked the files against the archive's signed Sources index; dpkg-source only
  # warns that it has no key to check the .dsc's own signature with.
  dpkg-source -x "$cache/src/librdkafka_$DEB_VERSION.dsc" "$tree" > "$cache/extract.log" 2>&1 \
    || { cat "$cache/extract.log" >&2; exit 1; }
  # The transaction tests create their topics with replication factor 3, which one broker
  # (sluice, or a single-node Kafka) refuses; they run here with replication factor 1.
  sed -i -E 's/(test_create_topic\([^;]*), 3\);/\1, 1);/' "$tree/tests/0103-transactions.c"
  sed -i -E 's/(Test::create_topic\([^;]*), 3\);/\1, 1);/' "$tree/tests/0098-consumer-txn.cpp"
  say "building librdkafka $UPSTREAM_VERSION and its test-runner (log: $cache/build.log)"
  local jobs; jobs="$(nproc)"
  if ! (cd "$tree" && ./configure --prefix="$tree/_install" && make -j"$jobs" -C src lib \
        && make -j"$jobs" -C src-cpp lib && make -j"$jobs" -C tests build) > "$cache/build.log" 2>&1; then
    tail -n 40 "$cache/build.log" >&2
    say "build failed" >&2
    exit 1
  fi
  # Keep the libraries and the test-runner; drop the object files.
  find "$tree" -name '*.o' -delete
  echo "$BUILD_ID" > "$stamp"
  say "built in $(( $(date +%s) - t0 )) s"
}

# shellcheck source=../suite-args.sh
source "$compat/suite-args.sh"
suite_args 2,17 "$@"

build
[ "$build_only" = 1 ] && exit 0
# Kafka's jars: the Kafka broker, and the kafka-topics.sh/kafka-acls.sh some tests run (KAFKA_PATH).
ls "$compat/.cache/kafka/libs"/kafka_2.13-*.jar >/dev/null 2>&1 || "$compat/setup.sh"
if [ "$broker" = sluice ]; then
  suite_sluice_bin
fi
exec python3 "$here/run.py" --tree "$tree" --version "$DEB_VERSION" "${args[@]}"
