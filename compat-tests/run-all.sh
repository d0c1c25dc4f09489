#!/usr/bin/env bash
# The full compatibility run: every test of every suite (not only tests.allow), then the report
# card. CI runs the tests.allow subsets instead (scripts/test-all.sh); this is the run behind
# REPORT.md and the FINDINGS.md files.
#   compat-tests/run-all.sh [SLUICE_BIN]   against sluice (default target/release/sluice)
#   compat-tests/run-all.sh --kafka        the same suites against Apache Kafka 4.4.0: the
#                                          differential check (a test failing on both is a bad
#                                          test; failing on sluice only, a sluice bug)
# Every suite runs even when an earlier one fails; the exit status is non-zero if any failed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
case "${1:-}" in
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  --kafka) target=(--kafka) ;;
  "") target=("$repo/target/release/sluice") ;;
  *) target=("$1") ;;
esac

"$here/setup.sh" || exit 1
failed=()
suite() {
  local name="$1"; shift
  printf '\n==> %s\n' "$name"
  "$@" || failed+=("$name")
}
suite "core (Python clients, kcat, Kafka's tools, franz-go group test)" bash "$here/run-core.sh" "${target[@]}"
suite "Java client and CLI tools" bash "$here/java/run.sh" "${target[@]}" --all
suite "transactions (confluent-kafka, kill -9, DumpLogSegments, vs Kafka)" bash "$here/transactions/run.sh" "${target[@]}" --all
suite "librdkafka test suite" bash "$here/librdkafka/run.sh" "${target[@]}" --all
suite "franz-go kgo tests" bash "$here/franz-go/run.sh" "${target[@]}" --all
suite "kafkajs scenarios" bash "$here/kafkajs/run.sh" "${target[@]}" --all
printf '\n==> report card\n'
python3 "$here/report.py" || failed+=("report.py")
if [ ${#failed[@]} -gt 0 ]; then
  printf 'run-all.sh: failures in: %s (an --all run includes the tests each FINDINGS.md explains)\n' "${failed[*]}"
  exit 1
fi
echo "run-all.sh: every suite passed"
