// Continuous batching with chunked prefill. Pure logic (no I/O, threads or clocks): it takes
// the state and the results of the last step and returns the next plan, so every scenario is a
// plain unit test. One rule drives it: each sequence's computed tokens catch up with its
// tokens (prompt + generated), within the step's token budget and sequence cap.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "common/config_sections.h"  // SchedulerConfig
#include "worker/engine/block_manager.h"

namespace llm {

struct Sequence {
  int64_t id = 0;
  int priority = 0;  // lower runs first; ties by arrival (FCFS)
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  int num_computed = 0;    // tokens whose K/V are in the cache
  int num_registered = 0;  // leading blocks of block_table offered to the prefix cache
  // The prefix-cache space its blocks are shared in (BlockManager::MatchPrefix): sequences
  // whose equal tokens may hold different keys (LongRoPE's long and short factors) never
  // share blocks.
  int prefix_space = 0;
  // LongRoPE, a prompt of at most original_max_position_embeddings tokens: the tokens from
  // this position on rotate with the long factors (each decode step decides by the tokens held
  // after it), the ones before it with the short factors. A recompute after preemption stops a
  // chunk here so that each token gets the rotation it had. 0: none.
  int long_rope_from = 0;
  std::vector<int32_t> block_table;
  int num_preemptions = 0;
  // Scheduled in a step whose results have not come back yet (pipeline parallelism keeps
  // several steps in flight): not scheduled again, nor preempted, until they have.
  bool in_flight = false;

  int num_tokens() const { return static_cast<int>(prompt.size() + output.size()); }
  int32_t token_at(int i) const {
    const int p = static_cast<int>(prompt.size());
    return i < p ? prompt[i] : output[i - p];
  }
};

// One token to compute and then sample, its prompt done: the step decodes it (in flight or
// not). A prompt chunk or a recompute after preemption is prefill.
inline bool IsDecoding(const Sequence& s) {
  return !s.output.empty() && s.num_computed >= s.num_tokens() - 1;
}

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;  // computed this step, starting at seq->num_computed
  bool samples = false;    // this step reaches the end of its tokens: sample the next one
};

struct SchedulePlan {
  std::vector<ScheduledSequence> scheduled;
  std::vector<int64_t> preempted;  // sent back to waiting, blocks freed (recompute later)
  int num_tokens = 0;
  bool empty() const { return scheduled.empty(); }
  void Clear() {
    scheduled.clear();
    preempted.clear();
    num_tokens = 0;
  }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, BlockManager* blocks);

  // Queues a sequence. The caller has checked that it can ever fit in the cache.
  void Add(std::unique_ptr<Sequence> seq);
  // Plans the next step and reserves the KV blocks it writes.
  // Fills `plan` (cleared first; its vectors keep their capacity, so a steady-state step
  // allocates nothing). `max_step_seqs` > 0 caps the sequences of this one step (pipeline
  // parallelism splits the sequences over the steps in flight).
  void Schedule(SchedulePlan* plan, int max_step_seqs = 0);
  SchedulePlan Schedule() {
    SchedulePlan plan;
    Schedule(&plan);
    return plan;
  }
  // Marks the planned tokens as computed (call after the step ran).
  void Commit(const SchedulePlan& plan);
  // Removes a sequence wherever it is and frees its blocks. Returns it (nullptr if unknown).
  std::unique_ptr<Sequence> Remove(int64_t id);

  // True while `id` waits to be scheduled (queued, or preempted and queued again).
  bool IsWaiting(int64_t id) const;
  int num_running() const { return static_cast<int>(running_.size()); }
  // Prompt tokens taken from the prefix cache instead of being computed, and the tokens of
  // admitted sequences looked up there (vLLM's prefix cache hits / queries).
  int64_t prefix_cache_hit_tokens() const { return prefix_hit_tokens_; }
  int64_t prefix_cache_queried_tokens() const { return prefix_queried_tokens_; }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }

 private:
  // What one step may still take: tokens in all, and prompt tokens (prefill chunks and
  // recomputes), which max_prefill_tokens_while_decoding bounds while sequences decode.
  struct StepBudget {
    int tokens = 0;
    int prefill_tokens = 0;
  };
  int TokensWanted(const Sequence& s, const StepBudget& budget) const;
  static void Spend(const Sequence& s, int tokens, StepBudget* budget);
  bool PreemptLowest(const Sequence* keep, SchedulePlan* plan);
  void ScheduleRunning(SchedulePlan* plan, StepBudget* budget, size_t max_seqs);
  void AdmitWaiting(SchedulePlan* plan, StepBudget* budget, size_t max_seqs);
  // Starts a sequence that has no blocks at the longest cached prefix of its tokens.
  void MatchCachedPrefix(Sequence* s);
  // Offers the sequence's newly computed whole blocks to the prefix cache.
  void RegisterComputed(Sequence* s);

  SchedulerConfig config_;
  BlockManager* blocks_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in priority/arrival order
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<int32_t> block_tokens_;  // scratch for RegisterComputed
  int64_t prefix_hit_tokens_ = 0;
  int64_t prefix_queried_tokens_ = 0;
};

}  // namespace llm
