#include "worker/engine/scheduler.h"

#include <algorithm>
#include <cstdint>

namespace llm {

namespace {

bool RunsBefore(const Sequence& a, const Sequence& b) {
  return a.priority != b.priority ? a.priority < b.priority : a.id < b.id;
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager* blocks)
    : config_(config), blocks_(blocks) {}

void Scheduler::Add(std::unique_ptr<Sequence> seq) {
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const auto& w) { return RunsBefore(*seq, *w); });
  waiting_.insert(pos, std::move(seq));
}

int Scheduler::TokensWanted(const Sequence& s, const StepBudget& budget) const {
  int wanted = s.num_tokens() - s.num_computed;
  // A sequence still in its prompt (or recomputing after preemption) may be chunked.
  if (config_.max_prefill_chunk > 0 && wanted > 1)
    wanted = std::min(wanted, config_.max_prefill_chunk);
  const int boundary = s.long_rope_from;
  if (boundary > 0 && s.num_computed < boundary && s.num_computed + wanted > boundary) {
    wanted = boundary - s.num_computed;
  }
  if (!IsDecoding(s)) wanted = std::min(wanted, budget.prefill_tokens);
  return std::min(wanted, budget.tokens);
}

void Scheduler::Spend(const Sequence& s, int tokens, StepBudget* budget) {
  budget->tokens -= tokens;
  if (!IsDecoding(s)) budget->prefill_tokens -= tokens;
}

// Frees the blocks of the last running sequence not in flight (the one that would run last)
// and sends it back to waiting. Returns false when `keep` itself was that one (and is now
// preempted). `keep` is not in flight, so there is always one.
bool Scheduler::PreemptLowest(const Sequence* keep, SchedulePlan* plan) {
  auto last =
      std::find_if(running_.rbegin(), running_.rend(), [](const auto& s) { return !s->in_flight; });
  std::unique_ptr<Sequence> victim = std::move(*last);
  running_.erase(std::next(last).base());
  const bool was_keep = victim.get() == keep;
  blocks_->Release(victim->block_table);
  victim->num_computed = 0;
  victim->num_registered = 0;
  victim->num_preemptions++;
  plan->preempted.push_back(victim->id);
  Add(std::move(victim));
  return !was_keep;
}

void Scheduler::ScheduleRunning(SchedulePlan* plan, StepBudget* budget, size_t max_seqs) {
  for (size_t i = 0;
       i < running_.size() && budget->tokens > 0 && plan->scheduled.size() < max_seqs;) {
    Sequence* s = running_[i].get();
    const int wanted = s->in_flight ? 0 : TokensWanted(*s, *budget);
    if (wanted <= 0) {
      ++i;
      continue;
    }
    bool still_running = true;
    while (!blocks_->Grow(s->block_table, s->num_computed + wanted)) {
      if (!PreemptLowest(s, plan)) {
        still_running = false;
        break;
      }
    }
    if (!still_running) break;  // s was the last one: nothing after it is left either
    const bool samples = s->num_computed + wanted == s->num_tokens();
    plan->scheduled.push_back({s, wanted, samples});
    plan->num_tokens += wanted;
    Spend(*s, wanted, budget);
    ++i;
  }
}

void Scheduler::AdmitWaiting(SchedulePlan* plan, StepBudget* budget, size_t max_seqs) {
  // A waiting sequence is never decoding (it holds no computed tokens), so it needs prefill
  // budget; checked before MatchCachedPrefix, which takes blocks.
  while (!waiting_.empty() && budget->tokens > 0 && budget->prefill_tokens > 0 &&
         static_cast<int>(running_.size()) < config_.max_num_seqs &&
         plan->scheduled.size() < max_seqs) {
    Sequence* s = waiting_.front().get();
    MatchCachedPrefix(s);
    const int wanted = TokensWanted(*s, *budget);
    if (!blocks_->Grow(s->block_table, s->num_computed + wanted)) {
      blocks_->Release(s->block_table);  // the cached prefix too: it waits with nothing held
      s->num_computed = 0;
      s->num_registered = 0;
      break;
    }
    const bool samples = s->num_computed + wanted == s->num_tokens();
    plan->scheduled.push_back({s, wanted, samples});
    plan->num_tokens += wanted;
    Spend(*s, wanted, budget);
    // Keep running_ in priority/arrival order: it decides who gets the budget first and who is
    // preempted (the last one).
    auto pos = std::find_if(running_.begin(), running_.end(),
                            [&](const auto& r) { return RunsBefore(*s, *r); });
    running_.insert(pos, std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Scheduler::Schedule(SchedulePlan* plan, int max_step_seqs) {
  plan->Clear();
  StepBudget budget{config_.max_num_batched_tokens, config_.max_num_batched_tokens};
  const int while_decoding = config_.max_prefill_tokens_while_decoding;
  if (while_decoding > 0 &&
      std::any_of(running_.begin(), running_.end(), [](const auto& s) { return IsDecoding(*s); })) {
    budget.prefill_tokens = std::min(budget.prefill_tokens, while_decoding);
  }
  const size_t max_seqs = max_step_seqs > 0 ? static_cast<size_t>(max_step_seqs) : SIZE_MAX;
  ScheduleRunning(plan, &budget, max_seqs);
  // Sequences preempted this step wait for a later one, so nothing thrashes within a step.
  if (plan->preempted.empty()) AdmitWaiting(plan, &budget, max_seqs);
}

void Scheduler::MatchCachedPrefix(Sequence* s) {
  if (!blocks_->prefix_caching() || !s->block_table.empty() || s->num_computed != 0) return;
  const std::vector<int32_t>* tokens = &s->prompt;
  std::vector<int32_t> all;  // a preempted sequence's output is part of its prefix too
  if (!s->output.empty()) {
    all = s->prompt;
    all.insert(all.end(), s->output.begin(), s->output.end());
    tokens = &all;
  }
  // Never the block of the last token: the step computes it, so it has logits to sample from.
  s->num_computed =
      blocks_->MatchPrefix(*tokens, s->num_tokens() - 1, s->block_table, s->prefix_space);
  s->num_registered = static_cast<int>(s->block_table.size());
  prefix_hit_tokens_ += s->num_computed;
  prefix_queried_tokens_ += s->num_tokens();
}

void Scheduler::RegisterComputed(Sequence* s) {
  const int bs = blocks_->block_size();
  const int full = s->num_computed / bs;
  block_tokens_.resize(static_cast<size_t>(bs));
  for (int b = s->num_registered; b < full; ++b) {
    for (int i = 0; i < bs; ++i) block_tokens_[static_cast<size_t>(i)] = s->token_at(b * bs + i);
    blocks_->Register(s->block_table, b, block_tokens_.data(), s->prefix_space);
  }
  s->num_registered = std::max(s->num_registered, full);
}

void Scheduler::Commit(const SchedulePlan& plan) {
  for (const auto& s : plan.scheduled) {
    s.seq->num_computed += s.num_new_tokens;
    if (blocks_->prefix_caching()) RegisterComputed(s.seq);
  }
}

bool Scheduler::IsWaiting(int64_t id) const {
  return std::any_of(waiting_.begin(), waiting_.end(), [&](const auto& s) { return s->id == id; });
}

std::unique_ptr<Sequence> Scheduler::Remove(int64_t id) {
  auto take = [&](auto& queue) -> std::unique_ptr<Sequence> {
    auto it = std::find_if(queue.begin(), queue.end(), [&](const auto& s) { return s->id == id; });
    if (it == queue.end()) return nullptr;
    std::unique_ptr<Sequence> s = std::move(*it);
    queue.erase(it);
    blocks_->Release(s->block_table);
    return s;
  };
  if (auto s = take(running_)) return s;
  return take(waiting_);
}

}  // namespace llm
