// The random-weight family models of ../shared/golden/families, loaded from their hf/ folders
// and from their F32 GGUF files, against the NumPy float64 reference: greedy ids exact, every
// listed logit within 1e-3. (The quantized llama GGUFs: families_gguf_test.cc.)
#include <cmath>

#include "tests/golden/golden_util.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

constexpr double kTolerance = 1e-3;  // the families README's bound for an F32 engine

// Compares a reference top-10 list ([[id, logit], ...]) with one row of logits.
void ExpectTop10(const nlohmann::json& ref, const float* row, const std::string& where,
                 double* max_diff) {
  for (const auto& pair : ref) {
    const int id = pair[0].get<int>();
    const double want = pair[1].get<double>();
    const double diff = std::fabs(row[id] - want);
    *max_diff = std::max(*max_diff, diff);
    EXPECT_LE(diff, kTolerance) << where << " id " << id << ": got " << row[id] << " want " << want;
  }
}

// Runs `family`'s golden prompts on the model at `rel` (under golden/families/<family>/).
void ExpectFamilyGolden(const std::string& family, const std::string& rel) {
  const nlohmann::json ref = ReadJson(SharedPath("golden/families/" + family + "/reference.json"));
  auto weights = LoadModelWeights(SharedPath("golden/families/" + family + "/" + rel),
                                  LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  auto exec = RankExecutor::Create(**weights);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  RankExecutor& model = **exec;
  const int vocab = model.config().vocab_size;
  double max_diff = 0;
  for (const auto& prompt : ref["prompts"]) {
    const std::string name = family + "/" + prompt["name"].get<std::string>();
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    const auto greedy_ref = prompt["greedy_ids"].get<std::vector<int32_t>>();
    SequenceRunner runner(model, static_cast<int>(ids.size() + greedy_ref.size()));
    std::vector<float> logits = runner.Feed(ids, /*all_rows=*/true);
    for (size_t p = 0; p < ids.size(); ++p) {
      ExpectTop10(prompt["top10_per_position"][p], logits.data() + p * vocab,
                  name + " position " + std::to_string(p), &max_diff);
    }
    const float* last = logits.data() + (ids.size() - 1) * vocab;
    const auto& last_ref = prompt["last_position_logits"];
    for (int v = 0; v < vocab; ++v) {
      max_diff = std::max(max_diff, std::fabs(last[v] - last_ref[v].get<double>()));
      ASSERT_NEAR(last[v], last_ref[v].get<double>(), kTolerance) << name << " last logit " << v;
    }
    std::vector<int32_t> greedy;
    std::vector<float> step(last, last + vocab);
    for (size_t k = 0; k < greedy_ref.size(); ++k) {
      ExpectTop10(prompt["greedy_step_top10"][k], step.data(),
                  name + " greedy step " + std::to_string(k), &max_diff);
      greedy.push_back(Argmax(step.data(), vocab));
      if (k + 1 < greedy_ref.size()) step = runner.Feed({greedy.back()}, false);
    }
    EXPECT_EQ(greedy, greedy_ref) << name;
  }
  std::printf("[ %s/%s ] max |logit - numpy_float64| = %.3g\n", family.c_str(), rel.c_str(),
              max_diff);
}

class FamilyGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyGolden, GreedyIdsAndLogitsMatchNumpy) {
  const std::string family = GetParam();
  LLM_REQUIRE_SHARED("golden/families/" + family + "/reference.json");
  ExpectFamilyGolden(family, "hf");
}

// The same model from its F32 GGUF alone: config, weights (llama q/k un-permuted) and all.
TEST_P(FamilyGolden, F32GgufMatchesNumpy) {
  const std::string family = GetParam();
  LLM_REQUIRE_SHARED("golden/families/" + family + "/reference.json");
  LLM_REQUIRE_SHARED("golden/families/" + family + "/" + family + ".gguf");
  ExpectFamilyGolden(family, family + ".gguf");
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyGolden,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
                                           "phi3", "mixtral", "qwen2moe"));

}  // namespace
}  // namespace llm::testing
