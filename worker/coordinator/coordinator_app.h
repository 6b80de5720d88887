// Start-up and life cycle of the coordinator role of the `worker` binary (rank 0): loads the
// model, sizes the KV cache, starts the gRPC server, runs the engine loop on the calling thread
// and shuts down cleanly on SIGINT / SIGTERM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/cluster_config.h"
#include "common/model_config.h"
#include "common/status.h"
#include "kernels/backend.h"
#include "worker/model/communicator.h"

namespace llm {

// MemAvailable of `meminfo_path` (a /proc/meminfo file) in bytes.
StatusOr<int64_t> ReadMemAvailableBytes(const std::string& meminfo_path = "/proc/meminfo");

// The KV cache of one rank in bytes: engine.kv_cache_mib when > 0, else
// engine.kv_cache_memory_fraction of `mem_available`. ResourceExhausted (naming the key) when
// an explicit size exceeds what is available.
StatusOr<size_t> KvCacheBytes(const ClusterConfig& config, int64_t mem_available);

// The context length served: model.max_model_len, or the model's max_position_embeddings.
// InvalidArgument when the configured one exceeds the model's.
StatusOr<int> ServedMaxModelLen(const ClusterConfig& config, const ModelConfig& model);

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later; call first
// thing in main, before any thread exists. RunCoordinator then waits for them with sigwait.
void BlockShutdownSignals();

// Runs the coordinator until SIGINT / SIGTERM. Returns the process exit code; start-up errors
// are logged with the key at fault. With `comm` (rank 0 of a tensor-parallel engine of
// comm->world_size() ranks, `ranks_on_host` ranks of the job on this host) rank 0 loads its
// shard and its Engine drives the followers; nullptr serves a single rank. The engine is
// data-parallel group `data_parallel_rank` of config.engine.data_parallel_size (Stats reports
// both); it serves on config.coordinator.port as given (the caller adds the group index).
// With engine.pipeline_parallel_size > 1, comm joins every stage and `stage_comm` stage 0's
// tensor-parallel ranks (nullptr: one rank per stage).
// The forward pass runs on `backend` (nullptr: the backend of engine.device, EngineBackend in
// worker/engine/device_setup.h). With tensor parallelism on a GPU, the tensor-parallel
// communicator (comm, or stage_comm with pipeline stages) is an NCCL one; `host_comm` then joins
// the same ranks as comm over host memory (MPI), for the start-up agreement on the KV cache size
// and the health figures (nullptr: comm).
int RunCoordinator(const ClusterConfig& config, Communicator* comm = nullptr, int ranks_on_host = 1,
                   int data_parallel_rank = 0, Communicator* stage_comm = nullptr,
                   kernels::Backend* backend = nullptr, Communicator* host_comm = nullptr);

}  // namespace llm
