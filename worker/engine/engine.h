// One engine: scheduler + block manager + model + KV cache + sampler, on rank 0 of a
// tensor-parallel group (or alone). With several ranks, each Step broadcasts a StepPlan (see
// worker/step_plan.h) that the other ranks, in RunFollower (worker/follower.h), turn into the
// same forward pass on their shard; rank 0 only adds scheduling and sampling.
// Thread affinity: one caller at a time, always the same thread with several ranks (MPI).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "common/grammar_vocab.h"
#include "common/status.h"
#include "kernels/backend.h"
#include "worker/engine/block_manager.h"
#include "worker/engine/sampler.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/step_plan.h"
#include "worker/model/communicator.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_executor.h"

namespace llm {

// The engine section of cluster.yaml as given (block_size, scheduler, seed, ...) plus what is
// resolved at start-up from the machine and the model.
struct EngineConfig : EngineSection {
  int num_blocks = 0;                    // > 0 wins over kv_cache_bytes
  size_t kv_cache_bytes = 256ull << 20;  // per rank: each rank holds its KV heads' share
  int max_model_len = 0;                 // 0: the model's max_position_embeddings
  // max_model_len came from the model, not the user: when the KV cache holds fewer tokens, the
  // engine serves sequences of what it holds (whole blocks) instead, as llama.cpp's default
  // context is shorter than a model's trained one. Without it (a length the user asked for)
  // the caller refuses a cache too small for one sequence.
  bool fit_max_model_len_to_cache = false;
  // Pipeline stages: steps in flight at once (disjoint sets of sequences, so every stage has a
  // batch to run); 0: one per stage, as vLLM's virtual engines. 1 runs the stages in turn.
  int pipeline_steps_in_flight = 0;
};

// The most stop_token_ids one request may carry (each is checked every step).
constexpr size_t kMaxStopTokenIds = 1024;

struct GenerateRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  int min_tokens = 0;  // eos and stop_token_ids do not end the request before this many tokens
  int priority = 0;
  // Structured output: the output must be a sentence of this grammar (a JSON Schema, any JSON
  // object, a forced tool call). Each step only tokens that keep the output inside it may be
  // sampled, and the model's eos ids and the request's stop_token_ids only once it is complete;
  // one of those ends the request as soon as it is complete (min_tokens and ignore_eos give
  // way). Needs the engine's vocabulary (SetGrammarVocabulary).
  std::shared_ptr<const Grammar> grammar;
};

// Why a request ended (the coordinator sends it as proto FinishReason, the one wire list).
enum class FinishReason {
  kNone,
  kEos,          // one of the model's eos ids
  kStopToken,    // one of the request's stop_token_ids
  kMaxTokens,    // max_tokens reached
  kMaxModelLen,  // the context is full
  kAbort,
};
// OpenAI's name: "stop" (kEos, kStopToken), "length" (kMaxTokens, kMaxModelLen), "abort", "".
const char* FinishReasonName(FinishReason r);
// The last token ended the request and is not part of its text (kEos, kStopToken).
inline bool EndedByToken(FinishReason r) {
  return r == FinishReason::kEos || r == FinishReason::kStopToken;
}

// Where a finished request's time went, in seconds (vLLM's request_*_time_seconds): arrival
// is Engine::Add, "scheduled" the first step that ran any of its tokens (a preempted request
// keeps it), "first token" and "last token" the steps that sampled them.
struct RequestTimings {
  double queue_s = 0;      // arrival -> first scheduled
  double prefill_s = 0;    // first scheduled -> first token
  double decode_s = 0;     // first token -> last token
  double inference_s = 0;  // first scheduled -> last token (prefill_s + decode_s)
};

// One new token of one request.
struct TokenEvent {
  int64_t request_id = 0;
  SampleResult sample;
  FinishReason finish = FinishReason::kNone;
  RequestTimings timings;  // set with `finish` (the request's last token)
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int blocks_total = 0;
  int blocks_free = 0;
  int64_t preemptions = 0;
  int64_t prompt_tokens_computed = 0;  // prefill tokens run (recomputes included)
  int64_t tokens_generated = 0;
  int64_t prefix_cache_hit_tokens = 0;      // prompt tokens taken from the prefix cache
  int64_t prefix_cache_queried_tokens = 0;  // tokens of the sequences looked up there
  // Wall time of the steps' parts, summed (llm-bench's per-step breakdown): the forward pass up
  // to the logits in host memory, and sampling.
  int64_t forward_ns = 0;
  int64_t sampling_ns = 0;
};

class Engine {
 public:
  // `comm` (not owned, outlives the engine) joins every rank of the engine; nullptr means one
  // rank. The engine runs on rank 0 and `weights` must be rank 0's shard: tensor-parallel rank
  // 0 of pipeline stage 0, where comm's world is tp.size × pipeline.num_stages ranks (rank =
  // stage * tp.size + tp rank). With pipeline stages, `stage_comm` joins stage 0's
  // tensor-parallel ranks (nullptr: one rank per stage); without, comm is that group.
  // With several ranks, a successful Create tells the followers to allocate their KV cache;
  // after a failed one, call ShutdownFollowers (worker/follower.h).
  // The forward pass runs on `backend` (which must outlive the engine).
  static StatusOr<std::unique_ptr<Engine>> Create(const ModelWeights& weights,
                                                  const EngineConfig& config,
                                                  Communicator* comm = nullptr,
                                                  kernels::Backend& backend = kernels::CpuBackend(),
                                                  Communicator* stage_comm = nullptr);
  // Stops the followers (also done by the destructor).
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. InvalidArgument / OutOfRange name the field at fault.
  StatusOr<int64_t> Add(GenerateRequest request);
  // Runs one step; appends the tokens it produced to `events`. With pipeline stages, starts
  // steps until pipeline_steps_in_flight are in flight, then completes the oldest (its tokens).
  Status Step(std::vector<TokenEvent>* events);
  // Drops a request and frees its blocks at once (a request in a step in flight: when that
  // step completes, without a token). False if it is unknown (already finished).
  bool Abort(int64_t request_id);
  bool idle() const { return scheduler_.idle() && in_flight_.empty(); }
  // True while the request waits in the queue to be scheduled.
  bool IsWaiting(int64_t request_id) const { return scheduler_.IsWaiting(request_id); }
  EngineStats stats() const;
  const ModelConfig& model_config() const { return executor_->config(); }
  int max_model_len() const { return max_model_len_; }
  // The KV cache's element type (engine.kv_cache_dtype, "auto" resolved: ResolveKvCacheDtype).
  DType kv_cache_dtype() const { return kv_dtype_; }
  // Sends the followers a Shutdown message (once); later Steps fail. No-op with one rank.
  void StopFollowers();
  // The token bytes structured output masks with (from the model's tokenizer). Without it,
  // requests with a grammar are refused.
  void SetGrammarVocabulary(std::shared_ptr<const GrammarVocabulary> vocab) {
    grammar_vocab_ = std::move(vocab);
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Request {
    GenerateRequest params;
    uint64_t seed = 0;
    Clock::time_point arrival;
    Clock::time_point first_scheduled;            // epoch: not scheduled yet
    Clock::time_point first_token;                // epoch: no token yet
    std::unique_ptr<GrammarTokenFilter> grammar;  // structured output, when asked
    Sequence* seq = nullptr;                      // owned by the scheduler
    bool abort_pending = false;                   // aborted while in a step in flight
  };
  // A step started through the pipeline stages whose logits have not come back yet.
  struct InFlightStep {
    SchedulePlan plan;
    std::vector<float> samples;  // packed SampleResults from the last stage (sampler.h)
    int handle = 0;              // their receive (Communicator::StartRecv)
  };
  // The mask of the tokens request `r` may sample next (model vocabulary bits), or nullptr.
  const uint64_t* GrammarMask(Request& r);
  static RequestTimings Timings(const Request& r, Clock::time_point last_token);
  Engine(std::unique_ptr<RankExecutor> executor, const EngineConfig& config, int num_blocks,
         Communicator* comm);
  void BuildBatch(const SchedulePlan& plan);
  // Books a scheduled plan (preemptions, first-scheduled times), sends it to the followers and
  // runs this rank's forward pass: its logits, or nullptr when they come later (pipelined).
  StatusOr<const float*> Launch(const SchedulePlan& plan);
  // Commits a plan that ran and samples from its logits, or takes the samples of its sampled
  // rows from `remote` (pipeline stages: the last stage sampled them), in plan order.
  void Finish(const SchedulePlan& plan, const float* logits,
              const std::vector<SampleResult>* remote, std::vector<TokenEvent>* events);
  Status PipelinedStep(std::vector<TokenEvent>* events);
  SchedulePlan plan_;  // reused every step
  void Remove(int64_t id);
  FinishReason CheckFinish(const Sequence& s, const Request& r) const;

  EngineConfig config_;
  int max_model_len_;
  DType kv_dtype_ = DType::kF32;
  std::unique_ptr<Communicator> local_comm_;  // when none is given
  Communicator* comm_;
  bool tp_;               // more than one rank: followers mirror every step
  bool stopped_ = false;  // followers were told to shut down
  StepPlanWriter plan_writer_;
  std::vector<BatchEntry> entries_;
  std::unique_ptr<RankExecutor> executor_;
  BlockManager blocks_;
  Scheduler scheduler_;
  Sampler sampler_;
  // Samples every sampled row of a step into samples_ (row order): rows without a grammar in
  // parallel, one Sampler per OpenMP thread (samplers_), the others here with sampler_.
  void SampleRows(const SchedulePlan& plan, const float* logits);
  std::vector<std::unique_ptr<Sampler>> samplers_;
  std::vector<SampleResult> samples_;
  std::mt19937_64 seed_rng_;
  std::unordered_map<int64_t, Request> requests_;
  std::shared_ptr<const GrammarVocabulary> grammar_vocab_;
  std::vector<uint64_t> mask_;  // GrammarMask's buffer
  int64_t next_id_ = 1;
  EngineStats counters_;
  int steps_in_flight_ = 1;  // pipeline stages: steps started before the oldest completes
  int sample_rank_ = 0;      // pipeline stages: the rank that samples (last stage, tp rank 0)
  std::vector<SampleResult> remote_;  // the samples of the step completing
  std::deque<InFlightStep> in_flight_;
};

// Runs the requests to completion together (continuous batching) and returns each one's
// tokens in request order.
struct GenerateResult {
  std::vector<SampleResult> tokens;
  FinishReason finish = FinishReason::kNone;
  RequestTimings timings;
};
StatusOr<std::vector<GenerateResult>> GenerateAll(Engine& engine,
                                                  const std::vector<GenerateRequest>& requests);

}  // namespace llm
