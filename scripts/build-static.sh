#!/usr/bin/env bash
# A statically linked sluice for the container image (container/build.sh), from the host's
# glibc: the musl target's standard library is not installable here. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS='-C target-feature=+crt-static' cargo build --release \
  --target x86_64-unknown-linux-gnu --target-dir target-static >&2
echo "$PWD/target-static/x86_64-unknown-linux-gnu/release/sluice"
