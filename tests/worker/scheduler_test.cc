#include "worker/engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace llm {
namespace {

// One step as the engine sees it, in a compact form: "1:7 2:1*" means sequence 1 computed 7
// tokens and sequence 2 computed 1 token and sampled ('*'), in plan order; " !3" means
// sequence 3 was preempted in this step.
struct StepRecord {
  std::string plan;
  int free_after_schedule = 0;
  int free_after_step = 0;  // after finished sequences were removed
  std::vector<int64_t> finished;
};

struct Arrival {
  int step;
  int64_t id;
  int prompt_len;
  int max_tokens;
  int priority = 0;
};

// Drives a Scheduler the way Engine::Step does: Schedule -> (the model would run) -> Commit ->
// append one token to every sequence that samples -> Remove the ones that reached max_tokens.
// Checks the scheduler's invariants on every step.
class Harness {
 public:
  Harness(const SchedulerConfig& config, int num_blocks, int block_size)
      : config_(config), blocks_(num_blocks, block_size), sched_(config, &blocks_) {}

  void Add(int64_t id, int prompt_len, int max_tokens, int priority = 0) {
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->priority = priority;
    for (int i = 0; i < prompt_len; ++i) seq->prompt.push_back(static_cast<int32_t>(id * 1000 + i));
    live_[id] = seq.get();
    max_tokens_[id] = max_tokens;
    sched_.Add(std::move(seq));
  }

  // Engine::Abort: removes the sequence wherever it is.
  void Abort(int64_t id) {
    const int held = static_cast<int>(live_.at(id)->block_table.size());
    const int free_before = blocks_.num_free();
    std::unique_ptr<Sequence> s = sched_.Remove(id);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->id, id);
    EXPECT_TRUE(s->block_table.empty());
    EXPECT_EQ(blocks_.num_free(), free_before + held) << "abort must free the blocks at once";
    live_.erase(id);
    running_.erase(id);
    gone_.insert(id);
    EXPECT_EQ(sched_.Remove(id), nullptr);
    CheckState();
  }

  StepRecord Step() {
    StepRecord rec;
    std::map<int64_t, int> preemptions_before;
    for (const auto& [id, s] : live_) preemptions_before[id] = s->num_preemptions;
    const std::set<int64_t> running_before = running_;
    std::set<int64_t> decoding_before;
    for (int64_t id : running_)
      if (IsDecoding(*live_.at(id))) decoding_before.insert(id);

    const SchedulePlan plan = sched_.Schedule();
    rec.plan = Format(plan);
    rec.free_after_schedule = blocks_.num_free();
    CheckPlan(plan, running_before, decoding_before, preemptions_before);

    std::map<int64_t, int> computed_before;
    for (const auto& e : plan.scheduled) computed_before[e.seq->id] = e.seq->num_computed;
    sched_.Commit(plan);
    for (const auto& e : plan.scheduled) {
      Sequence* s = e.seq;
      const int64_t id = s->id;
      EXPECT_EQ(s->num_computed, computed_before[id] + e.num_new_tokens);
      if (!e.samples) continue;
      s->output.push_back(static_cast<int32_t>(id * 1000 + 500 + s->output.size()));
      if (static_cast<int>(s->output.size()) >= max_tokens_[id]) {
        std::unique_ptr<Sequence> removed = sched_.Remove(id);
        EXPECT_EQ(removed.get(), s);
        EXPECT_TRUE(s->block_table.empty());
        finished_output_[id] = static_cast<int>(s->output.size());
        live_.erase(id);
        running_.erase(id);
        gone_.insert(id);
        rec.finished.push_back(id);
      }
    }
    rec.free_after_step = blocks_.num_free();
    CheckState();
    history_.push_back(rec);
    ++step_;
    return rec;
  }

  // Runs `arrivals` (each added right before the Schedule of its step) until the scheduler
  // is idle and no arrival is pending, or `max_steps`.
  void Run(const std::vector<Arrival>& arrivals, int max_steps) {
    for (int i = 0; i < max_steps; ++i) {
      bool pending = false;
      for (const Arrival& a : arrivals) {
        if (a.step == step_) Add(a.id, a.prompt_len, a.max_tokens, a.priority);
        pending |= a.step > step_;
      }
      if (sched_.idle() && !pending) return;
      Step();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  std::vector<std::string> Plans() const {
    std::vector<std::string> out;
    for (const auto& r : history_) out.push_back(r.plan);
    return out;
  }
  std::vector<int> FreeAfterSteps() const {
    std::vector<int> out;
    for (const auto& r : history_) out.push_back(r.free_after_step);
    return out;
  }

  Sequence* live(int64_t id) const { return live_.at(id); }
  bool is_live(int64_t id) const { return live_.count(id) > 0; }
  const std::map<int64_t, int>& finished_output() const { return finished_output_; }
  const std::vector<StepRecord>& history() const { return history_; }
  Scheduler& sched() { return sched_; }
  BlockManager& blocks() { return blocks_; }
  int64_t total_preemptions() const { return total_preemptions_; }

 private:
  static std::string Format(const SchedulePlan& plan) {
    std::string out;
    for (const auto& e : plan.scheduled) {
      if (!out.empty()) out += ' ';
      out += std::to_string(e.seq->id) + ':' + std::to_string(e.num_new_tokens);
      if (e.samples) out += '*';
    }
    for (int64_t id : plan.preempted) {
      if (!out.empty()) out += ' ';
      out += '!' + std::to_string(id);
    }
    return out;
  }

  static bool RunsBefore(const Sequence* a, const Sequence* b) {
    return a->priority != b->priority ? a->priority < b->priority : a->id < b->id;
  }

  void CheckPlan(const SchedulePlan& plan, const std::set<int64_t>& running_before,
                 const std::set<int64_t>& decoding_before,
                 const std::map<int64_t, int>& preemptions_before) {
    // While a sequence decodes, the step's prompt tokens stay under their own bound.
    const int prefill_cap =
        config_.max_prefill_tokens_while_decoding > 0 && !decoding_before.empty()
            ? config_.max_prefill_tokens_while_decoding
            : config_.max_num_batched_tokens;
    SCOPED_TRACE("step " + std::to_string(step_) + ": " + Format(plan));
    // Never idle while work is queued: the engine treats an empty plan as an error.
    if (plan.empty()) {
      EXPECT_TRUE(sched_.idle()) << "empty plan with work queued";
    }

    int sum = 0, prefill_sum = 0;
    std::set<int64_t> scheduled, admitted;
    for (const auto& e : plan.scheduled) {
      ASSERT_NE(e.seq, nullptr);
      const Sequence& s = *e.seq;
      ASSERT_FALSE(gone_.count(s.id)) << "sequence " << s.id << " is finished or aborted";
      ASSERT_TRUE(live_.count(s.id)) << "unknown sequence " << s.id;
      EXPECT_EQ(live_.at(s.id), e.seq);
      EXPECT_TRUE(scheduled.insert(s.id).second) << "sequence " << s.id << " planned twice";
      EXPECT_GE(e.num_new_tokens, 1) << "sequence " << s.id << " planned with no tokens";
      EXPECT_LE(s.num_computed + e.num_new_tokens, s.num_tokens());
      EXPECT_EQ(e.samples, s.num_computed + e.num_new_tokens == s.num_tokens());
      if (config_.max_prefill_chunk > 0) {
        EXPECT_LE(e.num_new_tokens, std::max(1, config_.max_prefill_chunk));
      }
      // The blocks the step writes are reserved, and no more.
      EXPECT_EQ(static_cast<int>(s.block_table.size()),
                blocks_.BlocksFor(s.num_computed + e.num_new_tokens));
      if (!running_before.count(s.id)) admitted.insert(s.id);
      sum += e.num_new_tokens;
      if (decoding_before.count(s.id)) {
        EXPECT_EQ(e.num_new_tokens, 1) << "decoding sequence " << s.id;
      } else {
        prefill_sum += e.num_new_tokens;
      }
    }
    EXPECT_EQ(sum, plan.num_tokens);
    EXPECT_LE(prefill_sum, prefill_cap) << "prompt tokens over the bound while decoding";
    EXPECT_LE(plan.num_tokens, config_.max_num_batched_tokens);
    EXPECT_LE(static_cast<int>(plan.scheduled.size()), config_.max_num_seqs);
    EXPECT_LE(sched_.num_running(), config_.max_num_seqs);

    std::set<int64_t> preempted;
    for (int64_t id : plan.preempted) {
      ASSERT_TRUE(live_.count(id)) << "preempted unknown sequence " << id;
      EXPECT_TRUE(running_before.count(id)) << "preempted a sequence that was not running";
      EXPECT_TRUE(preempted.insert(id).second);
      EXPECT_FALSE(scheduled.count(id)) << "sequence " << id << " preempted and scheduled";
      const Sequence& s = *live_.at(id);
      EXPECT_EQ(s.num_computed, 0);
      EXPECT_TRUE(s.block_table.empty());
      EXPECT_EQ(s.num_preemptions, preemptions_before.at(id) + 1);
      ++total_preemptions_;
    }
    for (const auto& [id, s] : live_) {
      if (!preempted.count(id)) {
        EXPECT_EQ(s->num_preemptions, preemptions_before.at(id));
      }
    }
    // Nothing is admitted in a step that preempts.
    if (!preempted.empty()) {
      EXPECT_TRUE(admitted.empty());
    }
    // Running sequences come first: every one of them is scheduled (or preempted) before any
    // new one is admitted, and one is skipped only when the budget is spent (for one in its
    // prompt, the budget or the prompt-token bound).
    const bool prefill_spent = prefill_sum == prefill_cap;
    for (int64_t id : running_before) {
      if (scheduled.count(id) || preempted.count(id)) continue;
      EXPECT_TRUE(admitted.empty()) << "admitted a new sequence while " << id << " waits";
      const bool spent = plan.num_tokens == config_.max_num_batched_tokens ||
                         (!decoding_before.count(id) && prefill_spent);
      EXPECT_TRUE(spent) << "running sequence " << id << " skipped with budget left";
    }

    // Update the model of who runs.
    for (int64_t id : admitted) running_.insert(id);
    for (int64_t id : preempted) running_.erase(id);
    EXPECT_EQ(static_cast<int>(running_.size()), sched_.num_running());

    // Admission follows (priority, arrival) order: those admitted all run before every
    // sequence still waiting, and a waiting head is left out only for a reason.
    std::vector<const Sequence*> waiting;
    for (const auto& [id, s] : live_)
      if (!running_.count(id)) waiting.push_back(s);
    std::sort(waiting.begin(), waiting.end(), RunsBefore);
    EXPECT_EQ(static_cast<int>(waiting.size()), sched_.num_waiting());
    if (!waiting.empty()) {
      for (int64_t id : admitted) EXPECT_TRUE(RunsBefore(live_.at(id), waiting.front()));
      const Sequence& head = *waiting.front();
      const int budget_left =
          std::min(config_.max_num_batched_tokens - plan.num_tokens, prefill_cap - prefill_sum);
      if (preempted.empty() && budget_left > 0 && sched_.num_running() < config_.max_num_seqs) {
        int wanted = head.num_tokens();
        if (config_.max_prefill_chunk > 0 && wanted > 1)
          wanted = std::min(wanted, config_.max_prefill_chunk);
        wanted = std::min(wanted, budget_left);
        EXPECT_GT(blocks_.BlocksFor(wanted), blocks_.num_free())
            << "sequence " << head.id << " left waiting although it fits";
      }
    }
  }

  void CheckState() {
    std::set<int32_t> seen;
    int used = 0;
    for (const auto& [id, s] : live_) {
      EXPECT_LE(s->num_computed, s->num_tokens());
      if (!running_.count(id)) {
        EXPECT_TRUE(s->block_table.empty()) << "waiting sequence " << id << " holds blocks";
        EXPECT_EQ(s->num_computed, 0) << "waiting sequence " << id;
      } else {
        EXPECT_GE(static_cast<int>(s->block_table.size()), blocks_.BlocksFor(s->num_computed));
      }
      for (int32_t b : s->block_table) {
        EXPECT_GE(b, 0);
        EXPECT_LT(b, blocks_.num_blocks());
        EXPECT_TRUE(seen.insert(b).second) << "block " << b << " is in two live tables";
        ++used;
      }
    }
    EXPECT_EQ(used + blocks_.num_free(), blocks_.num_blocks()) << "blocks leaked";
    EXPECT_EQ(sched_.idle(), live_.empty());
  }

  SchedulerConfig config_;
  BlockManager blocks_;
  Scheduler sched_;
  int step_ = 0;
  std::map<int64_t, Sequence*> live_;  // owned by sched_
  std::map<int64_t, int> max_tokens_;
  std::set<int64_t> running_;  // the harness's model of the running set
  std::set<int64_t> gone_;
  std::map<int64_t, int> finished_output_;
  std::vector<StepRecord> history_;
  int64_t total_preemptions_ = 0;
};

SchedulerConfig Config(int max_num_seqs, int max_num_batched_tokens, int max_prefill_chunk = 0,
                       int max_prefill_tokens_while_decoding = 0) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.max_prefill_chunk = max_prefill_chunk;
  c.max_prefill_tokens_while_decoding = max_prefill_tokens_while_decoding;
  return c;
}

// A scenario runs to completion and must produce exactly `plans`, one entry per step.
struct Scenario {
  std::string name;
  SchedulerConfig config;
  int num_blocks;
  int block_size;
  std::vector<Arrival> arrivals;
  std::vector<std::string> plans;
  std::vector<int> free_after_step = {};  // empty: not checked
};

void PrintTo(const Scenario& s, std::ostream* os) {
  *os << s.name;
}

class SchedulerScenarioTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(SchedulerScenarioTest, RunsAsPlanned) {
  const Scenario& sc = GetParam();
  Harness h(sc.config, sc.num_blocks, sc.block_size);
  h.Run(sc.arrivals, static_cast<int>(sc.plans.size()) + 5);
  EXPECT_EQ(h.Plans(), sc.plans);
  if (!sc.free_after_step.empty()) {
    EXPECT_EQ(h.FreeAfterSteps(), sc.free_after_step);
  }
  EXPECT_TRUE(h.sched().idle());
  EXPECT_EQ(h.blocks().num_free(), sc.num_blocks);
  for (const Arrival& a : sc.arrivals) {
    ASSERT_TRUE(h.finished_output().count(a.id)) << "sequence " << a.id << " never finished";
    EXPECT_EQ(h.finished_output().at(a.id), a.max_tokens);
  }
}

const Scenario kScenarios[] = {
    {"ChunkedPrefill_7_7_6_ThenDecode",
     Config(256, 2048, 7),
     16,
     4,
     {{0, 1, 20, 4}},
     {"1:7", "1:7", "1:6*", "1:1*", "1:1*", "1:1*"},
     {14, 12, 11, 10, 10, 16}},
    {"PromptLargerThanBudgetIsSplit",
     Config(256, 8),
     16,
     4,
     {{0, 1, 20, 2}},
     {"1:8", "1:8", "1:4*", "1:1*"}},
    {"SeveralPromptsShareAStep",
     Config(256, 32),
     16,
     4,
     {{0, 1, 5, 2}, {0, 2, 6, 2}, {0, 3, 7, 2}},
     {"1:5* 2:6* 3:7*", "1:1* 2:1* 3:1*"}},
    {"RunningDecodesBeforeANewPrompt",
     Config(256, 8),
     16,
     4,
     {{0, 1, 4, 3}, {1, 2, 10, 1}},
     {"1:4*", "1:1* 2:7", "1:1* 2:3*"}},
    {"BudgetCapsTheSumAndRunningGoFirst",
     Config(256, 12),
     16,
     4,
     {{0, 1, 5, 2}, {0, 2, 5, 2}, {0, 3, 5, 2}},
     {"1:5* 2:5* 3:2", "1:1* 2:1* 3:3*", "3:1*"}},
    // While 1 decodes, the prompts of 2 and 3 share 3 tokens a step (2 first: it arrived
    // first); when nothing decodes (step 4: 1 and 2 are done) 3's prompt is not bounded.
    {"PromptTokensBoundedWhileDecoding",
     Config(256, 2048, 0, 3),
     16,
     4,
     {{0, 1, 2, 4}, {1, 2, 8, 1}, {1, 3, 4, 1}},
     {"1:2*", "1:1* 2:3", "1:1* 2:3", "1:1* 2:2* 3:1", "3:3*"}},
    // The bound covers a running sequence's later chunks and a recompute alike; decodes are
    // never held back by it.
    {"DecodesAreNotBoundedByThePromptBound",
     Config(256, 2048, 0, 1),
     16,
     4,
     {{0, 1, 1, 3}, {0, 2, 1, 3}, {1, 3, 3, 1}},
     {"1:1* 2:1*", "1:1* 2:1* 3:1", "1:1* 2:1* 3:1", "3:1*"}},
    {"ChunkAndBudgetTogether",
     Config(256, 10, 6),
     16,
     4,
     {{0, 1, 9, 1}, {0, 2, 9, 1}},
     {"1:6 2:4", "1:3* 2:5*"}},
    {"MaxNumSeqsCapsTheRunningSet",
     Config(2, 2048),
     16,
     4,
     {{0, 1, 3, 1}, {0, 2, 3, 3}, {0, 3, 3, 2}, {0, 4, 3, 1}},
     {"1:3* 2:3*", "2:1* 3:3*", "2:1* 3:1*", "4:3*"}},
    {"FcfsOneAtATime",
     Config(1, 2048),
     16,
     4,
     {{0, 1, 2, 1}, {0, 2, 2, 1}, {0, 3, 2, 1}},
     {"1:2*", "2:2*", "3:2*"}},
    {"FcfsUnderTheBudget",
     Config(256, 4),
     16,
     4,
     {{0, 1, 3, 1}, {0, 2, 3, 1}, {0, 3, 3, 1}},
     {"1:3* 2:1", "2:2* 3:2", "3:1*"}},
    {"PriorityLowerFirstTiesByArrival",
     Config(1, 2048),
     16,
     4,
     {{0, 1, 2, 1, 5}, {0, 2, 2, 1, 1}, {0, 3, 2, 1, 1}, {0, 4, 2, 1, 0}},
     {"4:2*", "2:2*", "3:2*", "1:2*"}},
    {"PriorityLateArrivalJumpsTheQueue",
     Config(1, 2048),
     16,
     4,
     {{0, 1, 2, 3, 1}, {0, 2, 2, 1, 1}, {1, 3, 2, 1, 0}},
     {"1:2*", "1:1*", "1:1*", "3:2*", "2:2*"}},
    // 4 blocks of 4 tokens. Both fill 2 blocks; when 1 needs a third block, 2 (the last one
    // running) is preempted, waits until 1 finishes, then recomputes 6 prompt + 3 output tokens.
    {"PreemptionByRecompute",
     Config(256, 2048),
     4,
     4,
     {{0, 1, 6, 8}, {0, 2, 6, 8}},
     {"1:6* 2:6*", "1:1* 2:1*", "1:1* 2:1*", "1:1* !2", "1:1*", "1:1*", "1:1*", "1:1*", "2:9*",
      "2:1*", "2:1*", "2:1*", "2:1*"},
     {0, 0, 0, 1, 1, 1, 1, 4, 1, 1, 1, 1, 4}},
    // The same with chunked prefill. 2 is readmitted for a 4-token chunk in the one free block,
    // then preempts itself when its next chunk needs a block (step 6), and is preempted by 1's
    // growth (step 8); once 1 is done the recompute is chunked and samples only at its end.
    {"PreemptionByRecomputeChunked",
     Config(256, 2048, 4),
     4,
     4,
     {{0, 1, 6, 8}, {0, 2, 6, 8}},
     {"1:4 2:4", "1:2* 2:2*", "1:1* 2:1*", "1:1* 2:1*", "1:1* !2", "1:1* 2:4", "1:1* !2",
      "1:1* 2:4", "1:1* !2", "2:4", "2:4", "2:1*", "2:1*", "2:1*", "2:1*", "2:1*"},
     {2, 0, 0, 0, 1, 0, 1, 0, 4, 3, 2, 1, 1, 1, 1, 4}},
    // 1 (priority 1) runs; 2 (priority 0) arrives later. When the cache runs out, the victim
    // is the lower-priority sequence 1, not 2, and 2 is scheduled first once both run.
    {"PreemptionSparesTheHigherPriority",
     Config(256, 2048),
     4,
     4,
     {{0, 1, 6, 8, 1}, {1, 2, 6, 8, 0}},
     {"1:6*", "1:1* 2:6*", "2:1* 1:1*", "2:1* !1", "2:1*", "2:1*", "2:1*", "2:1*", "2:1*", "1:9*",
      "1:1*", "1:1*", "1:1*", "1:1*"}},
};

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerScenarioTest, ::testing::ValuesIn(kScenarios),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(SchedulerTest, ChunkedPrefillSamplesOnlyAtTheEnd) {
  Harness h(Config(256, 2048, 7), 16, 4);
  h.Add(1, 20, 3);
  Sequence* s = h.live(1);
  const std::vector<int> computed_after = {7, 14, 20, 21};
  const std::vector<size_t> output_after = {0, 0, 1, 2};
  for (size_t i = 0; i < computed_after.size(); ++i) {
    h.Step();
    EXPECT_EQ(s->num_computed, computed_after[i]) << "step " << i;
    EXPECT_EQ(s->output.size(), output_after[i]) << "step " << i;
  }
}

TEST(SchedulerTest, PreemptedSequenceResumesWithItsOutput) {
  Harness h(Config(256, 2048), 4, 4);
  h.Add(1, 6, 8);
  h.Add(2, 6, 8);
  for (int i = 0; i < 3; ++i) h.Step();
  Sequence* victim = h.live(2);
  EXPECT_EQ(victim->num_computed, 8);
  EXPECT_EQ(victim->block_table.size(), 2u);

  const StepRecord rec = h.Step();
  EXPECT_EQ(rec.plan, "1:1* !2");
  EXPECT_EQ(victim->num_computed, 0);
  EXPECT_TRUE(victim->block_table.empty());
  EXPECT_EQ(victim->num_preemptions, 1);
  EXPECT_EQ(victim->output.size(), 3u);  // what it generated is kept
  EXPECT_EQ(h.sched().num_running(), 1);
  EXPECT_EQ(h.sched().num_waiting(), 1);
  EXPECT_EQ(h.live(1)->block_table.size(), 3u);
  EXPECT_EQ(h.blocks().num_free(), 1);
  const std::vector<int32_t> output = victim->output;

  // It waits while 1 runs, then recomputes prompt + output in one step and samples.
  for (int i = 0; i < 50 && h.is_live(1); ++i) h.Step();
  ASSERT_FALSE(h.is_live(1));
  EXPECT_EQ(victim->num_computed, 0);
  EXPECT_EQ(h.Step().plan, "2:9*");
  EXPECT_EQ(victim->num_computed, 9);
  EXPECT_EQ(victim->output.size(), 4u);
  EXPECT_TRUE(std::equal(output.begin(), output.end(), victim->output.begin()));
  EXPECT_EQ(victim->num_preemptions, 1);
  for (int i = 0; i < 50 && h.is_live(2); ++i) h.Step();
  ASSERT_FALSE(h.is_live(2));
  EXPECT_EQ(h.finished_output().at(2), 8);
  EXPECT_EQ(h.blocks().num_free(), 4);
  EXPECT_TRUE(h.sched().idle());
}

// LongRoPE: a short-prompt sequence that crossed original_max_position_embeddings while
// decoding is recomputed after preemption in two chunks split at the boundary, so the tokens
// before it rotate with the short factors and the ones from it on with the long ones, as when
// they were first computed (the rule decides per step by the tokens held after it).
TEST(SchedulerTest, PreemptedLongRopeRecomputeStopsAtTheBoundary) {
  Harness h(Config(256, 2048), 4, 4);
  h.Add(1, 6, 8);
  h.Add(2, 6, 8);
  Sequence* victim = h.live(2);
  victim->long_rope_from = 7;
  for (int i = 0; i < 3; ++i) h.Step();
  EXPECT_EQ(h.Step().plan, "1:1* !2");
  EXPECT_EQ(victim->output.size(), 3u);  // 9 tokens held: 7 and 8 were long
  for (int i = 0; i < 50 && h.is_live(1); ++i) h.Step();
  ASSERT_FALSE(h.is_live(1));
  EXPECT_EQ(h.Step().plan, "2:7");   // positions 0-6: held 7 after it, short
  EXPECT_EQ(h.Step().plan, "2:2*");  // positions 7-8: long, then it samples
  for (int i = 0; i < 50 && h.is_live(2); ++i) h.Step();
  ASSERT_FALSE(h.is_live(2));
  EXPECT_EQ(h.finished_output().at(2), 8);
  EXPECT_EQ(h.blocks().num_free(), 4);
}

// Pipeline parallelism keeps steps in flight: their sequences are skipped by the next
// schedules and never preempted (their blocks are still being written), and max_step_seqs
// splits the sequences over the steps.
TEST(SchedulerTest, SequencesInFlightAreNeitherScheduledNorPreempted) {
  BlockManager blocks(4, 4, false);
  Scheduler sched(Config(256, 2048), &blocks);
  std::vector<Sequence*> seqs;
  for (int64_t id : {1, 2}) {
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->prompt.assign(8, 5);  // 2 blocks each: the cache is full with both
    seqs.push_back(s.get());
    sched.Add(std::move(s));
  }
  SchedulePlan a, b, c;
  sched.Schedule(&a, 1);
  ASSERT_EQ(a.scheduled.size(), 1u);
  EXPECT_EQ(a.scheduled[0].seq->id, 1);
  seqs[0]->in_flight = true;
  sched.Schedule(&b, 1);
  ASSERT_EQ(b.scheduled.size(), 1u);
  EXPECT_EQ(b.scheduled[0].seq->id, 2);
  seqs[1]->in_flight = true;
  sched.Schedule(&c, 1);
  EXPECT_TRUE(c.empty());  // both in flight
  EXPECT_TRUE(c.preempted.empty());
  // Step a comes back: 1 has a 9th token and needs a third block; 2 (in flight) holds the
  // rest, so 1 itself is preempted, not 2.
  sched.Commit(a);
  seqs[0]->in_flight = false;
  seqs[0]->output.push_back(7);
  sched.Schedule(&c, 1);
  EXPECT_TRUE(c.scheduled.empty());
  EXPECT_EQ(c.preempted, std::vector<int64_t>{1});
  EXPECT_EQ(seqs[1]->block_table.size(), 2u);
  EXPECT_EQ(blocks.num_free(), 2);
  // Without a cap a step takes every sequence that is not in flight.
  sched.Commit(b);
  seqs[1]->in_flight = false;
  seqs[1]->output.push_back(7);
  sched.Schedule(&c);
  ASSERT_EQ(c.scheduled.size(), 1u);  // 2 decodes; 1 waits for blocks
  EXPECT_EQ(c.scheduled[0].seq->id, 2);
}

TEST(SchedulerTest, AbortRunningFreesBlocksAtOnce) {
  Harness h(Config(256, 2048), 8, 4);
  h.Add(1, 8, 10);
  h.Add(2, 8, 10);
  EXPECT_EQ(h.Step().plan, "1:8* 2:8*");
  EXPECT_EQ(h.blocks().num_free(), 4);
  h.Abort(1);  // checks the 2 blocks come back at once
  EXPECT_EQ(h.blocks().num_free(), 6);
  EXPECT_EQ(h.sched().num_running(), 1);
  for (int i = 0; i < 20 && !h.sched().idle(); ++i) {
    EXPECT_EQ(h.Step().plan.find("1:"), std::string::npos);  // 1 is never planned again
  }
  EXPECT_TRUE(h.sched().idle());
  EXPECT_EQ(h.blocks().num_free(), 8);
}

TEST(SchedulerTest, AbortMidChunkedPrefill) {
  Harness h(Config(256, 2048, 7), 16, 4);
  h.Add(1, 20, 4);
  EXPECT_EQ(h.Step().plan, "1:7");
  EXPECT_EQ(h.blocks().num_free(), 14);
  h.Abort(1);
  EXPECT_EQ(h.blocks().num_free(), 16);
  EXPECT_TRUE(h.sched().idle());
  EXPECT_TRUE(h.sched().Schedule().empty());
}

TEST(SchedulerTest, AbortWaiting) {
  Harness h(Config(1, 2048), 8, 4);
  h.Add(1, 4, 3);
  h.Add(2, 4, 3);
  EXPECT_EQ(h.Step().plan, "1:4*");
  EXPECT_EQ(h.sched().num_waiting(), 1);
  const int free_before = h.blocks().num_free();
  h.Abort(2);
  EXPECT_EQ(h.blocks().num_free(), free_before);
  EXPECT_EQ(h.sched().num_waiting(), 0);
  std::vector<std::string> plans;
  for (int i = 0; i < 50 && !h.sched().idle(); ++i) plans.push_back(h.Step().plan);
  EXPECT_EQ(plans, (std::vector<std::string>{"1:1*", "1:1*"}));
  EXPECT_EQ(h.blocks().num_free(), 8);
}

TEST(SchedulerTest, AbortPreempted) {
  Harness h(Config(256, 2048), 4, 4);
  h.Add(1, 6, 8);
  h.Add(2, 6, 8);
  for (int i = 0; i < 3; ++i) h.Step();
  EXPECT_EQ(h.Step().plan, "1:1* !2");
  h.Abort(2);  // waiting, holds nothing
  EXPECT_EQ(h.sched().num_waiting(), 0);
  std::vector<std::string> plans;
  for (int i = 0; i < 50 && !h.sched().idle(); ++i) plans.push_back(h.Step().plan);
  EXPECT_EQ(plans, (std::vector<std::string>(4, "1:1*")));
  EXPECT_EQ(h.blocks().num_free(), 4);
}

TEST(SchedulerTest, RemoveUnknownIsNull) {
  BlockManager blocks(4, 4);
  Scheduler sched(Config(4, 16), &blocks);
  EXPECT_EQ(sched.Remove(42), nullptr);
  EXPECT_TRUE(sched.idle());
  EXPECT_TRUE(sched.Schedule().empty());
}

// Random sequences (arrivals, prompt lengths, output lengths, priorities, a few aborts) against
// small caches; every step is checked by the harness, and everything must drain.
struct StressCase {
  std::string name;
  SchedulerConfig config;
  int num_blocks;
  int block_size;
  bool expect_preemptions;
};

class SchedulerStressTest : public ::testing::TestWithParam<StressCase> {};

void PrintTo(const StressCase& s, std::ostream* os) {
  *os << s.name;
}

TEST_P(SchedulerStressTest, DrainsWithInvariantsEveryStep) {
  const StressCase& sc = GetParam();
  Harness h(sc.config, sc.num_blocks, sc.block_size);
  std::mt19937 rng(20240601);
  const int kSeqs = 50, kMaxSteps = 20000;
  std::vector<Arrival> arrivals;
  const int capacity = sc.num_blocks * sc.block_size;
  for (int i = 0; i < kSeqs; ++i) {
    Arrival a;
    a.id = i + 1;
    a.step = static_cast<int>(rng() % 120);
    a.prompt_len = 1 + static_cast<int>(rng() % 40);
    a.max_tokens = 1 + static_cast<int>(rng() % 30);
    a.priority = static_cast<int>(rng() % 3);
    // The engine only admits requests that can ever fit in the cache.
    if (a.prompt_len + a.max_tokens > capacity) a.max_tokens = std::max(1, capacity - a.prompt_len);
    ASSERT_LE(h.blocks().BlocksFor(a.prompt_len + a.max_tokens), sc.num_blocks);
    arrivals.push_back(a);
  }
  std::sort(arrivals.begin(), arrivals.end(),
            [](const Arrival& a, const Arrival& b) { return a.step < b.step; });
  // Ids in arrival order, as the engine assigns them.
  for (int i = 0; i < kSeqs; ++i) arrivals[i].id = i + 1;

  std::set<int64_t> aborted;
  size_t next = 0;
  int steps = 0;
  for (; steps < kMaxSteps; ++steps) {
    while (next < arrivals.size() && arrivals[next].step <= steps) {
      const Arrival& a = arrivals[next++];
      h.Add(a.id, a.prompt_len, a.max_tokens, a.priority);
    }
    if (next == arrivals.size() && h.sched().idle()) break;
    // Now and then abort a random live sequence (running or waiting).
    if (rng() % 40 == 0) {
      const int64_t id = 1 + static_cast<int64_t>(rng() % next);
      if (h.is_live(id)) {
        h.Abort(id);
        aborted.insert(id);
      }
    }
    h.Step();
    if (HasFailure()) {
      ADD_FAILURE() << "stopping at step " << steps;
      return;
    }
  }
  EXPECT_LT(steps, kMaxSteps) << "did not drain";
  EXPECT_TRUE(h.sched().idle());
  EXPECT_EQ(h.blocks().num_free(), sc.num_blocks);
  for (const Arrival& a : arrivals) {
    if (aborted.count(a.id)) continue;
    ASSERT_TRUE(h.finished_output().count(a.id)) << "sequence " << a.id << " never finished";
    EXPECT_EQ(h.finished_output().at(a.id), a.max_tokens);
  }
  EXPECT_LT(aborted.size(), 10u);
  if (sc.expect_preemptions) {
    EXPECT_GT(h.total_preemptions(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scheduler, SchedulerStressTest,
    ::testing::Values(StressCase{"TightCache", Config(8, 64), 20, 4, true},
                      StressCase{"TightCacheChunked", Config(8, 32, 5), 20, 4, true},
                      StressCase{"HugeBudget", Config(256, 2048), 20, 4, true},
                      StressCase{"SmallEverything", Config(3, 7, 3), 36, 2, true},
                      StressCase{"BigBlocks", Config(16, 64, 8), 10, 8, true},
                      StressCase{"RoomyCache", Config(4, 16), 400, 4, false},
                      StressCase{"PrefillBoundWhileDecoding", Config(8, 64, 0, 6), 20, 4, true},
                      StressCase{"OnePromptTokenWhileDecoding", Config(16, 64, 5, 1), 400, 4,
                                 false}),
    [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace llm
