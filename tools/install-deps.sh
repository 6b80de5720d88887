#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent; run as root.
# CUDA (nvcc, cuBLAS, NCCL) is not installed here: it is picked up from /usr/local/cuda when present.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (apt-get needs it)" >&2
  exit 1
fi
packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev libboost-system-dev libssl-dev openssl
  libopenmpi-dev openmpi-bin
  libyaml-cpp-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev
  libonig-dev libutf8proc-dev
  curl procps
)
# clang with libFuzzer and the sanitizer runtimes, for the fuzz smoke runs of tools/test.sh
# (tests/fuzz/); optional: skipped when the packages cannot be found.
# The checkers of the deploy/ tests (ctest -R deploy: systemd-analyze, python3-yaml and
# ShellCheck) and of the two-host MPI test (sshd in a network namespace, tools/two-hosts.sh),
# optional too: those tests skip with a message without them. Installing openssh-server does not
# start an sshd where policy-rc.d forbids it (containers); the test starts its own.
optional_packages=(clang libclang-rt-14-dev systemd python3-yaml shellcheck openssh-server openssh-client iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
missing_optional=()
for p in "${optional_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_optional+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ]; then
  echo "install-deps.sh: all packages present"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ ${#missing[@]} -ne 0 ]; then
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ${#missing_optional[@]} -ne 0 ]; then
  apt-get install -y -qq --no-install-recommends "${missing_optional[@]}" ||
    echo "install-deps.sh: optional packages (clang/libFuzzer, deploy checkers) not installable; tools/test.sh skips what needs them"
fi
