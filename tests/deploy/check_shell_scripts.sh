#!/usr/bin/env bash
# ctest deploy.shell_scripts: the shell scripts of deploy/ (the Slurm batch script, the
# Dockerfiles' helper, these tests, the two-hosts scripts, the benchmark and GPU-check scripts) parse (bash -n) and pass shellcheck when it is installed;
# without it only bash -n runs, and the output says so.
#   tests/deploy/check_shell_scripts.sh SOURCE_DIR
set -euo pipefail
src=$1
scripts=("$src/deploy/slurm/llm-serve.sbatch" "$src/deploy/docker/runtime-packages.sh"
         "$src"/tests/deploy/*.sh "$src/tools/two-hosts.sh" "$src/tests/mpi/two_hosts_serve.sh"
         "$src/tools/bench-routing.sh" "$src/tools/bench-vs-llama-cpp.sh"
         "$src/tools/bench-vs-llama-server.sh" "$src/tools/gpu-check.sh" "$src/tools/gpu-bundle.sh")
for s in "${scripts[@]}"; do
  bash -n "$s"
done
if command -v shellcheck >/dev/null; then
  shellcheck "${scripts[@]}"
  echo "bash -n and shellcheck: ${#scripts[@]} scripts OK"
else
  echo "bash -n: ${#scripts[@]} scripts OK (shellcheck not installed: not linted)"
fi
