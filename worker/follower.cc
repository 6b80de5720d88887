#include "worker/follower.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "worker/kv_cache.h"
#include "worker/step_plan.h"
#include "worker/transformer_model.h"

namespace llm {

namespace {

// One follower's state between messages.
struct FollowerState {
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<SequenceMirror> mirror;
  int block_size = 0;
  ForwardBatch batch;
  std::vector<BatchEntry> entries;
};

Status Start(const StepPlan& plan, const EngineConfig& config, const TransformerModel& model,
             FollowerState* st) {
  if (plan.block_size != config.block_size) {
    return FailedPrecondition("rank 0 runs block_size " + std::to_string(plan.block_size) +
                              ", this rank is configured with " +
                              std::to_string(config.block_size));
  }
  if (plan.num_blocks <= 0) return DataLoss("start message with no KV blocks");
  st->cache.reset();  // a restarted engine: free the old cache first
  st->cache = std::make_unique<KvCache>(model.CacheShape(plan.num_blocks, plan.block_size));
  st->mirror = std::make_unique<SequenceMirror>(plan.num_blocks, plan.block_size);
  st->block_size = plan.block_size;
  return Status::Ok();
}

Status RunStep(const StepPlan& plan, TransformerModel& model, int rank, FollowerState* st) {
  if (!st->mirror) return DataLoss("step message before the start message");
  LLM_RETURN_IF_ERROR(st->mirror->Apply(plan, &st->entries));
  BuildForwardBatch(st->entries, st->block_size, &st->batch);
  auto logits = model.Forward(st->batch, *st->cache);
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

Status RunFollower(const ModelWeights& weights, const EngineConfig& config, Communicator& comm) {
  if (comm.rank() == 0) return InvalidArgument("rank 0 runs the engine, not RunFollower");
  if (weights.tp.size != comm.world_size() || weights.tp.rank != comm.rank()) {
    return InvalidArgument("weights hold shard " + std::to_string(weights.tp.rank) + " of " +
                           std::to_string(weights.tp.size) + " but this is rank " +
                           std::to_string(comm.rank()) + " of " +
                           std::to_string(comm.world_size()));
  }
  TransformerModel model(weights, &comm);
  FollowerState st;
  std::vector<uint8_t> bytes;
  StepPlan plan;
  for (;;) {
    comm.Broadcast(bytes, 0);
    LLM_RETURN_IF_ERROR(ParseStepPlan(bytes, &plan));
    switch (plan.kind) {
      case StepMessageKind::kShutdown:
        return Status::Ok();
      case StepMessageKind::kStart:
        LLM_RETURN_IF_ERROR(Start(plan, config, model, &st));
        break;
      case StepMessageKind::kStep:
        LLM_RETURN_IF_ERROR(RunStep(plan, model, comm.rank(), &st));
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

int RunFollowerRank(const ClusterConfig& c, Communicator& comm, int ranks_on_host) {
  const int threads = c.threads_per_rank > 0
                          ? c.threads_per_rank
                          : std::max(1, omp_get_num_procs() / std::max(1, ranks_on_host));
  omp_set_num_threads(threads);
  const TensorParallel tp{comm.rank(), comm.world_size()};
  auto weights = LoadModelWeights(
      c.model_path, c.load_format == "dummy" ? LoadFormat::kDummy : LoadFormat::kSafetensors,
      static_cast<uint64_t>(c.seed), tp);
  if (!weights.ok()) {
    spdlog::critical("rank {}: model.path '{}': {}", tp.rank, c.model_path,
                     weights.status().ToString());
    return 1;
  }
  spdlog::info("rank {} of {}: {} MiB of matrices, {} threads; following rank 0", tp.rank, tp.size,
               (*weights)->matrix_bytes >> 20, threads);
  EngineConfig ec;
  ec.block_size = c.block_size;
  const Status s = RunFollower(**weights, ec, comm);
  if (!s.ok()) {
    spdlog::critical("rank {}: {}", tp.rank, s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace llm
