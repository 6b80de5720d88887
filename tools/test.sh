#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): installs the Debian packages,
# configures with warnings as errors, builds everything and runs every ctest test.
# Tests that need ../shared data skip with a message naming what is missing; `gpu` tests skip
# without a GPU. Then, when clang with libFuzzer is installed, builds the fuzz targets in
# build-fuzz/ (clang, ASan + UBSan, only the targets and their libraries) and runs each over its
# seed corpus for a few seconds (tools/fuzz.sh --smoke); LLM_FUZZ_SMOKE=0 skips that.
# Usage: tools/test.sh [extra ctest args, e.g. -L unit]
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

if [ "${LLM_FUZZ_SMOKE:-1}" = 0 ]; then
  echo "test.sh: fuzz smoke runs skipped (LLM_FUZZ_SMOKE=0)"
elif command -v clang++ >/dev/null &&
    echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null; then
  bash tools/fuzz.sh --smoke
else
  echo "test.sh: SKIP fuzz smoke runs: clang with libFuzzer (clang, libclang-rt-14-dev) is not installed"
fi
