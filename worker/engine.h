// One in-process engine: scheduler + block manager + model + KV cache + sampler. It runs on a
// single rank (the tensor-parallel coordinator wraps the same pieces). Thread affinity: one
// caller at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "worker/block_manager.h"
#include "worker/kv_cache.h"
#include "worker/model_weights.h"
#include "worker/sampler.h"
#include "worker/scheduler.h"
#include "worker/transformer_model.h"

namespace llm {

struct EngineConfig {
  int block_size = 16;
  int num_blocks = 0;  // > 0 wins over kv_cache_bytes
  size_t kv_cache_bytes = 256ull << 20;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  SchedulerConfig scheduler;
  uint64_t seed = 0;  // draws the seeds of requests that bring none
};

struct GenerateRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  int min_tokens = 0;  // eos and stop_token_ids do not end the request before this many tokens
  int priority = 0;
};

enum class FinishReason { kNone, kLength, kStop, kAbort };
const char* FinishReasonName(FinishReason r);

// One new token of one request.
struct TokenEvent {
  int64_t request_id = 0;
  SampleResult sample;
  FinishReason finish = FinishReason::kNone;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int blocks_total = 0;
  int blocks_free = 0;
  int64_t preemptions = 0;
  int64_t prompt_tokens_computed = 0;  // prefill tokens run (recomputes included)
  int64_t tokens_generated = 0;
};

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> Create(const ModelWeights& weights,
                                                  const EngineConfig& config);

  // Validates and queues a request. InvalidArgument / OutOfRange name the field at fault.
  StatusOr<int64_t> Add(GenerateRequest request);
  // Runs one step; appends the tokens it produced to `events`.
  Status Step(std::vector<TokenEvent>* events);
  // Drops a request and frees its blocks at once. False if it is unknown (already finished).
  bool Abort(int64_t request_id);
  bool idle() const { return scheduler_.idle(); }
  EngineStats stats() const;
  const ModelConfig& model_config() const { return model_.config(); }
  int max_model_len() const { return max_model_len_; }

 private:
  struct Request {
    GenerateRequest params;
    uint64_t seed = 0;
  };
  Engine(const ModelWeights& weights, const EngineConfig& config, int num_blocks);
  void BuildBatch(const SchedulePlan& plan);
  FinishReason CheckFinish(const Sequence& s, const Request& r) const;

  EngineConfig config_;
  int max_model_len_;
  TransformerModel model_;
  KvCache cache_;
  BlockManager blocks_;
  Scheduler scheduler_;
  Sampler sampler_;
  std::mt19937_64 seed_rng_;
  std::unordered_map<int64_t, Request> requests_;
  int64_t next_id_ = 1;
  ForwardBatch batch_;
  EngineStats counters_;
};

// Runs the requests to completion together (continuous batching) and returns each one's
// tokens in request order.
struct GenerateResult {
  std::vector<SampleResult> tokens;
  FinishReason finish = FinishReason::kNone;
};
StatusOr<std::vector<GenerateResult>> GenerateAll(Engine& engine,
                                                  const std::vector<GenerateRequest>& requests);

}  // namespace llm
