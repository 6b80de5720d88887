#!/usr/bin/env bash
# libFuzzer targets (tests/fuzz/, clang with ASan + UBSan) in their own build directory,
# build-fuzz/ (the normal g++ build in build/ is untouched).
#
#   tools/fuzz.sh TARGET [SECONDS]   run fuzz_TARGET for SECONDS (default 600) under nice -n 15;
#                                    new inputs go to build-fuzz/corpus/TARGET, crashes to
#                                    build-fuzz/artifacts/TARGET/ (the run goes on after a crash
#                                    until the time is up), the log to build-fuzz/logs/TARGET.log
#   tools/fuzz.sh --smoke [RUNS]     build every target and run each over its seed corpus for
#                                    RUNS inputs (default 2000); tools/test.sh runs this
#   tools/fuzz.sh --list             the targets
#
# Targets: openai_request http tokenizer chat_template safetensors gguf model_config
# cluster_config step_plan json_schema regex_grammar tool_parser. The tokenizer target reads
# ../shared/tokenizers (LLM_FUZZ_TOKENIZERS overrides) and fuzzes only the repo's demo tokenizer
# when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(openai_request http tokenizer chat_template safetensors gguf model_config cluster_config
         step_plan json_schema regex_grammar tool_parser)
build=build-fuzz
jobs=$(nproc)

configure() {
  if [ ! -f "$build/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DLLM_FUZZ=ON -DBUILD_TESTING=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
  fi
}

case "${1:-}" in
  --list)
    printf '%s\n' "${targets[@]}"
    ;;
  --smoke)
    runs=${2:-2000}
    configure
    cmake --build "$build" --target fuzz_all -j "$jobs"
    fail=0
    for t in "${targets[@]}"; do
      scratch=$(mktemp -d)
      start=$(date +%s)
      if "$build/tests/fuzz/fuzz_$t" -runs="$runs" -timeout=25 -rss_limit_mb=4096 \
          -artifact_prefix="$scratch/" "$scratch" "tests/fuzz/corpus/$t" >"$scratch.log" 2>&1; then
        printf 'fuzz smoke %-16s ok  %3d s  %s\n' "$t" "$(($(date +%s) - start))" \
          "$(grep -m1 -o 'Done [0-9]* runs' "$scratch.log")"
        grep -h 'SKIP' "$scratch.log" || true
      else
        echo "fuzz smoke $t FAILED:"
        tail -n 40 "$scratch.log"
        fail=1
      fi
      rm -rf "$scratch" "$scratch.log"
    done
    exit "$fail"
    ;;
  ""|-h|--help)
    sed -n '2,16p' "$0"
    exit 1
    ;;
  *)
    t=$1
    seconds=${2:-600}
    [ -f "tests/fuzz/fuzz_$t.cc" ] || { echo "fuzz.sh: no target '$t' (see --list)" >&2; exit 1; }
    configure
    cmake --build "$build" --target "fuzz_$t" -j "$jobs"
    mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$build/logs"
    log="$build/logs/$t.log"
    : >"$log"
    end=$(($(date +%s) + seconds))
    # libFuzzer stops at the first crash; start it again (with what it learnt) until the time is
    # up, so one run reports every distinct problem it reaches.
    while [ "$(date +%s)" -lt "$end" ]; do
      left=$((end - $(date +%s)))
      nice -n 15 "$build/tests/fuzz/fuzz_$t" -max_total_time="$left" -timeout=25 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" \
        "$build/corpus/$t" "tests/fuzz/corpus/$t" >>"$log" 2>&1 || true
    done
    echo "fuzz.sh: $t ran ${seconds} s; log $log; artifacts:"
    ls -l "$build/artifacts/$t/"
    ;;
esac
