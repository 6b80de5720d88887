#include "worker/engine/engine.h"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "worker/engine/device_setup.h"

namespace llm {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kMaxTokens:
    case FinishReason::kMaxModelLen:
      return "length";
    case FinishReason::kEos:
    case FinishReason::kStopToken:
      return "stop";
    case FinishReason::kAbort:
      return "abort";
  }
  return "";
}

StatusOr<std::unique_ptr<Engine>> Engine::Create(const ModelWeights& weights,
                                                 const EngineConfig& config, Communicator* comm,
                                                 kernels::Backend& backend,
                                                 Communicator* stage_comm) {
  const int world = comm ? comm->world_size() : 1;
  if (comm && comm->rank() != 0) {
    return InvalidArgument("the engine runs on rank 0; rank " + std::to_string(comm->rank()) +
                           " runs RunFollower");
  }
  const PipelineStage& pp = weights.pipeline;
  if (weights.tp.size * pp.num_stages != world || weights.tp.rank != 0 || pp.stage != 0) {
    return InvalidArgument("weights hold shard " + std::to_string(weights.tp.rank) + " of " +
                           std::to_string(weights.tp.size) + " of pipeline stage " +
                           std::to_string(pp.stage) + " of " + std::to_string(pp.num_stages) +
                           " but the engine runs on rank 0 of " + std::to_string(world));
  }
  if (config.scheduler.max_num_batched_tokens <= 0 || config.scheduler.max_num_seqs <= 0) {
    return InvalidArgument("max_num_batched_tokens and max_num_seqs must be positive");
  }
  LLM_ASSIGN_OR_RETURN(auto executor, pp.num_stages > 1
                                          ? RankExecutor::Create(weights, backend, stage_comm, comm)
                                          : RankExecutor::Create(weights, backend, comm));
  LLM_RETURN_IF_ERROR(executor->CheckBlockSize(config.block_size));
  // Each rank holds its share of the KV heads and its stage's layers; every rank allocates the
  // same block count, so the budget is that of the stage with the most layers.
  const DType kv_dtype = ResolveKvCacheDtype(config, weights, backend.caps());
  size_t block_bytes = executor->BlockBytes(config.block_size, kv_dtype);
  if (pp.num_stages > 1) {
    LLM_ASSIGN_OR_RETURN(
        const std::vector<LayerRange> ranges,
        PipelineLayerRanges(weights.config.num_layers, pp.num_stages, pp.partition));
    int most = 0;
    for (const LayerRange& r : ranges) most = std::max(most, r.size());
    block_bytes = block_bytes / static_cast<size_t>(pp.layers.size()) * most;
  }
  const size_t blocks = config.num_blocks > 0 ? static_cast<size_t>(config.num_blocks)
                                              : config.kv_cache_bytes / block_bytes;
  if (blocks == 0) {
    return ResourceExhausted("kv cache of " + std::to_string(config.kv_cache_bytes >> 20) +
                             " MiB holds no block of " + std::to_string(block_bytes) + " bytes");
  }
  // Block ids travel as int32 (block tables, the step plan).
  const int num_blocks = static_cast<int>(std::min<size_t>(blocks, 1u << 30));
  LLM_RETURN_IF_ERROR(executor->AllocateCache(num_blocks, config.block_size, kv_dtype));
  // Decode graphs cover block tables as wide as the longest sequence served; the followers
  // record the same sizes (the start message carries them).
  int max_len =
      config.max_model_len > 0 ? config.max_model_len : weights.config.max_position_embeddings;
  if (config.fit_max_model_len_to_cache) {
    max_len = static_cast<int>(
        std::min<int64_t>(max_len, static_cast<int64_t>(num_blocks) * config.block_size));
  }
  const int graph_blocks = (max_len + config.block_size - 1) / config.block_size;
  const int graph_max_batch = std::min(config.cuda_graph_max_batch, kMaxGraphBatch);
  const bool graphs = executor->EnableGraphs(graph_max_batch, graph_blocks);
  EngineConfig served = config;
  served.max_model_len = max_len;
  std::unique_ptr<Engine> engine(new Engine(std::move(executor), served, num_blocks, comm));
  engine->kv_dtype_ = kv_dtype;
  if (pp.num_stages > 1) {
    engine->sample_rank_ = (pp.num_stages - 1) * weights.tp.size;
    engine->steps_in_flight_ =
        config.pipeline_steps_in_flight > 0 ? config.pipeline_steps_in_flight : pp.num_stages;
  }
  if (engine->tp_) {
    StepPlan start;
    start.kind = StepMessageKind::kStart;
    start.num_blocks = num_blocks;
    start.block_size = config.block_size;
    start.graph_max_batch = graphs ? graph_max_batch : 0;
    start.graph_max_blocks = graph_blocks;
    start.kv_dtype = kv_dtype;
    std::vector<uint8_t> bytes;
    SerializeStepPlan(start, &bytes);
    engine->comm_->Broadcast(bytes, 0);
  }
  return engine;
}

Engine::Engine(std::unique_ptr<RankExecutor> executor, const EngineConfig& config, int num_blocks,
               Communicator* comm)
    : config_(config),
      max_model_len_(config.max_model_len > 0 ? config.max_model_len
                                              : executor->config().max_position_embeddings),
      local_comm_(comm ? nullptr : std::make_unique<LocalCommunicator>()),
      comm_(comm ? comm : local_comm_.get()),
      tp_(comm_->world_size() > 1),
      executor_(std::move(executor)),
      blocks_(num_blocks, config.block_size, config.enable_prefix_caching),
      scheduler_(config.scheduler, &blocks_),
      sampler_(executor_->config().vocab_size),
      seed_rng_(config.seed) {}

Engine::~Engine() {
  StopFollowers();
}

void Engine::StopFollowers() {
  if (!tp_ || stopped_) return;
  stopped_ = true;
  // The last stage sends the logits of every step in flight: take them, so it is free to
  // receive the shutdown.
  for (const InFlightStep& f : in_flight_) comm_->WaitRecv(f.handle);
  in_flight_.clear();
  StepPlan stop;
  stop.kind = StepMessageKind::kShutdown;
  std::vector<uint8_t> bytes;
  SerializeStepPlan(stop, &bytes);
  comm_->Broadcast(bytes, 0);
}

StatusOr<int64_t> Engine::Add(GenerateRequest request) {
  const ModelConfig& mc = executor_->config();
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
  if (request.stop_token_ids.size() > kMaxStopTokenIds) {
    return InvalidArgument("stop_token_ids: at most " + std::to_string(kMaxStopTokenIds) +
                           " ids, got " + std::to_string(request.stop_token_ids.size()));
  }
  for (int32_t id : request.stop_token_ids) {
    if (id < 0 || id >= mc.vocab_size) {
      return InvalidArgument("stop_token_ids: token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(mc.vocab_size) +
                             ")");
    }
  }
  // 64-bit: a prompt length plus a max_tokens near INT_MAX must not wrap past the checks.
  const int64_t total = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (total > max_model_len_) {
    return OutOfRange("prompt (" + std::to_string(request.prompt.size()) +
                      " tokens) + max_tokens (" + std::to_string(request.max_tokens) +
                      ") exceeds the maximum context length of " + std::to_string(max_model_len_));
  }
  // OutOfRange, not ResourceExhausted: this request can never fit, so a retry cannot help
  // (ResourceExhausted is the router's 429 "retry later").
  const int64_t blocks_needed = blocks_.BlocksFor(static_cast<int>(total));
  if (blocks_needed > blocks_.num_blocks()) {
    return OutOfRange("request needs " + std::to_string(blocks_needed) +
                      " KV blocks but the cache has only " + std::to_string(blocks_.num_blocks()));
  }
  if (request.grammar != nullptr && grammar_vocab_ == nullptr) {
    return FailedPrecondition(
        "structured output needs the model's tokenizer, which this engine has not loaded");
  }
  const int64_t id = next_id_++;
  Request r;
  if (request.grammar != nullptr) {
    r.grammar = std::make_unique<GrammarTokenFilter>(request.grammar, grammar_vocab_);
  }
  r.seed = request.sampling.seed ? *request.sampling.seed : seed_rng_();
  r.arrival = Clock::now();
  auto seq = std::make_unique<Sequence>();
  r.seq = seq.get();
  seq->id = id;
  seq->priority = request.priority;
  seq->prompt = request.prompt;
  // LongRoPE: a prompt longer than original_max_position_embeddings rotates every token with
  // the long factors, so its blocks hold other keys than the same tokens of a shorter prompt:
  // they share prefixes only among themselves.
  const RopeScaling& rope = executor_->config().rope_scaling;
  seq->prefix_space = RopeUsesLongFactors(rope, seq->prompt.size()) ? 1 : 0;
  if (rope.type == RopeScalingType::kLongRope && seq->prefix_space == 0) {
    seq->long_rope_from = static_cast<int>(
        std::min<int64_t>(rope.original_max_position_embeddings, std::numeric_limits<int>::max()));
  }
  seq->output.reserve(request.max_tokens);
  r.params = std::move(request);
  if (tp_) plan_writer_.OnAdded(id, r.params.sampling, r.seed);  // for a sampling follower
  requests_.emplace(id, std::move(r));
  scheduler_.Add(std::move(seq));
  return id;
}

void Engine::BuildBatch(const SchedulePlan& plan) {
  entries_.clear();
  for (const auto& s : plan.scheduled) entries_.push_back({s.seq, s.num_new_tokens, s.samples});
  BuildForwardBatch(entries_, config_.block_size, &executor_->batch());
}

void Engine::Remove(int64_t id) {
  scheduler_.Remove(id);
  requests_.erase(id);
  if (tp_) plan_writer_.OnRemoved(id);
}

FinishReason Engine::CheckFinish(const Sequence& s, const Request& r) const {
  const int32_t last = s.output.back();
  // A complete structured output ends at its end token whatever min_tokens and ignore_eos say
  // (the mask allowed nothing else).
  const bool grammar_done = r.grammar != nullptr && r.grammar->Accepting();
  const bool may_stop = grammar_done || static_cast<int>(s.output.size()) >= r.params.min_tokens;
  if (may_stop && (!r.params.ignore_eos || grammar_done)) {
    const auto& eos = executor_->config().eos_token_ids;
    if (std::find(eos.begin(), eos.end(), last) != eos.end()) return FinishReason::kEos;
  }
  const auto& stops = r.params.stop_token_ids;
  if (may_stop && std::find(stops.begin(), stops.end(), last) != stops.end()) {
    return FinishReason::kStopToken;
  }
  if (static_cast<int>(s.output.size()) >= r.params.max_tokens) return FinishReason::kMaxTokens;
  if (s.num_tokens() >= max_model_len_) return FinishReason::kMaxModelLen;
  return FinishReason::kNone;
}

Status Engine::Step(std::vector<TokenEvent>* events) {
  if (stopped_) return FailedPrecondition("the engine's followers were shut down");
  if (executor_->pipelined()) return PipelinedStep(events);
  scheduler_.Schedule(&plan_);
  if (plan_.empty()) {
    counters_.preemptions += static_cast<int64_t>(plan_.preempted.size());
    if (tp_) plan_writer_.OnPreempted(plan_.preempted);
    if (scheduler_.idle()) return Status::Ok();
    return Internal("scheduler planned nothing while requests wait (cache too small?)");
  }
  const Clock::time_point start = Clock::now();
  LLM_ASSIGN_OR_RETURN(const float* logits, Launch(plan_));
  const Clock::time_point forwarded = Clock::now();
  Finish(plan_, logits, nullptr, events);
  counters_.forward_ns += std::chrono::nanoseconds(forwarded - start).count();
  counters_.sampling_ns += std::chrono::nanoseconds(Clock::now() - forwarded).count();
  return Status::Ok();
}

StatusOr<const float*> Engine::Launch(const SchedulePlan& plan) {
  counters_.preemptions += static_cast<int64_t>(plan.preempted.size());
  if (tp_) plan_writer_.OnPreempted(plan.preempted);
  // One clock read before the step and one after it, whatever the batch size.
  const Clock::time_point scheduled_at = Clock::now();
  for (const auto& s : plan.scheduled) {
    Request& r = requests_.at(s.seq->id);
    if (r.first_scheduled == Clock::time_point()) r.first_scheduled = scheduled_at;
  }
  if (tp_) comm_->Broadcast(plan_writer_.Write(plan), 0);
  BuildBatch(plan);
  return executor_->Execute();
}

// Pipeline stages: up to steps_in_flight_ steps run at once on disjoint sequences (a sequence
// in flight is not scheduled again), so while the later stages work on one step the first
// starts the next. Every stage runs the steps in the order they were started, so a block
// freed by a step's sequences may go to the next step's at once.
Status Engine::PipelinedStep(std::vector<TokenEvent>* events) {
  while (static_cast<int>(in_flight_.size()) < steps_in_flight_) {
    InFlightStep f;
    // Each step in flight takes its share of the sequences, so every stage has work.
    const int seqs = scheduler_.num_running() + scheduler_.num_waiting();
    scheduler_.Schedule(&f.plan, (seqs + steps_in_flight_ - 1) / steps_in_flight_);
    if (f.plan.empty()) {
      counters_.preemptions += static_cast<int64_t>(f.plan.preempted.size());
      if (tp_) plan_writer_.OnPreempted(f.plan.preempted);
      break;
    }
    // The last stage samples: it gets each sampled row's grammar mask with the plan and sends
    // the samples back, into a receive posted now so it never waits for this rank.
    size_t floats = 0;
    for (const auto& s : f.plan.scheduled) {
      s.seq->in_flight = true;
      if (!s.samples) continue;
      Request& r = requests_.at(s.seq->id);
      floats += PackedSampleFloats(r.params.sampling.logprobs);
      if (const uint64_t* mask = GrammarMask(r)) {
        plan_writer_.SetAllowed(s.seq->id, mask, mask_.size());
      }
    }
    f.samples.resize(floats);
    f.handle = comm_->StartRecv(f.samples.data(), floats, sample_rank_);
    in_flight_.push_back(std::move(f));
    LLM_RETURN_IF_ERROR(Launch(in_flight_.back().plan).status());  // this stage's part
  }
  if (in_flight_.empty()) {
    if (scheduler_.idle()) return Status::Ok();
    return Internal("scheduler planned nothing while requests wait (cache too small?)");
  }
  InFlightStep done = std::move(in_flight_.front());
  in_flight_.pop_front();
  comm_->WaitRecv(done.handle);
  for (const auto& s : done.plan.scheduled) s.seq->in_flight = false;
  remote_.clear();
  size_t at = 0;
  for (const auto& s : done.plan.scheduled) {
    if (!s.samples) continue;
    const int logprobs = requests_.at(s.seq->id).params.sampling.logprobs;
    if (!UnpackSample(done.samples.data() + at, logprobs, executor_->config().vocab_size,
                      &remote_.emplace_back())) {
      return Internal("the last pipeline stage could not sample this step (see its log)");
    }
    at += PackedSampleFloats(logprobs);
  }
  Finish(done.plan, nullptr, &remote_, events);
  return Status::Ok();
}

void Engine::Finish(const SchedulePlan& plan, const float* logits,
                    const std::vector<SampleResult>* remote, std::vector<TokenEvent>* events) {
  const Clock::time_point sampled_at = Clock::now();
  scheduler_.Commit(plan);
  if (remote == nullptr) SampleRows(plan, logits);
  int row = 0;
  for (const auto& s : plan.scheduled) {
    Sequence& seq = *s.seq;
    if (seq.num_computed <= static_cast<int>(seq.prompt.size()))
      counters_.prompt_tokens_computed += s.num_new_tokens;
    Request& r = requests_.at(seq.id);
    if (r.abort_pending) {  // aborted while in flight: now it can go
      if (s.samples) row++;
      Remove(seq.id);
      continue;
    }
    if (!s.samples) continue;
    if (seq.output.empty()) r.first_token = sampled_at;
    TokenEvent ev;
    ev.request_id = seq.id;
    const auto at = static_cast<size_t>(row++);
    ev.sample = remote != nullptr ? (*remote)[at] : std::move(samples_[at]);
    seq.output.push_back(ev.sample.token);
    counters_.tokens_generated++;
    ev.finish = CheckFinish(seq, r);
    // The grammar takes the token unless it ended the request (an end token is no text).
    if (r.grammar != nullptr && ev.finish == FinishReason::kNone)
      r.grammar->Accept(ev.sample.token);
    if (ev.finish != FinishReason::kNone) ev.timings = Timings(r, sampled_at);
    const int64_t id = seq.id;
    events->push_back(std::move(ev));
    if (events->back().finish != FinishReason::kNone) {
      Remove(id);
    } else if (tp_) {
      plan_writer_.OnSampled(id, events->back().sample.token);
    }
  }
}

void Engine::SampleRows(const SchedulePlan& plan, const float* logits) {
  const int vocab = executor_->config().vocab_size;
  struct Row {
    size_t at;
    Request* r;
    const Sequence* seq;
  };
  std::vector<Row> rows;
  size_t count = 0;
  int free_rows = 0;  // rows without a grammar
  for (const auto& s : plan.scheduled) {
    if (!s.samples) continue;
    const size_t at = count++;
    Request& r = requests_.at(s.seq->id);
    if (r.abort_pending) continue;  // an aborted row is not sampled
    rows.push_back({at, &r, s.seq});
    free_rows += r.grammar == nullptr ? 1 : 0;
  }
  samples_.assign(count, SampleResult{});
  auto sample = [&](Sampler& sampler, const Row& row, const uint64_t* allowed) {
    const Sequence& seq = *row.seq;
    samples_[row.at] = sampler.Sample(logits + row.at * static_cast<size_t>(vocab),
                                      row.r->params.sampling, seq.prompt, seq.output, row.r->seed,
                                      static_cast<int>(seq.output.size()), allowed);
  };
  // Each row's draw depends only on its logits, parameters, seed and step, so which thread
  // samples it does not change the token. Grammar rows share mask_ and their grammar's state.
  const int threads = std::min(omp_get_max_threads(), free_rows);
  if (threads >= 2) {
    while (static_cast<int>(samplers_.size()) < threads) {
      samplers_.push_back(std::make_unique<Sampler>(vocab));
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].r->grammar == nullptr) sample(*samplers_[omp_get_thread_num()], rows[i], nullptr);
    }
  }
  for (const Row& row : rows) {
    if (threads < 2 || row.r->grammar != nullptr) sample(sampler_, row, GrammarMask(*row.r));
  }
}

const uint64_t* Engine::GrammarMask(Request& r) {
  if (r.grammar == nullptr) return nullptr;
  const int vocab = executor_->config().vocab_size;
  const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
  mask_.assign(words, 0);
  // The tokenizer may count fewer tokens than the model has rows (padding rows stay masked),
  // or more (ids past the model's rows cannot be sampled anyway).
  const uint64_t* allowed = r.grammar->AllowedTokens();
  const size_t copy = std::min(words, static_cast<size_t>(grammar_vocab_->mask_words()));
  std::copy(allowed, allowed + copy, mask_.begin());
  if (vocab % 64 != 0 && copy == words) mask_.back() &= (uint64_t{1} << (vocab % 64)) - 1;
  const auto allow = [&](int32_t t) {
    if (t >= 0 && t < vocab) mask_[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  };
  if (r.grammar->Accepting()) {
    for (int32_t t : executor_->config().eos_token_ids) allow(t);
    for (int32_t t : r.params.stop_token_ids) allow(t);
  }
  // Nothing allowed (a vocabulary that cannot spell what the grammar needs next, or no end
  // token): sampling goes on unconstrained rather than from an empty distribution.
  if (std::all_of(mask_.begin(), mask_.end(), [](uint64_t w) { return w == 0; })) return nullptr;
  return mask_.data();
}

RequestTimings Engine::Timings(const Request& r, Clock::time_point last_token) {
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  RequestTimings t;
  t.queue_s = secs(r.first_scheduled - r.arrival);
  t.prefill_s = secs(r.first_token - r.first_scheduled);
  t.decode_s = secs(last_token - r.first_token);
  t.inference_s = secs(last_token - r.first_scheduled);
  return t;
}

bool Engine::Abort(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  if (it->second.seq->in_flight) {  // its step's results still come back: drop them then
    it->second.abort_pending = true;
    return true;
  }
  Remove(request_id);
  return true;
}

EngineStats Engine::stats() const {
  EngineStats s = counters_;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  s.blocks_total = blocks_.num_blocks();
  s.blocks_free = blocks_.num_free();
  s.prefix_cache_hit_tokens = scheduler_.prefix_cache_hit_tokens();
  s.prefix_cache_queried_tokens = scheduler_.prefix_cache_queried_tokens();
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
      r.timings = ev.timings;
    }
  }
  return results;
}

}  // namespace llm
