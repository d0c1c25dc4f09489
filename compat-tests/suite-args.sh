# Sourced by the client-suite runners (franz-go/run.sh, librdkafka/run.sh): their shared command
# line. `suite_args HELP_LINES "$@"` sets
#   args        the options passed on to run.py (--kafka, --all, --tests X, -j N)
#   build_only  1 with --build-only
#   broker      sluice or kafka
#   bin         the sluice binary (default target/release/sluice)
# and `suite_sluice_bin` checks the binary, makes its path absolute and adds --sluice to args.
suite_args() {
  local help_lines="$1"; shift
  args=() build_only=0 broker=sluice bin="$repo/target/release/sluice"
  while [ $# -gt 0 ]; do
    case "$1" in
      --build-only) build_only=1 ;;
      --kafka) broker=kafka; args+=(--kafka) ;;
      --all) args+=(--all) ;;
      --tests|-j) args+=("$1" "${2:?$1 needs a value}"); shift ;;
      -j[0-9]*) args+=(-j "${1#-j}") ;;
      -h|--help) sed -n "${help_lines}p" "$0"; exit 0 ;;
      -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
      *) bin="$1" ;;
    esac
    shift
  done
}

suite_sluice_bin() {
  [ -x "$bin" ] || { echo "run.sh: $bin is not an executable; build it (cargo build --release) or pass its path" >&2; exit 2; }
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  args+=(--sluice "$bin")
}
