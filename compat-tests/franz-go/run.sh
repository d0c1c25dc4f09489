#!/usr/bin/env bash
# franz-go's pkg/kgo integration tests against a broker. The tests are never copied into this
# tree: go.mod here pins franz-go, and `go test -c` builds its kgo test binary from the Go module
# cache (filled from the module proxy). The binary is cached.
#
#   run.sh [SLUICE_BIN]            CI: the tests in tests.allow against sluice
#                                  (default target/release/sluice); exits non-zero on any failure
#   run.sh [SLUICE_BIN] --all      every broker test against sluice (the full report)
#   run.sh --kafka [--all]         the same against Apache Kafka 4.4 (compat-tests/kafka/start-kafka.sh)
#   run.sh ... --tests TestA,TestB only these tests
#   run.sh ... -j N                N tests at a time, each with its own sluice (default 2; env FRANZ_GO_JOBS)
#   run.sh --build-only            build the test binary, run nothing
#
# Results: compat-tests/.cache/results/franz-go-<sluice|kafka>-<mode>.json; logs in
# compat-tests/.cache/franz-go/logs/. Environment passed to the tests: KGO_SEEDS, KGO_TEST_RF=1,
# KGO_TEST_RECORDS (default 10000 here; franz-go's own default is 500000).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
compat="$(cd "$here/.." && pwd)"
repo="$(cd "$compat/.." && pwd)"
cache="${FRANZ_GO_CACHE:-$compat/.cache/franz-go}"
say() { echo "franz-go/run.sh: $*"; }

command -v go >/dev/null 2>&1 || { say "needs the Go toolchain (go 1.26+) in PATH" >&2; exit 2; }
version="$(sed -n 's/^require github.com\/twmb\/franz-go \(v[^ ]*\).*/\1/p' "$here/go.mod")"
[ -n "$version" ] || { say "no franz-go version in $here/go.mod" >&2; exit 2; }
gover="$(go env GOVERSION)"
testbin="$cache/kgo-$version.test"
stamp="$testbin.stamp"

build() {
  if [ -x "$testbin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version $gover" ]; then
    say "kgo test binary $version cached ($testbin)"
    return
  fi
  mkdir -p "$cache"
  local t0; t0=$(date +%s)
  say "building franz-go $version pkg/kgo tests with $gover"
  (cd "$here" && go mod download github.com/twmb/franz-go \
     && go test -c -o "$testbin" github.com/twmb/franz-go/pkg/kgo)
  echo "$version $gover" > "$stamp"
  say "built in $(( $(date +%s) - t0 )) s"
}

# shellcheck source=../suite-args.sh
source "$compat/suite-args.sh"
suite_args 2,16 "$@"

build
[ "$build_only" = 1 ] && exit 0
pkgdir="$(cd "$here" && go list -m -f '{{.Dir}}' github.com/twmb/franz-go)/pkg/kgo"
if [ "$broker" = kafka ]; then
  ls "$compat/.cache/kafka/libs"/kafka_2.13-*.jar >/dev/null 2>&1 || "$compat/setup.sh"
else
  suite_sluice_bin
fi
exec python3 "$here/run.py" --testbin "$testbin" --pkgdir "$pkgdir" --version "$version" "${args[@]}"
