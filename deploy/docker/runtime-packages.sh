#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages that hold the shared libraries the given binaries load
# (ldd + dpkg -S), one per line, sorted. The Dockerfiles run it in the build stage so that
# the runtime stage installs exactly those packages (the runtime halves of the -dev packages
# tools/install-deps.sh installs) whatever the distribution release calls them.
#   deploy/docker/runtime-packages.sh build/worker/worker build/router/router > packages.txt
# Libraries that are not found (the CUDA driver's libcuda, which the container runtime mounts)
# or belong to no package (anything under /usr/local) are skipped, with a note on stderr.
set -euo pipefail
for bin in "$@"; do
  ldd "$bin" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}
                    /=> not found/ {print "runtime-packages.sh: " $1 " not found; skipped" > "/dev/stderr"}'
done | sort -u | while read -r lib; do
  real=$(readlink -f "$lib")
  # Merged /usr: the package may list /lib/... or /usr/lib/... for the same file.
  for path in "$lib" "$real" "/usr$lib" "${lib#/usr}" "/usr$real" "${real#/usr}"; do
    if owner=$(dpkg -S "$path" 2>/dev/null); then
      echo "${owner%%:*}"
      continue 2
    fi
  done
  echo "runtime-packages.sh: $lib belongs to no package; skipped" >&2
done | sort -u
