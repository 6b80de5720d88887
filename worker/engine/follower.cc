#include "worker/engine/follower.h"

#include <omp.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu_ops.h"
#include "worker/engine/rank_threads.h"
#include "worker/engine/step_plan.h"
#include "worker/model/rank_executor.h"

namespace llm {

namespace {

// One follower's state between messages: the same RankExecutor rank 0's engine owns, and the
// mirror of rank 0's sequences that rebuilds each step's batch.
struct FollowerState {
  std::unique_ptr<RankExecutor> executor;
  std::unique_ptr<SequenceMirror> mirror;
  int block_size = 0;
  std::vector<BatchEntry> entries;
};

Status Start(const StepPlan& plan, const EngineConfig& config, FollowerState* st) {
  if (plan.block_size != config.block_size) {
    return FailedPrecondition("rank 0 runs block_size " + std::to_string(plan.block_size) +
                              ", this rank is configured with " +
                              std::to_string(config.block_size));
  }
  if (plan.num_blocks <= 0) return DataLoss("start message with no KV blocks");
  LLM_RETURN_IF_ERROR(st->executor->AllocateCache(plan.num_blocks, plan.block_size));
  st->mirror = std::make_unique<SequenceMirror>(plan.num_blocks, plan.block_size);
  st->block_size = plan.block_size;
  return Status::Ok();
}

Status RunStep(const StepPlan& plan, int rank, FollowerState* st) {
  if (!st->mirror) return DataLoss("step message before the start message");
  LLM_RETURN_IF_ERROR(st->mirror->Apply(plan, &st->entries));
  BuildForwardBatch(st->entries, st->block_size, &st->executor->batch());
  auto logits = st->executor->Execute();
  if (!logits.ok()) {
    // Rank 0 failed on the same batch before its own collectives and does not commit either.
    std::fprintf(stderr, "rank %d: step %llu failed: %s\n", rank,
                 static_cast<unsigned long long>(plan.step), logits.status().ToString().c_str());
    return Status::Ok();
  }
  st->mirror->Commit(plan);
  return Status::Ok();
}

}  // namespace

Status RunFollower(const ModelWeights& weights, const EngineConfig& config, Communicator& comm,
                   kernels::Backend& backend, Communicator* stage_comm) {
  if (comm.rank() == 0) return InvalidArgument("rank 0 runs the engine, not RunFollower");
  FollowerState st;
  LLM_ASSIGN_OR_RETURN(st.executor, weights.pipeline.num_stages > 1
                                        ? RankExecutor::Create(weights, backend, stage_comm, &comm)
                                        : RankExecutor::Create(weights, backend, &comm));
  std::vector<uint8_t> bytes;
  StepPlan plan;
  for (;;) {
    comm.Broadcast(bytes, 0);
    LLM_RETURN_IF_ERROR(ParseStepPlan(bytes, &plan));
    switch (plan.kind) {
      case StepMessageKind::kShutdown:
        return Status::Ok();
      case StepMessageKind::kStart:
        LLM_RETURN_IF_ERROR(Start(plan, config, &st));
        break;
      case StepMessageKind::kStep:
        LLM_RETURN_IF_ERROR(RunStep(plan, comm.rank(), &st));
        break;
    }
  }
}

void ShutdownFollowers(Communicator& comm) {
  if (comm.world_size() == 1 || comm.rank() != 0) return;
  StepPlan stop;
  stop.kind = StepMessageKind::kShutdown;
  std::vector<uint8_t> bytes;
  SerializeStepPlan(stop, &bytes);
  comm.Broadcast(bytes, 0);
}

namespace {

// Set once this rank's following ended (rank 0 sent Shutdown).
std::atomic<bool> following_ended{false};

// SIGTERM/SIGINT on a follower (mpirun forwards them to every rank): rank 0 drains and then
// tells the followers to stop, so keep following; if that has not happened within rank 0's
// grace period (plus a margin), rank 0 is gone or stuck and this rank ends itself. A rank that
// was told to stop in time waits at the job's end for the other data-parallel groups (asleep,
// MpiCommunicator's destructor); those have their own limits.
void WatchShutdownSignals(int rank, int grace_s) {
  std::thread([rank, grace_s] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    const int limit_s = grace_s + 10;
    spdlog::info("rank {}: received {}; following rank 0 until it shuts down (at most {} s)", rank,
                 sig == SIGINT ? "SIGINT" : "SIGTERM", limit_s);
    std::this_thread::sleep_for(std::chrono::seconds(limit_s));
    if (following_ended.load()) return;
    spdlog::critical("rank {}: rank 0 did not shut the job down within {} s of {}; exiting", rank,
                     limit_s, sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::_Exit(1);
  }).detach();
}

}  // namespace

int RunFollowerRank(const ClusterConfig& c, Communicator& comm, int ranks_on_host,
                    Communicator* stage_comm) {
  WatchShutdownSignals(comm.rank(), c.coordinator.shutdown_grace_s);
  const RankThreads rt = ComputeRankThreads(c, ranks_on_host);
  if (!rt.warning.empty()) spdlog::warn("rank {}: {}", comm.rank(), rt.warning);
  const int threads = rt.threads;
  omp_set_num_threads(threads);
  if (Status isa = kernels::SelectMatmulIsa(c.engine.matmul_isa); !isa.ok()) {
    spdlog::critical("rank {}: {}", comm.rank(), isa.ToString());
    return 1;
  }
  const EngineShard shard = EngineShardOf(c.engine, comm.rank(), comm.world_size());
  auto weights =
      LoadModelWeights(c.model.path, c.model.load_format, static_cast<uint64_t>(c.engine.seed),
                       shard.tp, ModelQuantization(c.model), shard.pipeline);
  if (!weights.ok()) {
    spdlog::critical("rank {}: model.path '{}': {}", comm.rank(), c.model.path,
                     weights.status().ToString());
    return 1;
  }
  const PipelineStage& pp = (*weights)->pipeline;
  spdlog::info(
      "rank {} of {}: tensor-parallel rank {} of {}, pipeline stage {} of {} (layers "
      "{}..{}), {} MiB of matrices, {} threads; following rank 0",
      comm.rank(), comm.world_size(), shard.tp.rank, shard.tp.size, pp.stage, pp.num_stages,
      pp.layers.begin, pp.layers.end - 1, (*weights)->matrix_bytes >> 20, threads);
  EngineConfig ec;
  ec.block_size = c.engine.block_size;
  const Status s = RunFollower(**weights, ec, comm, kernels::CpuBackend(), stage_comm);
  following_ended.store(true);
  if (!s.ok()) {
    spdlog::critical("rank {}: {}", comm.rank(), s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace llm
