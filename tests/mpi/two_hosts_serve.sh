#!/usr/bin/env bash
# Runs on the first host of tools/two-hosts.sh (tests/mpi/two_hosts_test.cc starts it): one
# `mpirun` job of 4 ranks over both hosts, engine.data_parallel_size 2 × tensor_parallel_size 2,
# so each host holds one whole engine (tensor parallelism inside the host); each engine's
# coordinator listens on its own host's address, both on the same port. A router per engine
# (on this host) sends every request body of $REQUESTS (files *.json) to it and writes the
# answer to $OUT/<engine>-<file>; the worker's layout lines go to stdout. Then everything
# stops. Every wait is bounded.
#   WORKER=... ROUTER=... MODEL=... REQUESTS=dir OUT=dir two_hosts_serve.sh
set -euo pipefail
: "${WORKER:?}" "${ROUTER:?}" "${MODEL:?}" "${REQUESTS:?}" "${OUT:?}" "${TWO_HOSTS_A:?}" "${TWO_HOSTS_B:?}"
dir=$(mktemp -d /tmp/two-hosts-serve.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

coord_port=50051
# shellcheck disable=SC2086  # TWO_HOSTS_MPI_ARGS is a list of arguments
mpirun $TWO_HOSTS_MPI_ARGS -np 4 -x OMP_NUM_THREADS=1 "$WORKER" --model.path "$MODEL" \
  --engine.data_parallel_size 2 --engine.tensor_parallel_size 2 --engine.threads_per_rank 1 \
  --engine.kv_cache_mib 8 --engine.log_stats_interval_s 0 --coordinator.host 0.0.0.0 \
  --coordinator.ports "$coord_port,$coord_port" >"$dir/worker.log" 2>&1 &
pids+=($!)
routers=()
for host in "$TWO_HOSTS_A" "$TWO_HOSTS_B"; do
  port=$((8100 + ${#routers[@]}))
  "$ROUTER" --model.path "$MODEL" --router.host 127.0.0.1 --router.port "$port" \
    --router.upstreams "$host:$coord_port" --router.health_check_interval_ms 200 \
    >"$dir/router$port.log" 2>&1 &
  pids+=($!)
  routers+=("$port")
done
ready() {  # $1: router port; the router is up and its upstream healthy
  curl -sf -m 2 "http://127.0.0.1:$1/upstreams" | grep -q '"healthy":true'
}
for port in "${routers[@]}"; do
  for _ in $(seq 600); do
    ready "$port" && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.2
  done
  if ! ready "$port"; then
    echo "router on $port has no healthy upstream" >&2
    cat "$dir/worker.log" "$dir/router$port.log" >&2
    exit 1
  fi
done
grep 'layout:' "$dir/worker.log" || true
engine=0
for port in "${routers[@]}"; do
  for body in "$REQUESTS"/*.json; do
    curl -sf -m 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
      -d "@$body" >"$OUT/$engine-$(basename "$body")"
  done
  engine=$((engine + 1))
done
