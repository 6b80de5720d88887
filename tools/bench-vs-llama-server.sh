#!/usr/bin/env bash
# Serving side by side with llama.cpp's llama-server on the same GGUF file: for ROUNDS rounds,
# alternating, starts `tools/serve.sh` (as shipped: router + mpirun workers) and then
# `llama-server -np SLOTS`, each on its own port, and runs tools/llm-bench-serve against each at
# every concurrency in CONCURRENCY (streaming /v1/completions, random prompts of WORDS words,
# OUT tokens each with ignore_eos, 2 warm-up requests; with RATE, requests arrive as a Poisson
# process of RATE per second, at most the concurrency at once). Prints one line per run (output tok/s,
# TTFT / ITL p50 and p99) and keeps each result JSON (vLLM's field names) in OUT_DIR. Everything
# it starts is stopped. llama.cpp is a peer built outside this repository (never a dependency).
#
#   tools/bench-vs-llama-server.sh MODEL.gguf LLAMA_CPP_BIN_DIR
#   ROUNDS=2 CONCURRENCY="1 16" NUM=64 WORDS=128 OUT=64 SLOTS=16 THREADS=2 tools/bench-vs-llama-server.sh ...
#   RATE=0.5 CONCURRENCY=16 NUM=40 CONFIG=my-cluster.yaml tools/bench-vs-llama-server.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n 2,14p "$0" >&2; exit 2; }
gguf=$(realpath "$1")
llama_bin=$(realpath "$2")
[ -f "$gguf" ] || { echo "bench-vs-llama-server.sh: no file $gguf" >&2; exit 2; }
[ -x "$llama_bin/llama-server" ] || { echo "bench-vs-llama-server.sh: no $llama_bin/llama-server" >&2; exit 2; }
[ -x build/tools/llm-bench-serve ] || { echo "bench-vs-llama-server.sh: build first" >&2; exit 2; }
ROUNDS=${ROUNDS:-2}
CONCURRENCY=${CONCURRENCY:-"1 16"}
NUM=${NUM:-64}
WORDS=${WORDS:-128}
OUT=${OUT:-64}
SLOTS=${SLOTS:-16}
THREADS=${THREADS:-$(nproc)}
RATE=${RATE:-}
rate_args=()
[ -n "$RATE" ] && rate_args=(--request-rate "$RATE")
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/bench-vs-llama.XXXXXX)}
mkdir -p "$OUT_DIR"
pid=""
stop() {
  if [ -n "$pid" ]; then
    # TERM, not INT: a background job of a script ignores SIGINT, and serve.sh killed after the
    # wait below would leave its cluster (own sessions) running.
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
}
trap stop EXIT

wait_ready() {  # PORT: the server answers /health with 200 (model loaded), at most 10 minutes
  for _ in $(seq 3000); do
    curl -sf "localhost:$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "server exited; log in $OUT_DIR" >&2; return 1; }
    sleep 0.2
  done
  echo "server not ready after 10 minutes" >&2
  return 1
}

run_bench() {  # NAME PORT
  for c in $CONCURRENCY; do
    local n=$NUM
    [ "$c" -eq 1 ] && n=$((NUM / 4 > 4 ? NUM / 4 : 4))
    local f="$OUT_DIR/$1-c$c-round$r.json"
    build/tools/llm-bench-serve --port "$2" --num-prompts "$n" --max-concurrency "$c" "${rate_args[@]}" \
      --random-input-len "$WORDS" --random-output-len "$OUT" --ignore-eos --num-warmups 2 \
      --seed "$r" --no-progress --result-file "$f" >"$OUT_DIR/$1-c$c-round$r.log" 2>&1 || true
    python3 - "$f" "$1" "$c" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:  # noqa: BLE001
    print(f"{sys.argv[2]:>12} c={sys.argv[3]:<3} no result ({e})")
    sys.exit(0)
print(f"{sys.argv[2]:>12} c={sys.argv[3]:<3} output {j['output_throughput']:7.1f} tok/s  "
      f"TTFT p50 {j['median_ttft_ms']:7.1f} p99 {j['p99_ttft_ms']:7.1f} ms  "
      f"ITL p50 {j['median_itl_ms']:6.1f} p90 {j['p90_itl_ms']:6.1f} p99 {j['p99_itl_ms']:6.1f} ms  "
      f"failed {j.get('failed', 0)}")
EOF
  done
}

for ((r = 1; r <= ROUNDS; r++)); do
  port=$((20000 + RANDOM % 20000))
  MODEL="$gguf" PORT=$port COORD_PORT=$((port + 1)) tools/serve.sh >"$OUT_DIR/serve-round$r.log" 2>&1 &
  pid=$!
  wait_ready "$port"
  run_bench llmserve "$port"
  stop
  port=$((20000 + RANDOM % 20000))
  "$llama_bin/llama-server" -m "$gguf" --port "$port" -t "$THREADS" -np "$SLOTS" \
    -c $((SLOTS * (2 * WORDS + OUT + 64))) >"$OUT_DIR/llama-server-round$r.log" 2>&1 &
  pid=$!
  wait_ready "$port"
  run_bench llama-server "$port"
  stop
done
echo "results: $OUT_DIR"
