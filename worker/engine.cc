#include "worker/engine.h"

#include <algorithm>

namespace llm {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kAbort:
      return "abort";
  }
  return "";
}

StatusOr<std::unique_ptr<Engine>> Engine::Create(const ModelWeights& weights,
                                                 const EngineConfig& config) {
  const ModelConfig& mc = weights.config;
  if (config.block_size <= 0 || config.block_size > 256) {
    return InvalidArgument("block_size must be in [1, 256], got " +
                           std::to_string(config.block_size));
  }
  if (config.scheduler.max_num_batched_tokens <= 0 || config.scheduler.max_num_seqs <= 0) {
    return InvalidArgument("max_num_batched_tokens and max_num_seqs must be positive");
  }
  const size_t block_bytes =
      2 * sizeof(float) * static_cast<size_t>(config.block_size) * mc.kv_dim() * mc.num_layers;
  const int num_blocks = config.num_blocks > 0
                             ? config.num_blocks
                             : static_cast<int>(config.kv_cache_bytes / block_bytes);
  if (num_blocks <= 0) {
    return ResourceExhausted("kv cache of " + std::to_string(config.kv_cache_bytes >> 20) +
                             " MiB holds no block of " + std::to_string(block_bytes) + " bytes");
  }
  return std::unique_ptr<Engine>(new Engine(weights, config, num_blocks));
}

Engine::Engine(const ModelWeights& weights, const EngineConfig& config, int num_blocks)
    : config_(config),
      max_model_len_(config.max_model_len > 0 ? config.max_model_len
                                              : weights.config.max_position_embeddings),
      model_(weights),
      cache_(model_.CacheShape(num_blocks, config.block_size)),
      blocks_(num_blocks, config.block_size),
      scheduler_(config.scheduler, &blocks_),
      sampler_(weights.config.vocab_size),
      seed_rng_(config.seed) {}

StatusOr<int64_t> Engine::Add(GenerateRequest request) {
  const ModelConfig& mc = model_.config();
  if (request.prompt.empty()) return InvalidArgument("prompt: must contain at least one token");
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= mc.vocab_size) {
      return InvalidArgument("prompt: token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(mc.vocab_size) +
                             ")");
    }
  }
  if (request.max_tokens < 1) return InvalidArgument("max_tokens: must be at least 1");
  if (request.min_tokens < 0 || request.min_tokens > request.max_tokens) {
    return InvalidArgument("min_tokens: must be in [0, max_tokens]");
  }
  LLM_RETURN_IF_ERROR(ValidateSamplingParams(request.sampling, mc.vocab_size));
  const int total = static_cast<int>(request.prompt.size()) + request.max_tokens;
  if (total > max_model_len_) {
    return OutOfRange("prompt (" + std::to_string(request.prompt.size()) +
                      " tokens) + max_tokens (" + std::to_string(request.max_tokens) +
                      ") exceeds the maximum context length of " + std::to_string(max_model_len_));
  }
  if (blocks_.BlocksFor(total) > blocks_.num_blocks()) {
    return ResourceExhausted("request needs " + std::to_string(blocks_.BlocksFor(total)) +
                             " KV blocks but the cache has only " +
                             std::to_string(blocks_.num_blocks()));
  }
  const int64_t id = next_id_++;
  Request r;
  r.seed = request.sampling.seed ? *request.sampling.seed : seed_rng_();
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->priority = request.priority;
  seq->prompt = request.prompt;
  seq->output.reserve(request.max_tokens);
  r.params = std::move(request);
  requests_.emplace(id, std::move(r));
  scheduler_.Add(std::move(seq));
  return id;
}

void Engine::BuildBatch(const SchedulePlan& plan) {
  batch_.Clear();
  const int bs = config_.block_size;
  int max_blocks = 0;
  for (const auto& s : plan.scheduled) {
    max_blocks = std::max(max_blocks, static_cast<int>(s.seq->block_table.size()));
  }
  batch_.max_blocks_per_seq = max_blocks;
  batch_.block_tables.assign(plan.scheduled.size() * max_blocks, 0);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const Sequence& seq = *plan.scheduled[i].seq;
    const int begin = seq.num_computed, end = begin + plan.scheduled[i].num_new_tokens;
    for (int p = begin; p < end; ++p) {
      batch_.token_ids.push_back(seq.token_at(p));
      batch_.positions.push_back(p);
      batch_.slot_mapping.push_back(seq.block_table[p / bs] * bs + p % bs);
    }
    batch_.query_start.push_back(batch_.num_tokens());
    batch_.context_len.push_back(end);
    std::copy(seq.block_table.begin(), seq.block_table.end(),
              batch_.block_tables.begin() + static_cast<long>(i) * max_blocks);
    if (plan.scheduled[i].samples) batch_.logit_rows.push_back(batch_.num_tokens() - 1);
  }
}

FinishReason Engine::CheckFinish(const Sequence& s, const Request& r) const {
  const int32_t last = s.output.back();
  const bool may_stop = static_cast<int>(s.output.size()) >= r.params.min_tokens;
  if (may_stop && !r.params.ignore_eos) {
    const auto& eos = model_.config().eos_token_ids;
    if (std::find(eos.begin(), eos.end(), last) != eos.end()) return FinishReason::kStop;
  }
  const auto& stops = r.params.stop_token_ids;
  if (may_stop && std::find(stops.begin(), stops.end(), last) != stops.end()) {
    return FinishReason::kStop;
  }
  if (static_cast<int>(s.output.size()) >= r.params.max_tokens) return FinishReason::kLength;
  if (s.num_tokens() >= max_model_len_) return FinishReason::kLength;
  return FinishReason::kNone;
}

Status Engine::Step(std::vector<TokenEvent>* events) {
  SchedulePlan plan = scheduler_.Schedule();
  counters_.preemptions += static_cast<int64_t>(plan.preempted.size());
  if (plan.empty()) {
    if (scheduler_.idle()) return Status::Ok();
    return Internal("scheduler planned nothing while requests wait (cache too small?)");
  }
  BuildBatch(plan);
  LLM_ASSIGN_OR_RETURN(const float* logits, model_.Forward(batch_, cache_));
  scheduler_.Commit(plan);
  const int vocab = model_.config().vocab_size;
  int row = 0;
  for (const auto& s : plan.scheduled) {
    Sequence& seq = *s.seq;
    if (seq.num_computed <= static_cast<int>(seq.prompt.size()))
      counters_.prompt_tokens_computed += s.num_new_tokens;
    if (!s.samples) continue;
    const Request& r = requests_.at(seq.id);
    TokenEvent ev;
    ev.request_id = seq.id;
    ev.sample =
        sampler_.Sample(logits + static_cast<size_t>(row++) * vocab, r.params.sampling, seq.prompt,
                        seq.output, r.seed, static_cast<int>(seq.output.size()));
    seq.output.push_back(ev.sample.token);
    counters_.tokens_generated++;
    ev.finish = CheckFinish(seq, r);
    const int64_t id = seq.id;
    events->push_back(std::move(ev));
    if (events->back().finish != FinishReason::kNone) {
      scheduler_.Remove(id);
      requests_.erase(id);
    }
  }
  return Status::Ok();
}

bool Engine::Abort(int64_t request_id) {
  if (!requests_.erase(request_id)) return false;
  scheduler_.Remove(request_id);
  return true;
}

EngineStats Engine::stats() const {
  EngineStats s = counters_;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  s.blocks_total = blocks_.num_blocks();
  s.blocks_free = blocks_.num_free();
  return s;
}

StatusOr<std::vector<GenerateResult>> GenerateAll(Engine& engine,
                                                  const std::vector<GenerateRequest>& requests) {
  std::vector<GenerateResult> results(requests.size());
  std::unordered_map<int64_t, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    LLM_ASSIGN_OR_RETURN(int64_t id, engine.Add(requests[i]));
    index[id] = i;
  }
  std::vector<TokenEvent> events;
  while (!engine.idle()) {
    events.clear();
    LLM_RETURN_IF_ERROR(engine.Step(&events));
    for (auto& ev : events) {
      auto it = index.find(ev.request_id);
      if (it == index.end()) continue;
      GenerateResult& r = results[it->second];
      r.tokens.push_back(std::move(ev.sample));
      r.finish = ev.finish;
    }
  }
  return results;
}

}  // namespace llm
