#!/usr/bin/env bash
# The GPU check, in one command, on a machine with an NVIDIA GPU (Debian 12, the CUDA toolkit in
# /usr/local/cuda or nvcc on PATH):
#   1. installs the build dependencies if some are missing (tools/install-deps.sh; root or sudo),
#   2. configures and builds build/ with the CUDA backend (stops if nvcc is missing, if
#      nvidia-smi lists no GPU, or if CMake did not enable CUDA),
#   3. ctest -L gpu: every GPU test must pass; a skipped one counts as a failure here (with one
#      GPU the two-GPU NCCL test is left out, and the summary says so; the no-device test is left
#      out on every GPU machine),
#   4. the cluster golden check on the GPU: router -> coordinator -> worker with engine.device
#      cuda (LLM_TEST_DEVICE=cuda) must give stories260K's golden greedy text over HTTP,
#   5. the benchmark on a Llama-3.1-8B-shaped model with dummy BF16 weights: llm-bench decode at
#      batch 1 (goal >= 150 tok/s) and at 16 and 64 (context 200, with the step's split), then
#      serving through tools/serve.sh (DEVICE=cuda) with llm-bench-serve at concurrency 16 and
#      64 (goal >= 2000 output tok/s at 16),
#   6. compute-sanitizer's memcheck over the backend's tests, where the toolkit has it (last: the
#      slowest step; MEMCHECK_TIMEOUT bounds it).
# Prints a summary; exits 1 if any step failed (a goal not reached is reported, not a failure).
#
#   tools/gpu-check.sh
#   SKIP_BENCH=1 tools/gpu-check.sh            # step 5 left out
#   RANKS=2 tools/gpu-check.sh                 # serve the benchmark model on 2 GPUs (NCCL)
#   NUM=128 WORDS=256 OUT=128 tools/gpu-check.sh
#   PREBUILT=1 tools/gpu-check.sh              # build/ was built elsewhere: steps 1 and 2 skipped
#                                              # (tools/gpu-bundle.sh check does this)
#   MEMCHECK_TIMEOUT=120 tools/gpu-check.sh    # bound compute-sanitizer (default 600 s); it runs
#                                              # last, so a slow one cannot hide the other steps
#   PROFILE=1 tools/gpu-check.sh               # also ncu's per-kernel times of a decode step,
#                                              # summed by tools/ncu-steps.py (PROFILE_TIMEOUT)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
WORK=${WORK:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$WORK"
NUM=${NUM:-128}
WORDS=${WORDS:-128}
OUT=${OUT:-128}
RANKS=${RANKS:-1}
MEMCHECK_TIMEOUT=${MEMCHECK_TIMEOUT:-600}
PROFILE_TIMEOUT=${PROFILE_TIMEOUT:-300}
results=()
failed=0
pass() { results+=("PASS  $1"); echo "gpu-check: PASS: $1"; }
fail() { results+=("FAIL  $1"); echo "gpu-check: FAIL: $1" >&2; failed=1; }
note() { results+=("      $1"); echo "gpu-check: $1"; }
summary() {
  echo
  echo "==================== gpu-check summary ===================="
  for r in "${results[@]}"; do echo "$r"; done
  echo "logs and results: $WORK"
  if [ "$failed" -ne 0 ]; then echo "RESULT: FAILED"; else echo "RESULT: OK"; fi
}
die() {
  fail "$1"
  summary
  exit 1
}

for knob in NUM WORDS OUT RANKS MEMCHECK_TIMEOUT PROFILE_TIMEOUT; do
  [[ "${!knob}" =~ ^[0-9]+$ ]] || die "$knob='${!knob}' is not a whole number"
done

# --- 0. the machine ---------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null; then
  die "nvidia-smi not found: no NVIDIA driver on this machine"
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "$gpus" -ge 1 ] || die "nvidia-smi lists no GPU"
pass "$gpus GPU(s): $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"
[ "$RANKS" -le "$gpus" ] || die "RANKS=$RANKS but only $gpus GPU(s)"

if [ -n "${PREBUILT:-}" ]; then
  # tools/gpu-bundle.sh check: binaries built elsewhere, nothing to install or build here.
  for b in build/tests/gpu_test build/tests/integration_test build/worker/worker build/router/router \
    build/tools/llm-bench build/tools/llm-bench-serve build/tools/llm-admin; do
    [ -x "$b" ] || die "PREBUILT: $b is missing"
  done
  command -v ctest >/dev/null || die "PREBUILT: ctest not found (CMake's; steps 3 and 4 run it)"
  pass "prebuilt binaries in build/ (PREBUILT=1: steps 1 and 2 skipped)"
else
  if command -v nvcc >/dev/null; then
    nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  else
    die "nvcc not found (install the CUDA toolkit: /usr/local/cuda/bin/nvcc)"
  fi
  pass "nvcc: $("$nvcc" --version | tail -1)"

  # --- 1. dependencies --------------------------------------------------------------------------
  if [ "$(id -u)" -eq 0 ]; then
    tools/install-deps.sh >"$WORK/install-deps.log" 2>&1 || die "tools/install-deps.sh failed (log: $WORK/install-deps.log)"
  elif command -v sudo >/dev/null; then
    # shellcheck disable=SC2024  # the log is this user's file on purpose
    sudo tools/install-deps.sh >"$WORK/install-deps.log" 2>&1 || die "sudo tools/install-deps.sh failed (log: $WORK/install-deps.log)"
  else
    note "not root and no sudo: dependencies not checked (tools/install-deps.sh)"
  fi

  # --- 2. build with CUDA -----------------------------------------------------------------------
  if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLM_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" >"$WORK/configure.log" 2>&1; then
    die "cmake configure failed (log: $WORK/configure.log)"
  fi
  grep -q "CUDA backend: nvcc" "$WORK/configure.log" ||
    die "CMake did not enable the CUDA backend (log: $WORK/configure.log)"
  grep -q "LLM_HAVE_NCCL\|NCCL" "$WORK/configure.log" && note "$(grep -m1 NCCL "$WORK/configure.log")"
  if ! cmake --build build -j"$(nproc)" >"$WORK/build.log" 2>&1; then
    tail -30 "$WORK/build.log" >&2
    die "build failed (log: $WORK/build.log)"
  fi
  pass "build with CUDA (build/)"
fi

# --- 3. ctest -L gpu (a skip is a failure) ----------------------------------------------------
ctest_strict() {  # NAME LOG ctest-args...: passes when tests ran, all passed, none skipped
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1
  local rc=$?
  local ran skipped
  ran=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$log" || true)
  skipped=$(grep -cE '\*\*\*Skipped|Not Run|Disabled' "$log" || true)
  if [ "$rc" -ne 0 ]; then
    grep -E 'Failed|\*\*\*' "$log" | tail -20 >&2
    fail "$name: failures (log: $log)"
  elif [ "$ran" -eq 0 ]; then
    fail "$name: no test ran (log: $log)"
  elif [ "$skipped" -ne 0 ]; then
    grep -E '\*\*\*Skipped|Not Run|Disabled' "$log" >&2
    fail "$name: $skipped of $ran skipped, which counts as a failure here (log: $log)"
  else
    pass "$name: $ran tests passed"
  fi
}
# compute-sanitizer's memcheck over the backend's kernels (out-of-bounds and misaligned accesses),
# where the toolkit has it. Run last: it is the slowest step (MEMCHECK_TIMEOUT bounds it).
# CapsAndMemory is left out: it asks for twice the GPU's memory on purpose, and memcheck reports
# the refused cudaMalloc as an error. No leak check: the backend is one per process and lives
# as long as it (its GEMM workspace and scratch buffers are freed by the process's exit).
memcheck() {
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -n "$sanitizer" ]; then
    if timeout "$MEMCHECK_TIMEOUT" "$sanitizer" --tool memcheck --error-exitcode 9 \
      build/tests/gpu_test --gtest_filter='CudaBackendTest.*:-CudaBackendTest.CapsAndMemory' \
      >"$WORK/memcheck.log" 2>&1; then
      pass "compute-sanitizer memcheck: CudaBackendTest.* clean"
    else
      grep -E '=========|FAILED' "$WORK/memcheck.log" | head -20 >&2
      fail "compute-sanitizer memcheck: CudaBackendTest.* (log: $WORK/memcheck.log)"
    fi
  else
    note "compute-sanitizer not found: memcheck not run"
  fi
}

# nccl_mpi.two_gpus needs two GPUs (it skips with fewer): left out on a one-GPU machine, and
# the summary says so, rather than failing the check for a GPU the machine does not have.
# CudaBackendErrors.AnswersWithoutADevice checks the no-device path, so it skips wherever a GPU
# is: left out here, where there always is one.
excluded='CudaBackendErrors\.AnswersWithoutADevice'
if [ "$gpus" -lt 2 ]; then
  excluded+='|nccl_mpi\.two_gpus'
  note "one GPU: nccl_mpi.two_gpus (NCCL across 2 GPUs) not run"
fi
gpu_ctest=(ctest --test-dir build -L gpu -E "$excluded" --output-on-failure --timeout 600)
ctest_strict "ctest -L gpu" "$WORK/ctest-gpu.log" "${gpu_ctest[@]}"

# --- 4. the cluster golden check on the GPU ---------------------------------------------------
ctest_strict "cluster golden (router -> coordinator -> worker, engine.device cuda)" \
  "$WORK/ctest-cluster.log" env LLM_TEST_DEVICE=cuda \
  ctest --test-dir build -R 'integration_test\.RouterE2E\.(GoldenGreedy|HealthModelsTokenize)' \
  --output-on-failure --timeout 600

if [ -n "${SKIP_BENCH:-}" ]; then
  memcheck
  summary
  exit "$failed"
fi

# --- 5. benchmark: Llama-3.1-8B shape, dummy BF16 weights -------------------------------------
model="$WORK/llama-3.1-8b-shape"
mkdir -p "$model"
cat >"$model/config.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "vocab_size": 128256,
  "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": null,
  "hidden_act": "silu",
  "tie_word_embeddings": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "torch_dtype": "bfloat16"
}
JSON
# Serving needs a tokenizer (the router tokenizes the prompts): the Llama 2 one of ../shared
# (32000 ids < the model's 128256; the dummy model's other ids detokenize to nothing).
tok=""
for d in "${LLM_SHARED_DIR:-}" "$root/../shared" /work/shared; do
  if [ -n "$d" ] && [ -f "$d/models/llama2-tokenizer/tokenizer.json" ]; then
    tok="$d/models/llama2-tokenizer"
    break
  fi
done
if [ -n "$tok" ]; then
  cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$model/"
  [ -f "$tok/tokenizer.model" ] && cp "$tok/tokenizer.model" "$model/"
else
  note "no ../shared/models/llama2-tokenizer: serving the benchmark model is skipped"
fi

bench_log="$WORK/llm-bench.log"
if build/tools/llm-bench --model "$model" --load-format dummy --device cuda --batches 1 \
  --prompt-len 128 --decode-tokens 128 --kv-cache-mib 4096 >"$bench_log" 2>&1; then
  tps=$(sed -n 's/^decode *batch *1 *: *\([0-9.]*\) tokens\/s.*/\1/p' "$bench_log" | head -1)
  prefill=$(sed -n 's/^prefill .*: *\([0-9.]*\) tokens\/s.*/\1/p' "$bench_log" | head -1)
  if [ -n "$tps" ]; then
    pass "llm-bench --device cuda: decode batch 1 = $tps tok/s (goal >= 150), prefill 128 = ${prefill:-?} tok/s"
    awk -v t="$tps" 'BEGIN { exit !(t >= 150) }' || note "decode batch 1 below the goal of 150 tok/s"
  else
    fail "llm-bench: no decode figure (log: $bench_log)"
  fi
else
  tail -5 "$bench_log" >&2
  fail "llm-bench --device cuda failed (log: $bench_log)"
fi
# Larger decode batches at a context of 200, with where a step's time goes (forward pass to the
# logits in host memory, sampling): figures only, no goal.
batch_log="$WORK/llm-bench-batches.log"
if build/tools/llm-bench --model "$model" --load-format dummy --device cuda --batches 16,64 \
  --prompt-len 16 --decode-tokens 64 --decode-context 200 --kv-cache-mib 8192 >"$batch_log" 2>&1; then
  while read -r line; do note "$line"; done < <(
    sed -n 's/^decode *batch *\([0-9]*\) *: *\([0-9.]*\) tokens\/s.*context \([0-9]*\); a step \(.*\)$/decode batch \1 at context \3: \2 tok\/s; a step \4/p' \
      "$batch_log")
else
  tail -5 "$batch_log" >&2
  fail "llm-bench --device cuda --batches 16,64 failed (log: $batch_log)"
fi
# PROFILE=1: Nsight Compute's per-kernel times of decode batch 16 at context 200, summed per
# step and kind of kernel by tools/ncu-steps.py (the last 2 steps: decode). About 90 s on an
# H200; ncu needs hardware counters (seen working on Firecracker machines, not on gVisor).
if [ -n "${PROFILE:-}" ]; then
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  prof="$WORK/ncu-b16.csv"
  if [ -z "$ncu" ]; then
    note "PROFILE: ncu not found: no profile"
  elif timeout "$PROFILE_TIMEOUT" "$ncu" --clock-control none --metrics gpu__time_duration.sum \
    --csv build/tools/llm-bench --model "$model" --load-format dummy --device cuda --batches 16 \
    --prompt-len 16 --decode-tokens 3 --decode-context 200 --kv-cache-mib 8192 >"$prof" 2>&1 &&
    summary_lines=$(python3 tools/ncu-steps.py "$prof" --last 2 2>&1); then
    while read -r line; do note "ncu, decode batch 16 at context 200: $line"; done <<<"$summary_lines"
  else
    fail "PROFILE: ncu over llm-bench failed or took over ${PROFILE_TIMEOUT} s (log: $prof)"
  fi
fi

if [ -n "$tok" ]; then
  port=$((20000 + RANDOM % 20000))
  serve_pid=""
  stop_serve() {
    if [ -n "$serve_pid" ]; then
      # TERM, not INT: a background job of a script ignores SIGINT (bench-vs-llama-server.sh).
      kill -TERM "$serve_pid" 2>/dev/null || true
      for _ in $(seq 1200); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$serve_pid" 2>/dev/null || true
      wait "$serve_pid" 2>/dev/null || true
    fi
    serve_pid=""
  }
  trap stop_serve EXIT
  MODEL="$model" LOAD_FORMAT=dummy DEVICE=cuda RANKS="$RANKS" PORT=$port COORD_PORT=$((port + 1)) \
    tools/serve.sh >"$WORK/serve.log" 2>&1 &
  serve_pid=$!
  ready=0
  for _ in $(seq 3000); do  # dummy 8B weights: generating and placing them takes a while
    curl -sf "localhost:$port/health" >/dev/null 2>&1 && { ready=1; break; }
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [ "$ready" -ne 1 ]; then
    grep -E 'critical|error|engine.device' "$WORK/serve.log" | tail -5 >&2
    fail "serving with engine.device cuda did not start (log: $WORK/serve.log)"
  else
    kv=$(grep -m1 'KV cache:' "$WORK/serve.log" | sed 's/.*KV cache: //')
    note "serving on $RANKS GPU(s); KV cache: ${kv:-?}"
    for c in 16 64; do
      f="$WORK/serve-c$c.json"
      n=$NUM
      [ "$n" -lt $((c * 2)) ] && n=$((c * 2))
      build/tools/llm-bench-serve --port "$port" --num-prompts "$n" --max-concurrency "$c" \
        --random-input-len "$WORDS" --random-output-len "$OUT" --ignore-eos --num-warmups 2 \
        --no-progress --result-file "$f" >"$WORK/serve-c$c.log" 2>&1
      rc=$?
      line=$(python3 - "$f" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:  # noqa: BLE001
    print(f"no result ({e})")
    sys.exit(0)
print(f"{j['output_throughput']:.1f} {j.get('failed', 0)} TTFT p50 {j['median_ttft_ms']:.1f} ms "
      f"p99 {j['p99_ttft_ms']:.1f} ms, ITL p50 {j['median_itl_ms']:.1f} ms p99 {j['p99_itl_ms']:.1f} ms")
EOF
)
      tput=${line%% *}
      rest=${line#* }
      nfail=${rest%% *}
      if [ "$rc" -ne 0 ] || ! [[ "$tput" =~ ^[0-9.]+$ ]] || [ "$nfail" != 0 ]; then
        fail "llm-bench-serve concurrency $c: $line (exit $rc; log: $WORK/serve-c$c.log)"
        continue
      fi
      goal=""
      [ "$c" -eq 16 ] && goal=" (goal >= 2000)"
      pass "serving concurrency $c: $tput output tok/s$goal; ${rest#* }"
      if [ "$c" -eq 16 ]; then
        awk -v t="$tput" 'BEGIN { exit !(t >= 2000) }' || note "concurrency 16 below the goal of 2000 output tok/s"
      fi
    done
  fi
  stop_serve
  trap - EXIT
fi

memcheck
summary
exit "$failed"
