#!/usr/bin/env bash
# Benchmarks sluice side by side with Apache Kafka 4.4.0 and writes benches/RESULTS.md and
# benches/results.png (raw figures: benches/results.json). See benches/README.md.
#   bash benches/run.sh            # 3 repetitions, 12-20 minutes depending on the load
#   bash benches/run.sh --quick    # 1 repetition, smaller data, about 5 minutes
#   bash benches/run.sh --profile  # sluice under perf record while producing and consuming
# Env: BENCH_WORK (scratch dir, default target/bench), BENCH_SKIP_BUILD=1 (use the existing
# target/release/sluice).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
work="${BENCH_WORK:-$root/target/bench}"
export BENCH_WORK="$work"
mode=full
case "${1:-}" in
  --quick) mode=quick ;;
  --profile) mode=profile ;;
  "") ;;
  *) echo "usage: $0 [--quick|--profile]" >&2; exit 2 ;;
esac
say() { echo "run.sh: $*" >&2; }
mkdir -p "$work"

cleanup() {
  # Stop every broker this run started (bench.py notes their pids; it checks each pid's
  # command line names our work dir before killing it).
  python3 "$here/bench.py" cleanup || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. Tools: Kafka jars, confluent-kafka venv, kcat (compat-tests/setup.sh), iperf3, matplotlib.
timeout 900 bash "$root/compat-tests/setup.sh" >&2
if ! command -v iperf3 >/dev/null 2>&1; then
  say "installing iperf3 with apt-get (loopback bandwidth)"
  ( export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get update -q >/dev/null && \
    timeout 300 apt-get install -y -q --no-install-recommends iperf3 >/dev/null ) \
    || say "iperf3 not installed; falling back to a Python socket test"
fi
if [ "$mode" = profile ] && ! command -v perf >/dev/null 2>&1; then
  say "installing perf with apt-get"
  ( export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get update -q >/dev/null && \
    timeout 300 apt-get install -y -q --no-install-recommends linux-perf >/dev/null )
fi
# librdkafka's C benchmark client (benches/README.md), built from the librdkafka source package
# that compat-tests/librdkafka/run.sh --build-only fetches and builds for the compat suite.
if [ "$mode" != profile ]; then
  if timeout 1800 bash "$root/compat-tests/librdkafka/run.sh" --build-only >&2; then
    tree="$(ls -d "$root"/compat-tests/.cache/librdkafka/librdkafka-*/ | head -n 1)"
    if timeout 300 make -s -C "${tree}examples" rdkafka_performance >&2; then
      export RDKAFKA_PERFORMANCE="${tree}examples/rdkafka_performance"
    fi
  fi
  [ -n "${RDKAFKA_PERFORMANCE:-}" ] || say "rdkafka_performance not built; its rows stay empty"
fi
venv="$work/venv"
if [ "$mode" != profile ] && ! "$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
  say "creating $venv with matplotlib (plot)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" \
    || say "matplotlib not installed; RESULTS.md will have no plot"
fi

# 2. sluice, release build. It runs from a copy, so a concurrent rebuild cannot swap it mid-run.
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  say "cargo build --release"
  (cd "$root" && timeout 1800 cargo build --release --bin sluice >&2)
fi
cp "$root/target/release/sluice" "$work/sluice"

# 3. Run.
if [ "$mode" = profile ]; then
  perf_dir="$work/profile"
  timeout 1200 python3 "$here/bench.py" profile --sluice "$work/sluice" --perf-dir "$perf_dir"
  perf report -i "$perf_dir/perf.data" --no-children --sort symbol --stdio --percent-limit 0.5 \
    -g none 2>/dev/null > "$perf_dir/self.txt" || true
  perf report -i "$perf_dir/perf.data" --children --sort symbol --stdio --percent-limit 2 \
    -g none 2>/dev/null > "$perf_dir/children.txt" || true
  perf report -i "$perf_dir/perf.data" --no-children --sort dso --stdio -g none \
    2>/dev/null > "$perf_dir/dso.txt" || true
  timeout 600 perf script -i "$perf_dir/perf.data" -F comm,tid,ip,sym 2>/dev/null \
    | python3 "$here/perf_summary.py" > "$perf_dir/summary.txt" || true
  timeout 600 perf script -i "$perf_dir/perf-consume.data" -F comm,tid,ip,sym 2>/dev/null \
    | python3 "$here/perf_summary.py" > "$perf_dir/summary-consume.txt" || true
  say "profile written to $perf_dir/{summary,summary-consume,self,children,dso}.txt"
  exit 0
fi
cmd="bash benches/run.sh${1:+ $1}"
limit=$([ "$mode" = quick ] && echo 1200 || echo 3000)
timeout "$limit" python3 "$here/bench.py" run ${1:+--quick} --sluice "$work/sluice" \
  --out "$here/results.json" --command "$cmd"
py=python3
"$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1 && py="$venv/bin/python"
"$py" "$here/report.py" "$here/results.json" "$here/RESULTS.md" "$here/results.png"
say "wrote benches/RESULTS.md"
