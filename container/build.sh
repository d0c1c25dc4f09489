#!/usr/bin/env bash
# Builds sluice's container image: container/build.sh SLUICE_BINARY [TAG] (default
# localhost/sluice:latest) with podman. A static binary (scripts/build-static.sh) goes in
# alone; a dynamically linked one (target/release/sluice) brings the C library it links, as
# distroless/cc images do. busybox comes from Debian's busybox-static.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="${1:?usage: container/build.sh SLUICE_BINARY [TAG]}"
tag="${2:-localhost/sluice:latest}"
busybox="$(command -v busybox || true)"
if [ -z "$busybox" ] || ! file -L "$busybox" | grep -q 'statically linked'; then
  echo "build.sh: needs a static busybox (apt-get install busybox-static)" >&2; exit 1
fi
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp -a "$here/rootfs" "$context/rootfs"
install -m 755 "$binary" "$context/rootfs/usr/bin/sluice"
strip "$context/rootfs/usr/bin/sluice" 2>/dev/null || true
if ! file -L "$binary" | grep -Eq 'static(-pie)? linked|statically linked'; then
  # The shared libraries and the loader it names, at their paths.
  for lib in $(ldd "$binary" | grep -o '/[^ ]*'); do
    mkdir -p "$context/rootfs$(dirname "$lib")"
    cp -L "$lib" "$context/rootfs$lib"
  done
fi
mkdir -p "$context/rootfs/bin" "$context/rootfs/usr/sbin" "$context/rootfs/tmp"
chmod 1777 "$context/rootfs/tmp"
install -m 755 "$busybox" "$context/rootfs/bin/busybox"
# Only the applets the harnesses' scripts use (see docs/container.md).
for applet in sh sleep sed hostname cut cat id env tr head ls mkdir rm grep; do
  ln -s busybox "$context/rootfs/bin/$applet"
done
# Debian's busybox has no `bash` applet; the scripts run as `#!/bin/bash` or `bash x.sh` use
# nothing busybox's sh lacks, so bash is sh.
printf '#!/bin/sh\nexec /bin/sh "$@"\n' > "$context/rootfs/bin/bash"
chmod 755 "$context/rootfs/bin/bash"
printf 'root:x:0:0:root:/root:/bin/sh\nappuser:x:1000:1000::/home/appuser:/bin/sh\n' > "$context/rootfs/etc/passwd"
printf 'root:x:0:\nappuser:x:1000:\n' > "$context/rootfs/etc/group"
# What the start scripts write to: the log directory, the rendered settings, the Confluent
# scripts that Testcontainers edits in place (sed -i), and the working directory.
mkdir -p "$context/writable/var/lib/kafka/data" "$context/writable/etc/kafka" \
  "$context/writable/home/appuser" "$context/writable/mnt/shared/config"
cp -a "$here/rootfs/etc/confluent" "$context/writable/etc/confluent"
rm -rf "$context/rootfs/etc/confluent"
podman build --quiet -f "$here/Containerfile" -t "$tag" "$context" >/dev/null
echo "$tag"
