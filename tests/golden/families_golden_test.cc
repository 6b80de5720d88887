// The random-weight family models of ../shared/golden/families, loaded from their hf/ folders
// and from their F32 GGUF files, against the NumPy float64 reference: greedy ids exact, every
// listed logit within 1e-3. (The quantized llama GGUFs: families_gguf_test.cc.)
#include <string>

#include "tests/golden/family_golden.h"

namespace llm::testing {
namespace {

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
