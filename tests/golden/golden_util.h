// Helpers for the golden tests: locate ../shared data and run one sequence through the model
// step by step, keeping the logits of every position.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/golden/reference_common.h"
#include "tests/greedy_request.h"
#include "worker/engine/engine.h"
#include "worker/model/rank_executor.h"

namespace llm::testing {

inline std::string SharedPath(const std::string& rel) {
  return (std::filesystem::path(LLM_SHARED_DIR) / rel).string();
}

// Skips the test (never passes it) when shared data is missing.
#define LLM_REQUIRE_SHARED(rel)                                                        \
  do {                                                                                 \
    if (!std::filesystem::exists(::llm::testing::SharedPath(rel)))                     \
      GTEST_SKIP() << "missing shared test data: " << ::llm::testing::SharedPath(rel); \
  } while (0)

// The token ids of a result.
inline std::vector<int32_t> TokenIds(const GenerateResult& r) {
  std::vector<int32_t> ids;
  for (const auto& t : r.tokens) ids.push_back(t.token);
  return ids;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::vector<nlohmann::json> ReadJsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Runs one sequence: the whole prompt in one step (logits at every position), then greedy
// decode one token per step. Blocks are laid out in reverse order to exercise block tables.
class SequenceRunner {
 public:
  SequenceRunner(RankExecutor& exec, int max_tokens, int block_size = 4,
                 DType kv_dtype = DType::kF32)
      : exec_(exec),
        block_size_(block_size),
        num_blocks_((max_tokens + block_size - 1) / block_size) {
    const Status s = exec_.AllocateCache(num_blocks_, block_size, kv_dtype);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  // Appends `tokens` to the sequence; returns logits [tokens.size(), vocab] (every row) or
  // only the last row.
  std::vector<float> Feed(const std::vector<int32_t>& tokens, bool all_rows) {
    ForwardBatch& b = exec_.batch();
    b.Clear();
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int p = len_ + static_cast<int>(i);
      b.token_ids.push_back(tokens[i]);
      b.positions.push_back(p);
      b.slot_mapping.push_back(Block(p / block_size_) * block_size_ + p % block_size_);
      if (all_rows || i + 1 == tokens.size()) b.logit_rows.push_back(static_cast<int32_t>(i));
    }
    len_ += static_cast<int>(tokens.size());
    b.query_start.push_back(b.num_tokens());
    b.context_len.push_back(len_);
    b.max_blocks_per_seq = num_blocks_;
    for (int i = 0; i < num_blocks_; ++i) b.block_tables.push_back(Block(i));
    auto logits = exec_.Execute();
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    const size_t n = b.logit_rows.size() * exec_.config().vocab_size;
    return std::vector<float>(*logits, *logits + n);
  }

 private:
  int32_t Block(int logical) const { return num_blocks_ - 1 - logical; }
  RankExecutor& exec_;
  int block_size_, num_blocks_;
  int len_ = 0;
};

inline int32_t Argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

// One sequence through the engine as transformers' generate feeds it: the whole prompt in one
// step (logits at every position), then `steps` greedy tokens, one per step.
struct EngineRun {
  std::vector<std::vector<float>> prompt_logits;  // [position][vocab]
  std::vector<std::vector<float>> step_logits;    // the logits that chose each greedy id
  std::vector<int32_t> ids;
};

inline EngineRun RunEngineGreedy(RankExecutor& model, const std::vector<int32_t>& prompt,
                                 int steps) {
  const int vocab = model.config().vocab_size;
  EngineRun r;
  SequenceRunner runner(model, static_cast<int>(prompt.size()) + steps);
  const std::vector<float> all = runner.Feed(prompt, /*all_rows=*/true);
  for (size_t p = 0; p < prompt.size(); ++p) {
    r.prompt_logits.emplace_back(all.begin() + p * vocab, all.begin() + (p + 1) * vocab);
  }
  std::vector<float> step = r.prompt_logits.back();
  for (int k = 0; k < steps; ++k) {
    r.step_logits.push_back(step);
    r.ids.push_back(Argmax(step.data(), vocab));
    if (k + 1 < steps) step = runner.Feed({r.ids.back()}, false);
  }
  return r;
}

// Expects every row of `got` (the engine's logits) within `tolerance` of the same row of `want`
// (a float64 reference's); returns the largest difference. `what` names the rows in failures.
inline double ExpectRowsNear(const std::vector<std::vector<float>>& got,
                             const std::vector<std::vector<double>>& want, double tolerance,
                             const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double max_diff = 0;
  for (size_t r = 0; r < std::min(got.size(), want.size()); ++r) {
    double d = 0;
    for (size_t v = 0; v < want[r].size(); ++v) {
      d = std::max(d, std::fabs(static_cast<double>(got[r][v]) - want[r][v]));
    }
    EXPECT_LE(d, tolerance) << what << " " << r;
    max_diff = std::max(max_diff, d);
  }
  return max_diff;
}

// reference.json stores logits to 7 significant digits (12.43476): a float64 reference that
// computes the same function lands within half a unit of the last digit, plus 1e-7 of slack.
inline double StoredPrecision(double want) {
  const double mag = std::max(std::fabs(want), 1e-3);
  return 0.5 * std::pow(10.0, std::floor(std::log10(mag)) - 6) + 1e-7;
}

// Runs a float64 reference (anything ReferenceGreedy takes) on the prompts of
// ../shared/golden/families/<family>/reference.json: greedy ids exact, every stored logit (top 10
// per prompt position and greedy step, the whole last position) to the precision it is stored
// with.
template <typename Ref>
void ExpectReferenceMatchesSharedGolden(const Ref& ref, const std::string& family) {
  const nlohmann::json golden =
      ReadJson(SharedPath("golden/families/" + family + "/reference.json"));
  double max_diff = 0;
  int checked = 0;
  auto check = [&](double got, double want, const std::string& where) {
    const double diff = std::fabs(got - want);
    max_diff = std::max(max_diff, diff);
    ++checked;
    EXPECT_LE(diff, StoredPrecision(want))
        << family << " " << where << ": " << got << " vs " << want;
  };
  for (const auto& prompt : golden["prompts"]) {
    const std::string name = prompt["name"];
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    const auto want = prompt["greedy_ids"].get<std::vector<int32_t>>();
    const reference::RefGreedy g =
        reference::ReferenceGreedy(ref, ids, static_cast<int>(want.size()));
    EXPECT_EQ(g.ids, want) << family << " " << name;
    for (size_t p = 0; p < ids.size(); ++p) {
      for (const auto& pair : prompt["top10_per_position"][p]) {
        check(g.prompt_logits[p][pair[0].get<int>()], pair[1], name + " position");
      }
    }
    const auto& last = prompt["last_position_logits"];
    for (size_t v = 0; v < last.size(); ++v) check(g.prompt_logits.back()[v], last[v], name);
    for (size_t k = 0; k < want.size(); ++k) {
      for (const auto& pair : prompt["greedy_step_top10"][k]) {
        check(g.step_logits[k][pair[0].get<int>()], pair[1], name + " greedy step");
      }
    }
  }
  EXPECT_GT(checked, 1000);
  std::printf(
      "[ %s ] %d logits: max |reference - shared numpy_float64| = %.3g (stored to 7 digits)\n",
      family.c_str(), checked, max_diff);
}

struct GreedyComparison {
  double max_diff = 0;        // the largest |engine - reference| logit
  double min_margin = 1e300;  // the reference's smallest greedy top-1 minus top-2 logit
};

// Each prompt through the engine (RunEngineGreedy) and through `ref` (ReferenceGreedy): the
// same greedy ids, and every logit of every prompt position and greedy step within `tolerance`.
template <typename Ref>
GreedyComparison ExpectEngineMatchesGreedy(RankExecutor& exec, const Ref& ref,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           int steps, double tolerance) {
  GreedyComparison r;
  for (const auto& prompt : prompts) {
    const reference::RefGreedy want = reference::ReferenceGreedy(ref, prompt, steps);
    r.min_margin = std::min(r.min_margin, want.min_margin);
    const EngineRun got = RunEngineGreedy(exec, prompt, steps);
    EXPECT_EQ(got.ids, want.ids) << "prompt of " << prompt.size();
    r.max_diff = std::max(
        {r.max_diff, ExpectRowsNear(got.prompt_logits, want.prompt_logits, tolerance, "position"),
         ExpectRowsNear(got.step_logits, want.step_logits, tolerance, "greedy step")});
  }
  return r;
}

// An engine on `weights` against `ref` on the prompts (ExpectEngineMatchesGreedy), and no greedy
// choice of the reference a near-tie (its top-1 minus top-2 logit above 50 × tolerance, so the
// ids compare the engine, not rounding); prints "[ name ] max |engine - reference| = …".
template <typename Ref>
void ExpectEngineOnWeightsMatchesGreedy(const ModelWeights& weights, const Ref& ref,
                                        const std::vector<std::vector<int32_t>>& prompts, int steps,
                                        double tolerance, const std::string& name) {
  auto exec = RankExecutor::Create(weights);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  const GreedyComparison r = ExpectEngineMatchesGreedy(**exec, ref, prompts, steps, tolerance);
  EXPECT_GT(r.min_margin, 50 * tolerance);  // no greedy choice is a near-tie
  std::printf("[ %s ] max |engine - reference| = %.3g, min greedy margin %.3g\n", name.c_str(),
              r.max_diff, r.min_margin);
}

}  // namespace llm::testing
