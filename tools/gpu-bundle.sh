#!/usr/bin/env bash
# The GPU check for a GPU host that has the NVIDIA driver and the CUDA libraries (cuBLAS, NCCL)
# but not the Debian packages the build needs (gRPC, Protobuf, Open MPI, yaml-cpp, spdlog, ...)
# and no way to install them: a cloud GPU image without package access, say.
#
#   tools/gpu-bundle.sh pack [FILE]   # on the build host, after a CUDA build in build/:
#                                     # binaries + their shared libraries + Open MPI (relocated)
#                                     # + the test data -> FILE (default llm-gpu-bundle.tar.xz)
#   tools/gpu-bundle.sh check FILE    # on the GPU host, in a checkout of the same commit:
#                                     # unpacks FILE and runs PREBUILT=1 tools/gpu-check.sh
#   tools/gpu-bundle.sh run FILE CMD... # the same unpacking, then CMD in the bundle's
#                                     # environment (a benchmark, a profiler over build/...)
#
# The binaries hold the build's absolute paths (the checkout and ../shared at build time, e.g.
# /work/main and /work/shared): `check` links those paths to this checkout and to the bundle's
# data when they are free on the GPU host, and stops naming them when they are not. Open MPI is
# used from the bundle through OPAL_PREFIX (nothing is written outside the checkout, the
# unpack folder and those two links). The glibc of the build host (Debian 12: 2.36) or newer is
# needed on the GPU host. Environment of `check`: BUNDLE_DIR (unpack folder, default
# /tmp/llm-gpu-bundle) and whatever tools/gpu-check.sh takes (SKIP_BENCH, RANKS, WORK, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

die() {
  echo "gpu-bundle: $*" >&2
  exit 1
}

pack() {
  local out=${1:-llm-gpu-bundle.tar.xz}
  [[ "$out" = /* ]] || out="$root/$out"
  [ -x build/tests/gpu_test ] || die "build/tests/gpu_test is missing: build with CUDA first (cmake -S . -B build -DLLM_ENABLE_CUDA=ON && cmake --build build)"
  local shared
  shared=$(sed -n 's/^LLM_SHARED_DIR:PATH=//p' build/CMakeCache.txt)
  local stage
  stage=$(mktemp -d /tmp/gpu-bundle.XXXXXX)
  # shellcheck disable=SC2064  # expand now: the folder of this call
  trap "rm -rf '$stage'" EXIT
  mkdir -p "$stage/lib" "$stage/root" "$stage/shared/models" "$stage/shared/golden"
  local bins=(build/tests/gpu_test build/tests/integration_test build/worker/worker
              build/router/router build/tools/llm-bench build/tools/llm-bench-serve
              build/tools/llm-admin build/tools/llm-generate)
  for b in "${bins[@]}"; do
    [ -x "$b" ] || die "$b is missing: build everything first (cmake --build build)"
    mkdir -p "$stage/$(dirname "$b")"
    cp "$b" "$stage/$b"
    strip --strip-debug "$stage/$b"
  done
  # ctest's files (absolute paths of the build host; `check` links that path to the checkout).
  (find build -name CTestTestfile.cmake -o -name '*_tests.cmake' -o -name '*_include.cmake') |
    while read -r f; do mkdir -p "$stage/$(dirname "$f")" && cp "$f" "$stage/$f"; done
  # Open MPI and PMIx as Debian installs them, relocated at run time (OPAL_PREFIX).
  local mpi=(usr/lib/x86_64-linux-gnu/openmpi usr/lib/x86_64-linux-gnu/pmix2 usr/share/openmpi
             usr/bin/orterun usr/bin/orted)
  for p in "${mpi[@]}"; do [ -e "/$p" ] || die "/$p is missing (Debian's openmpi-bin)"; done
  tar -C / -cf - "${mpi[@]}" | tar -C "$stage/root" -xf -
  # Every shared library the binaries and Open MPI's plugins load, except the C library's own
  # and the CUDA libraries that come with the GPU host's toolkit (cuBLAS, NCCL: hundreds of MB).
  {
    for b in "${bins[@]}"; do ldd "$b"; done
    find "$stage/root" -name '*.so*' -type f -exec ldd {} \; 2>/dev/null
    ldd /usr/bin/orterun
  } | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/libnccl|/libcublas' |
    while read -r l; do cp -L "$l" "$stage/lib/"; done
  # The test data the GPU tests read (stories260K and its golden) and the benchmark's tokenizer.
  if [ -n "$shared" ] && [ -d "$shared/models/stories260K" ]; then
    cp -r "$shared/models/stories260K" "$stage/shared/models/"
    [ -d "$shared/models/llama2-tokenizer" ] && cp -r "$shared/models/llama2-tokenizer" "$stage/shared/models/"
    cp "$shared/golden/stories260K_greedy.jsonl" "$stage/shared/golden/"
  else
    echo "gpu-bundle: no stories260K under '$shared': the golden GPU tests will skip (and fail the check)" >&2
  fi
  printf 'build_root=%s\nshared_dir=%s\ncommit=%s\n' "$root" "$shared" \
    "$(git rev-parse HEAD 2>/dev/null || echo unknown)" >"$stage/BUNDLE"
  tar -C "$stage" -cJf "$out" .
  echo "gpu-bundle: $out ($(du -h "$out" | cut -f1)), built at $root, commit $(sed -n 's/^commit=//p' "$stage/BUNDLE")"
}

# Points `path` (an absolute path of the build host) at `target`, unless it already is there.
link_path() {
  local path=$1 target=$2
  if [ "$(readlink -f "$path" 2>/dev/null)" = "$(readlink -f "$target")" ]; then return 0; fi
  [ -e "$path" ] && die "$path exists on this host: the bundle's binaries need it to be $target (check out at $path, or free it)"
  if ! { mkdir -p "$(dirname "$path")" 2>/dev/null && ln -s "$target" "$path"; }; then
    die "cannot create $path -> $target (run as root, or check out at $path)"
  fi
}

find_lib() {  # the folder of the first file named $1 under the usual CUDA places
  local f
  f=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local /usr/lib /opt -name "$1" 2>/dev/null | head -1)
  [ -n "$f" ] && dirname "$f"
}

# Unpacks FILE, puts its binaries in build/ and sets the environment they need (libraries,
# Open MPI, PATH): what `check` and `run` share.
unpack() {
  local file=${1:-}
  [ -f "$file" ] || die "usage: tools/gpu-bundle.sh check|run FILE (a file from tools/gpu-bundle.sh pack)"
  local dir=${BUNDLE_DIR:-/tmp/llm-gpu-bundle}
  if ! { rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$file"; }; then
    die "cannot unpack $file into $dir"
  fi
  local build_root shared_dir commit
  build_root=$(sed -n 's/^build_root=//p' "$dir/BUNDLE")
  shared_dir=$(sed -n 's/^shared_dir=//p' "$dir/BUNDLE")
  commit=$(sed -n 's/^commit=//p' "$dir/BUNDLE")
  local here
  here=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  [ "$commit" = "$here" ] || echo "gpu-bundle: the bundle is of commit $commit, this checkout is $here" >&2
  if [ -e build ] && [ ! -L build ]; then
    echo "gpu-bundle: build/ exists here: its binaries are replaced by the bundle's" >&2
  fi
  cp -a "$dir/build" "$root/"
  link_path "$build_root" "$root"
  # ../shared as at build time: kept when this host has it, else the bundle's copy.
  if [ -n "$shared_dir" ] && [ ! -d "$shared_dir/models/stories260K" ] &&
    [ -d "$dir/shared/models/stories260K" ]; then
    link_path "$shared_dir" "$dir/shared"
  fi
  local cublas nccl
  cublas=$(find_lib 'libcublasLt.so.13*') || die "libcublasLt.so.13 not found (the CUDA 13 toolkit's cuBLAS)"
  nccl=$(find_lib 'libnccl.so.2*') || die "libnccl.so.2 not found (NCCL)"
  # The host's C++ runtime when it is as new as the build host's (GCC 12: GLIBCXX_3.4.30), so
  # that the host's own programs on this LD_LIBRARY_PATH (compute-sanitizer, curl) keep theirs.
  local host_cxx
  for host_cxx in /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /usr/lib64/libstdc++.so.6; do
    if [ -f "$host_cxx" ] && grep -qa GLIBCXX_3.4.30 "$host_cxx"; then
      rm -f "$dir/lib/libstdc++.so.6" "$dir/lib/libgcc_s.so.1"
      break
    fi
  done
  mkdir -p "$dir/bin"
  ln -sf "$dir/root/usr/bin/orterun" "$dir/bin/mpirun"
  export LD_LIBRARY_PATH="$dir/lib:$cublas:$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$dir/bin:$PATH"
  export OPAL_PREFIX="$dir/root/usr"
  export PMIX_MCA_mca_base_component_path="$dir/root/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
  local missing
  missing=$(for b in "$root"/build/*/*; do [ -f "$b" ] && [ -x "$b" ] && ldd "$b" | grep 'not found' | sed "s#^#$b: #"; done || true)
  [ -z "$missing" ] || die "libraries missing on this host:
$missing"
  echo "gpu-bundle: cuBLAS from $cublas, NCCL from $nccl, Open MPI from $OPAL_PREFIX"
}

case "${1:-}" in
  pack) pack "${2:-}" ;;
  check)
    unpack "${2:-}"
    PREBUILT=1 exec tools/gpu-check.sh
    ;;
  run)
    [ $# -ge 3 ] || die "usage: tools/gpu-bundle.sh run FILE CMD [ARGS...]"
    unpack "$2"
    shift 2
    exec "$@"
    ;;
  *) die "usage: tools/gpu-bundle.sh pack [FILE] | check FILE | run FILE CMD [ARGS...]" ;;
esac
