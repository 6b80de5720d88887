#!/usr/bin/env bash
# ctest deploy.systemd_units: `systemd-analyze verify` on deploy/systemd/*.service, which must
# print nothing (it exits 0 on unknown keys and bad values, only printing them). The units name
# /opt/llmserve; a copy with that replaced by this checkout and build tree is verified, so the
# binaries they start must be built (worker, router, llm-admin). Exit 77 (ctest: skipped) when
# systemd-analyze is not installed.
#   tests/deploy/verify_systemd_units.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIPPED: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
for bin in worker/worker router/router tools/llm-admin; do
  if [ ! -x "$build/$bin" ]; then
    echo "FAILED: $build/$bin is not built (the units start it): build worker router llm-admin"
    exit 1
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The check can fail: this systemd reports a bad value.
printf '[Service]\nType=notifyy\nExecStart=/bin/true\n' > "$tmp/bad.service"
if [ -z "$(systemd-analyze verify "$tmp/bad.service" 2>&1)" ]; then
  echo "FAILED: systemd-analyze verify printed nothing for a bad unit; the check would pass anything"
  exit 1
fi
rm "$tmp/bad.service"

for unit in "$src"/deploy/systemd/*.service; do
  sed -e "s#/opt/llmserve/build/#$build/#g" -e "s#/opt/llmserve#$src#g" "$unit" \
    > "$tmp/$(basename "$unit")"
done
out=$(cd "$tmp" && systemd-analyze verify ./*.service 2>&1) || {
  echo "FAILED: systemd-analyze verify exited non-zero:"
  echo "$out"
  exit 1
}
if [ -n "$out" ]; then
  echo "FAILED: systemd-analyze verify reported:"
  echo "$out"
  exit 1
fi

# The stop timeouts outlast the drain: coordinator/router shutdown_grace_s of deploy/cluster.yaml.
grace=$(sed -n 's/^ *shutdown_grace_s: *\([0-9]*\).*/\1/p' "$src/deploy/cluster.yaml" | sort -n | tail -1)
for unit in "$src"/deploy/systemd/*.service; do
  stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$unit")
  if [ -z "$stop" ] || [ -z "$grace" ] || [ "$stop" -le "$grace" ]; then
    echo "FAILED: $unit: TimeoutStopSec '$stop' must exceed shutdown_grace_s '$grace'"
    exit 1
  fi
done
units=("$src"/deploy/systemd/*.service)
echo "systemd-analyze verify: ${units[*]##*/} OK (TimeoutStopSec > shutdown_grace_s $grace)"
