#!/usr/bin/env bash
# Installs the Debian packages (tools/install-deps.sh, needs root; nothing when all are present)
# and builds the release binaries in build/ (incremental). Idempotent: run it again after a pull.
# tools/serve.sh only starts what this built.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then bash tools/install-deps.sh; else sudo bash tools/install-deps.sh; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target worker router llm-admin llm-bench-serve
echo "setup.sh: built build/worker/worker, build/router/router and the tools; start with tools/serve.sh"
