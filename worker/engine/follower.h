// The loop of every tensor-parallel rank but 0: wait for rank 0's StepPlan messages (see
// worker/step_plan.h), mirror its sequences and block tables, and run the same forward pass on
// this rank's shard of the weights and of the KV cache. Rank 0 runs Engine.
#pragma once

#include "common/cluster_config.h"
#include "common/status.h"
#include "worker/engine/engine.h"
#include "worker/model/communicator.h"
#include "worker/model/model_weights.h"

namespace llm {

// Runs until rank 0 sends Shutdown (Engine::StopFollowers or its destructor, or
// ShutdownFollowers): then Ok. `weights` is this rank's shard of comm's world; the KV cache is
// allocated when rank 0's engine announces its size (config.block_size must agree). While
// idle it sleeps in Broadcast (no busy wait). A malformed or out-of-order message is a
// DataLoss error: this rank can no longer follow and the job should end. A forward pass that
// fails on the batch (as it does on rank 0 too) is reported on stderr and the loop goes on.
// With pipeline stages (weights.pipeline.num_stages > 1), `comm` joins every rank of the engine
// and `stage_comm` this rank's stage (its tensor-parallel ranks; nullptr: one rank per stage).
Status RunFollower(const ModelWeights& weights, const EngineConfig& config, Communicator& comm,
                   kernels::Backend& backend = kernels::CpuBackend(),
                   Communicator* stage_comm = nullptr);

// From rank 0 when no Engine could be created: ends the followers' loops.
void ShutdownFollowers(Communicator& comm);

// For the `worker` binary on ranks != 0: sets the compute threads (threads_per_rank, else this
// host's cores over `ranks_on_host`), loads this rank's shard of model.path as rank 0 does
// (same load_format and seed) and follows rank 0. Returns the process exit code (0 after
// Shutdown); errors are logged. On a non-zero code the caller should end the whole job.
// `stage_comm`: as for RunFollower (this rank's stage, when the engine has pipeline stages).
// `backend`: where the forward pass runs (nullptr: engine.device's, EngineBackend); the weights
// are placed on it. `host_comm`: the ranks of `comm` over host memory (MPI) when `comm` (or
// stage_comm) is a device communicator (NCCL); nullptr: comm. On a GPU without a configured
// KV cache size, every rank measures its memory after a profiling pass and the ranks agree on
// the smallest block count over host_comm before rank 0 starts the engine (as CreateEngine in
// worker/coordinator/coordinator_app.cc does on rank 0).
int RunFollowerRank(const ClusterConfig& config, Communicator& comm, int ranks_on_host,
                    Communicator* stage_comm = nullptr, kernels::Backend* backend = nullptr,
                    Communicator* host_comm = nullptr);

}  // namespace llm
