#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): installs the Debian packages,
# configures with warnings as errors, builds everything and runs every ctest test.
# Tests that need ../shared data skip with a message naming what is missing; `gpu` tests skip
# without a GPU. Usage: tools/test.sh [extra ctest args, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then
  bash tools/install-deps.sh
else
  sudo bash tools/install-deps.sh
fi
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLM_WERROR=ON
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 "$@"
