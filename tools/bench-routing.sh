#!/usr/bin/env bash
# Compares the router's routing policies on a data-parallel job: for each policy, starts
# `mpirun -np DP worker` (engine.data_parallel_size DP) and a router with that router.routing,
# sends NUM requests built from PREFIXES distinct shared prefixes (shuffled, CONCURRENCY at a
# time, tools/llm-bench-serve) and prints each engine's requests and prefix-cache hit / queried
# tokens (llm-admin stats) and the overall hit rate. Everything it starts is stopped.
#
#   tools/bench-routing.sh [POLICY ...]          # default: prefix_affinity round_robin least_loaded
#   MODEL=deploy/models/stories260K DP=2 PREFIXES=4 NUM=32 CONCURRENCY=4 WORDS=110 tools/bench-routing.sh
set -euo pipefail
cd "$(dirname "$0")/.."
for bin in build/worker/worker build/router/router build/tools/llm-admin build/tools/llm-bench-serve; do
  [ -x "$bin" ] || { echo "bench-routing.sh: $bin is missing: build first" >&2; exit 1; }
done
MODEL=${MODEL:-deploy/models/stories260K}
DP=${DP:-2}
PREFIXES=${PREFIXES:-4}
NUM=${NUM:-32}
CONCURRENCY=${CONCURRENCY:-4}
WORDS=${WORDS:-110}
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=(prefix_affinity round_robin least_loaded)
dir=$(mktemp -d /tmp/bench-routing.XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  stop_all
  rm -rf "$dir"
}
trap cleanup EXIT

# The dataset: PREFIXES stories of WORDS words, each asked NUM / PREFIXES questions, shuffled.
words=(the little cat sat on a warm mat and looked at the big red ball that rolled over green
       grass near an old tree where birds sang every morning)
RANDOM=7
for ((i = 0; i < NUM; i++)); do
  p=$((i % PREFIXES))
  text="Story $p."
  seed=$((p * 7919 + 13))
  for ((w = 0; w < WORDS; w++)); do
    seed=$(((seed * 1103515245 + 12345) % 2147483648))
    text+=" ${words[$((seed % ${#words[@]}))]}"
  done
  echo "$RANDOM {\"prompt\": \"$text Question $i: what did the cat do?\", \"output_len\": 8}"
done | sort -n | cut -d' ' -f2- >"$dir/data.jsonl"

for policy in "${policies[@]}"; do
  base=$((40000 + RANDOM % 20000))
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$DP" -x OMP_NUM_THREADS=1 \
    build/worker/worker --model.path "$MODEL" --engine.data_parallel_size "$DP" \
    --coordinator.port "$base" --engine.log_stats_interval_s 0 >"$dir/worker.log" 2>&1 &
  pids+=($!)
  port=$((base - 1000))
  build/router/router --model.path "$MODEL" --router.port "$port" --coordinator.port "$base" \
    --engine.data_parallel_size "$DP" --router.routing "$policy" >"$dir/router.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    [ "$(curl -sf "localhost:$port/upstreams" | grep -o '"healthy":true' | wc -l)" -eq "$DP" ] && break
    sleep 0.2
  done
  build/tools/llm-bench-serve --port "$port" --dataset-path "$dir/data.jsonl" --num-prompts "$NUM" \
    --max-concurrency "$CONCURRENCY" --ignore-eos --no-progress >"$dir/bench.log" 2>&1 || true
  hit=0
  queried=0
  line="$policy:"
  for ((g = 0; g < DP; g++)); do
    stats=$(build/tools/llm-admin --json --coordinator "127.0.0.1:$((base + g))" stats)
    field() { echo "$stats" | grep -o "\"$1\": *\"\\?[0-9]*" | grep -o '[0-9]*$' || echo 0; }
    h=$(field prefix_cache_hit_tokens_total)
    q=$(field prefix_cache_queried_tokens_total)
    hit=$((hit + h))
    queried=$((queried + q))
    line+=" engine $g: $(field requests_total) requests, $h/$q tokens hit;"
  done
  echo "$line hit rate $(awk "BEGIN { printf \"%.3f\", $hit / ($queried > 0 ? $queried : 1) }")," \
    "$(grep -E 'Failed requests' "$dir/bench.log" | tr -s ' ')"
  stop_all
done
