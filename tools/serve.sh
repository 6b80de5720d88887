#!/usr/bin/env bash
# Starts the whole cluster on this machine from what tools/setup.sh built (it never installs or
# builds): `mpirun -np $((DP * PP * TP)) worker` (each data-parallel group's first rank = a gRPC
# coordinator, on COORD_PORT + group) and the OpenAI router on port 2000, in front of all of them.
#
#   tools/setup.sh && tools/serve.sh                    # fresh machine: install, build, serve
#   tools/serve.sh                                      # stories260K (real weights), 1 rank
#   MODEL=/path/to/hf-folder TP=2 tools/serve.sh        # tensor parallel over 2 MPI ranks
#   DP=2 TP=2 tools/serve.sh                            # 2 engines of 2 ranks each: 4 ranks
#   PP=2 TP=2 tools/serve.sh                            # 1 engine: 2 pipeline stages of 2 ranks
#   MODEL=deploy/models/demo-llama tools/serve.sh       # sizing demo: dummy weights
#   DEVICE=cuda RANKS=2 tools/serve.sh                  # 2 GPUs: one rank each, NCCL between
#
# Environment: MODEL (default deploy/models/stories260K, Karpathy's TinyStories model),
# LOAD_FORMAT (safetensors|gguf|dummy; default from MODEL: a .gguf file, a folder with
# safetensors, else dummy), TP (tensor-parallel ranks per pipeline stage, default 1), PP
# (pipeline stages per engine, default 1), DP (data-parallel engines, default 1), RANKS (the
# job's size, DP * PP * TP; without TP, TP = RANKS / (DP * PP)), CONFIG (default
# deploy/cluster.yaml),
# PORT (router, default 2000), HOSTFILE (passed to mpirun), API_KEY (the router requires
# `Authorization: Bearer $API_KEY` and, with a key, listens on every interface; without one it
# listens on 127.0.0.1 only), GRACE_S (on Ctrl-C/SIGTERM requests in flight get this long to
# finish before the workers stop, default 30), DEVICE (engine.device: cpu, the default, or cuda:
# one rank per GPU; the KV cache then takes what engine.gpu_memory_utilization leaves, unless
# KV_CACHE_MIB is set), KV_CACHE_MIB (the KV cache per rank in MiB; deploy/cluster.yaml's 256
# holds 2048 tokens of a Mistral-7B-shaped model, 512 of Llama-2-7B), MAX_MODEL_LEN (the longest
# sequence served; default the model's context, or as much of it as the KV cache holds, with a
# warning). Ctrl-C stops everything, in that order.
set -euo pipefail
cd "$(dirname "$0")/.."
for bin in build/worker/worker build/router/router build/tools/llm-admin; do
  if [ ! -x "$bin" ]; then
    echo "serve.sh: $bin is missing: run tools/setup.sh first (installs and builds)" >&2
    exit 1
  fi
done

MODEL=${MODEL:-deploy/models/stories260K}
if [ -z "${LOAD_FORMAT:-}" ]; then
  if [ -f "$MODEL" ] && [[ "$MODEL" == *.gguf ]]; then
    LOAD_FORMAT=gguf  # one .gguf file: weights, tokenizer and chat template
  elif [ -e "$MODEL/model.safetensors" ] || [ -e "$MODEL/model.safetensors.index.json" ]; then
    LOAD_FORMAT=safetensors
  else
    LOAD_FORMAT=dummy
  fi
fi
DP=${DP:-1}
PP=${PP:-1}
if [ "$DP" -lt 1 ] || [ "$PP" -lt 1 ]; then
  echo "serve.sh: DP=$DP and PP=$PP must be at least 1" >&2
  exit 1
fi
if [ -z "${TP:-}" ]; then
  TP=$(( ${RANKS:-$((DP * PP))} / (DP * PP) ))
fi
if [ "$TP" -lt 1 ] || { [ -n "${RANKS:-}" ] && [ "$RANKS" -ne $((DP * PP * TP)) ]; }; then
  echo "serve.sh: RANKS=${RANKS:-} must be DP * PP * TP (DP=$DP, PP=$PP, TP=$TP)" >&2
  exit 1
fi
RANKS=$((DP * PP * TP))
CONFIG=${CONFIG:-deploy/cluster.yaml}
PORT=${PORT:-2000}
COORD_PORT=${COORD_PORT:-50051}
# The router gets every coordinator from engine.data_parallel_size (router.upstreams' default:
# coordinator.host:COORD_PORT+g for each group g; all on this host without a HOSTFILE).
overrides=(--model.path "$MODEL" --model.load_format "$LOAD_FORMAT"
           --engine.tensor_parallel_size "$TP" --engine.data_parallel_size "$DP"
           --engine.pipeline_parallel_size "$PP"
           --coordinator.port "$COORD_PORT")
if [ -n "${DEVICE:-}" ]; then
  overrides+=(--engine.device "$DEVICE")
  # deploy/cluster.yaml's kv_cache_mib is sized for a CPU; on a GPU the memory rule sizes it (0).
  [ "$DEVICE" = cuda ] && KV_CACHE_MIB=${KV_CACHE_MIB:-0}
fi
# The KV cache per rank in MiB (the config's otherwise) and the longest sequence served (the
# model's context, or what the KV cache holds of it, otherwise).
[ -n "${KV_CACHE_MIB:-}" ] && overrides+=(--engine.kv_cache_mib "$KV_CACHE_MIB")
[ -n "${MAX_MODEL_LEN:-}" ] && overrides+=(--model.max_model_len "$MAX_MODEL_LEN")
coordinators=()
for ((g = 0; g < DP; g++)); do coordinators+=("127.0.0.1:$((COORD_PORT + g))"); done

# --bind-to none: mpirun binds each rank to one core by default, which would leave the rest of
# the host idle; unbound ranks split the host's cores between them (engine.threads_per_rank).
mpi_args=(--allow-run-as-root --oversubscribe --bind-to none -np "$RANKS")
[ -n "${HOSTFILE:-}" ] && mpi_args+=(--hostfile "$HOSTFILE")
# The kernels' environment switches (README, "Build and test") reach every rank, on every host.
for v in LLM_AMX_F16 LLM_MATMUL_ISA LLM_ATTENTION_ISA LLM_Q8_0_GEMV_AVX2 LLM_PACK_WEIGHTS LLM_F16_ROW_PANELS; do
  [ -n "${!v:-}" ] && mpi_args+=(-x "$v")
done
# Own sessions (setsid): Ctrl-C reaches this script only, which stops the processes in order.
setsid mpirun "${mpi_args[@]}" build/worker/worker --config "$CONFIG" "${overrides[@]}" &
worker_pid=$!
# Stopping: Open MPI's mpirun kills the ranks about 2 s after it gets SIGTERM (SIGKILL after
# odls_base_sigkill_timeout), too soon for the coordinator's grace period. So the router drains
# first (its requests in flight finish, router.shutdown_grace_s), the coordinator is drained
# through the admin API (`llm-admin drain --wait`, for clients beside the router), and only then
# is mpirun stopped.
# A second Ctrl-C/SIGTERM while draining stops everything at once (never leaves the workers
# running without this script).
stop_now() {
  trap - EXIT INT TERM
  [ -n "${router_pid:-}" ] && kill -TERM "$router_pid" 2>/dev/null
  kill -TERM "$worker_pid" 2>/dev/null
  wait 2>/dev/null
  exit 1
}
# $1: the script's exit status (0 after Ctrl-C/SIGTERM: a requested stop; the failing status when
# the script ends on an error, e.g. a worker that could not start).
stop() {
  local status=${1:-0}
  trap - EXIT
  trap stop_now INT TERM
  set +e
  [ -n "${router_pid:-}" ] && kill -TERM "$router_pid" 2>/dev/null
  if kill -0 "$worker_pid" 2>/dev/null; then
    drains=()
    for c in "${coordinators[@]}"; do  # in parallel: each waits for its own engine
      build/tools/llm-admin --coordinator "$c" drain --wait \
        --wait-timeout-s "${GRACE_S:-30}" >/dev/null 2>&1 &
      drains+=($!)
    done
    wait "${drains[@]}" 2>/dev/null
  fi
  [ -n "${router_pid:-}" ] && wait "$router_pid" 2>/dev/null
  kill -TERM "$worker_pid" 2>/dev/null
  wait 2>/dev/null
  exit "$status"
}
trap 'stop $?' EXIT
trap 'stop 0' INT TERM

for c in "${coordinators[@]}"; do
  for _ in $(seq 1 600); do  # model loading: up to 5 minutes
    build/tools/llm-admin --coordinator "$c" health >/dev/null 2>&1 && break
    kill -0 $worker_pid 2>/dev/null || { echo "serve.sh: the worker exited" >&2; exit 1; }
    sleep 0.5
  done
done
# The key goes to the router through its environment (LLM_API_KEY), never on a command line
# that `ps` shows.
router_env=()
auth=()
if [ -n "${API_KEY:-}" ]; then
  router_env=(env "LLM_API_KEY=$API_KEY")
  auth=(-H "Authorization: Bearer $API_KEY")
fi
setsid "${router_env[@]}" build/router/router --config "$CONFIG" "${overrides[@]}" \
  --router.port "$PORT" &
router_pid=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  sleep 0.2
done
name=$(curl -sf "${auth[@]}" "http://127.0.0.1:$PORT/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
auth_hint=""
[ -n "${API_KEY:-}" ] && auth_hint=' -H "Authorization: Bearer $API_KEY"'
cat <<MSG

Serving '$name' on http://127.0.0.1:$PORT ($RANKS rank(s): $DP engine(s) of $PP stage(s) x $TP, coordinators
${coordinators[*]}; load_format $LOAD_FORMAT). Try:

  curl http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json'$auth_hint \\
    -d '{"model": "$name", "prompt": "Once upon a time", "max_tokens": 32}'

Ctrl-C stops the router and the workers.
MSG
wait $router_pid
