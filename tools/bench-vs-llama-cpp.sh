#!/usr/bin/env bash
# Engine throughput side by side with llama.cpp on the same GGUF files: for ROUNDS rounds,
# alternating, build/tools/llm-bench and llama.cpp's llama-bench on each file (THREADS threads):
# prefill of PROMPT tokens and decode batch 1 (llama-bench pp/tg), plus our decode at batch 16
# (its multiple of our batch 1, and for float weights the share of the FMA peak it computes).
# llama.cpp is a peer built outside this repository (its CPU backend; never a dependency). The
# machine is shared: run it quiet, and read ratios of neighbouring runs.
#
#   tools/bench-vs-llama-cpp.sh LLAMA_CPP_BIN_DIR FILE.gguf [FILE.gguf ...]
#   ROUNDS=3 THREADS=2 PROMPT=512 tools/bench-vs-llama-cpp.sh ~/llama.cpp/build/bin f16.gguf q8_0.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 2; }
llama_bin=$1
shift
[ -x "$llama_bin/llama-bench" ] || { echo "bench-vs-llama-cpp.sh: no $llama_bin/llama-bench" >&2; exit 2; }
[ -x build/tools/llm-bench ] || { echo "bench-vs-llama-cpp.sh: build first" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
PROMPT=${PROMPT:-512}
for ((r = 1; r <= ROUNDS; r++)); do
  for f in "$@"; do
    name=$(basename "$f" .gguf)
    # (set -e would end the script here without a word: say which file and why)
    if ! ours=$(build/tools/llm-bench --model "$f" --threads "$THREADS" --prompt-len "$PROMPT" \
      --decode-tokens 32 --batches 1,16 --kv-cache-mib 512 2>&1); then
      echo "bench-vs-llama-cpp.sh: llm-bench failed on $f:" >&2
      echo "$ours" | grep -v '^\[' | tail -3 >&2
      exit 1
    fi
    pp=$(echo "$ours" | awk '/^prefill/ {print $(NF-1)}')
    b1=$(echo "$ours" | awk '/^decode +batch +1 / {print $5}')
    b16=$(echo "$ours" | awk '/^decode +batch +16 / {print $5}')
    bw=$(echo "$ours" | awk '/^read bandwidth/ {print $3}')
    # the FMA peak's share batch 16 computes (float weights only; "-" where not printed)
    fma=$(echo "$ours" | awk '/^FMA peak/ && /compute/ {print $(NF-2)}')
    theirs=$("$llama_bin/llama-bench" -m "$f" -t "$THREADS" -p "$PROMPT" -n 32 -r 1 -o csv 2>/dev/null)
    lpp=$(echo "$theirs" | awk -F, -v p="$PROMPT" '$0 ~ "\"" p "\",\"0\"" {gsub(/"/, "", $0); print}' | awk -F, '{print $(NF-1)}')
    ltg=$(echo "$theirs" | awk -F, '$0 ~ "\"0\",\"32\"" {gsub(/"/, "", $0); print}' | awk -F, '{print $(NF-1)}')
    printf "round %d %-24s prefill %4d: ours %7.1f llama.cpp %7.1f (%.2fx) | decode b1: ours %6.1f llama.cpp %6.1f (%.2fx) | ours b16 %6.1f (%.1fx b1, FMA peak %s) | read bw %s GB/s\n" \
      "$r" "$name" "$PROMPT" "$pp" "$lpp" "$(awk "BEGIN {print $pp / $lpp}")" "$b1" "$ltg" \
      "$(awk "BEGIN {print $b1 / $ltg}")" "$b16" "$(awk "BEGIN {print $b16 / $b1}")" "${fma:--}" "$bw"
  done
done
