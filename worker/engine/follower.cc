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
#include <unordered_map>
#include <vector>

#include "kernels/cpu_ops.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/rank_threads.h"
#include "worker/engine/sampler.h"
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
  // The sampling rank of a pipelined engine (the last stage's tensor-parallel rank 0): it
  // samples every step's rows and sends the tokens to rank 0 (sampler.h PackSample).
  std::unique_ptr<Sampler> sampler;
  std::unordered_map<int64_t, std::pair<SamplingParams, uint64_t>> sampling;  // by sequence
  std::vector<float> packed;
};

// The sampling rank: samples the step's rows from `logits` (nullptr: the step failed here)
// with the mirror's tokens and the plan's masks, and sends them to rank 0.
Status SendSamples(const StepPlan& plan, const float* logits, Communicator& comm,
                   FollowerState* st) {
  const int vocab = st->sampler->vocab_size();
  const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
  st->packed.clear();
  int row = 0;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const PlanScheduled& ps = plan.scheduled[i];
    if (!ps.samples) continue;
    auto it = st->sampling.find(ps.id);
    if (it == st->sampling.end()) return DataLoss("no sampling parameters for a sequence");
    const auto& [params, seed] = it->second;
    const size_t at = st->packed.size();
    st->packed.resize(at + PackedSampleFloats(params.logprobs));
    if (!ps.allowed.empty() && ps.allowed.size() != words) {
      return DataLoss("a grammar mask of " + std::to_string(ps.allowed.size()) + " words for " +
                      std::to_string(vocab) + " tokens");
    }
    if (logits == nullptr) {
      PackFailedSample(params.logprobs, st->packed.data() + at);
      continue;
    }
    const Sequence& seq = *st->entries[i].seq;
    const SampleResult r = st->sampler->Sample(
        logits + static_cast<size_t>(row++) * vocab, params, seq.prompt, seq.output, seed,
        static_cast<int>(seq.output.size()), ps.allowed.empty() ? nullptr : ps.allowed.data());
    PackSample(r, params.logprobs, st->packed.data() + at);
  }
  comm.Send(st->packed.data(), st->packed.size(), 0);
  return Status::Ok();
}

Status Start(const StepPlan& plan, const EngineConfig& config, FollowerState* st) {
  if (plan.block_size != config.block_size) {
    return FailedPrecondition("rank 0 runs block_size " + std::to_string(plan.block_size) +
                              ", this rank is configured with " +
                              std::to_string(config.block_size));
  }
  if (plan.num_blocks <= 0) return DataLoss("start message with no KV blocks");
  // engine.kv_cache_dtype as rank 0 resolved it ("auto" follows rank 0's weights).
  LLM_RETURN_IF_ERROR(st->executor->AllocateCache(plan.num_blocks, plan.block_size, plan.kv_dtype));
  // Rank 0 records decode graphs of these sizes: every rank must run the same padded steps,
  // or their collectives would not match.
  if (!st->executor->EnableGraphs(plan.graph_max_batch, plan.graph_max_blocks) &&
      plan.graph_max_batch > 0) {
    return FailedPrecondition("rank 0 records decode graphs but this rank cannot: " +
                              st->executor->model().graphs_off_reason());
  }
  st->mirror = std::make_unique<SequenceMirror>(plan.num_blocks, plan.block_size);
  st->block_size = plan.block_size;
  return Status::Ok();
}

Status RunStep(const StepPlan& plan, Communicator& comm, FollowerState* st) {
  if (!st->mirror) return DataLoss("step message before the start message");
  LLM_RETURN_IF_ERROR(st->mirror->Apply(plan, &st->entries));
  if (st->sampler) {
    for (const auto& n : plan.new_sequences) {
      if (!ValidateSamplingParams(n.sampling, st->sampler->vocab_size()).ok()) {
        return DataLoss("bad sampling parameters for sequence " + std::to_string(n.id));
      }
      st->sampling[n.id] = {n.sampling, n.seed};
    }
    for (int64_t id : plan.finished) st->sampling.erase(id);
  }
  BuildForwardBatch(st->entries, st->block_size, &st->executor->batch());
  auto logits = st->executor->Execute();
  if (!logits.ok()) {
    // Rank 0 failed on the same batch before its own collectives and does not commit either
    // (with pipeline stages it hears of it from the sampling rank).
    std::fprintf(stderr, "rank %d: step %llu failed: %s\n", comm.rank(),
                 static_cast<unsigned long long>(plan.step), logits.status().ToString().c_str());
    if (st->sampler) LLM_RETURN_IF_ERROR(SendSamples(plan, nullptr, comm, st));
    return Status::Ok();
  }
  if (st->sampler) LLM_RETURN_IF_ERROR(SendSamples(plan, *logits, comm, st));
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
  if (weights.pipeline.num_stages > 1 && weights.pipeline.last() && weights.tp.rank == 0) {
    st.sampler = std::make_unique<Sampler>(weights.config.vocab_size);
  }
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
        spdlog::info("rank {}: KV cache of {} blocks of {} tokens in {}", comm.rank(),
                     plan.num_blocks, plan.block_size, DTypeName(plan.kv_dtype));
        break;
      case StepMessageKind::kStep:
        LLM_RETURN_IF_ERROR(RunStep(plan, comm, &st));
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
                    Communicator* stage_comm, kernels::Backend* backend, Communicator* host_comm) {
  WatchShutdownSignals(comm.rank(), c.coordinator.shutdown_grace_s);
  if (backend == nullptr) {
    StatusOr<kernels::Backend*> b = EngineBackend(c.engine);
    if (!b.ok()) {
      spdlog::critical("rank {}: {}", comm.rank(), b.status().ToString());
      return 1;
    }
    backend = *b;
  }
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
  if (Status placed = PlaceWeightsFor(c.engine, **weights, *backend); !placed.ok()) {
    spdlog::critical("rank {}: {}", comm.rank(), placed.ToString());
    return 1;
  }
  // On a GPU with no configured cache size: this rank's share of the measurement rank 0 makes
  // in CreateEngine (same pass, same collectives), then the agreement on the smallest.
  if (!backend->caps().host_memory && c.engine.kv_cache_blocks <= 0 && c.engine.kv_cache_mib <= 0) {
    // The served context as rank 0 computes it (ServedMaxModelLen); rank 0 refuses a bad one.
    const int max_len = c.model.max_model_len > 0 ? c.model.max_model_len
                                                  : (*weights)->config.max_position_embeddings;
    const bool pipelined = pp.num_stages > 1;
    StatusOr<int> mine = ProfileKvBlocks(**weights, *backend, pipelined ? stage_comm : &comm,
                                         pipelined ? &comm : nullptr, c.engine, max_len,
                                         [&] { return kernels::CudaMemoryInfo(*backend); });
    if (!mine.ok()) {
      spdlog::critical("rank {}: KV cache sizing: {}", comm.rank(), mine.status().ToString());
      return 1;
    }
    MinOverRanks(host_comm != nullptr ? host_comm : &comm, *mine);
  }
  EngineConfig ec;
  ec.block_size = c.engine.block_size;
  const Status s = RunFollower(**weights, ec, comm, *backend, stage_comm);
  following_ended.store(true);
  if (!s.ok()) {
    spdlog::critical("rank {}: {}", comm.rank(), s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace llm
