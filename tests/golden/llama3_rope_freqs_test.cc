// Llama 3.1 / 3.2 GGUF files: llama.cpp's converter stores their "llama3" rope scaling as the
// tensor rope_freqs.weight (a divisor per rotary lane pair), with no scaling keys. The shared
// llama family model as such a GGUF (the tensor added here, with the factors the converter
// computes) must run in the engine to the logits of the same model from its Hugging Face folder
// with rope_scaling "llama3" (transformers' _compute_llama3_parameters, whose inv_freq
// model_loading_test.cc checks against values computed with transformers), and far from the
// model without the scaling.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/gguf.h"
#include "common/model_config.h"
#include "tests/common/gguf_copy.h"
#include "tests/common/llama3_rope.h"
#include "tests/golden/golden_util.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// rope_scaling of both files: original context 64, so that with head_dim 16 and theta 1e4 lane
// pair 0 keeps its frequency (wavelength 6.3 < 64 / 4), pairs 1-2 are smoothed and 3-7 divided by
// the factor.
constexpr double kFactor = 8, kLowFreqFactor = 1, kHighFreqFactor = 4, kOldContext = 64;

struct Llama3Files {
  fs::path dir;  // removed with the struct
  std::string gguf, hf;
  ~Llama3Files() { fs::remove_all(dir); }
};

// The family's GGUF with rope_freqs.weight added, and its HF folder with rope_scaling llama3.
void WriteLlama3Files(Llama3Files* out) {
  out->dir = fs::temp_directory_path() / ("llm_llama3_rope_" + std::to_string(getpid()));
  fs::create_directories(out->dir / "hf");
  auto src = GgufFile::Open(SharedPath("golden/families/llama/llama.gguf"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const json config = ReadJson(SharedPath("golden/families/llama/hf/config.json"));
  const int head_dim = config["hidden_size"].get<int>() / config["num_attention_heads"].get<int>();
  GgufWriter w;
  CopyGgufMetadata(**src, &w);
  CopyGgufTensors(**src, &w);
  const std::vector<float> factors =
      ConverterLlama3RopeFactors(config["rope_theta"].get<float>(), head_dim, kFactor,
                                 kLowFreqFactor, kHighFreqFactor, kOldContext);
  ASSERT_EQ(factors.size(), 8u);
  EXPECT_EQ(factors[0], 1.0f);
  EXPECT_GT(factors[1], 1.0f);
  EXPECT_LT(factors[2], kFactor);
  EXPECT_EQ(factors[3], static_cast<float>(kFactor));
  w.TensorF32("rope_freqs.weight", {factors.size()}, factors);
  out->gguf = (out->dir / "llama3.gguf").string();
  w.Write(out->gguf);

  json hf = config;
  hf["rope_scaling"] = {{"rope_type", "llama3"},
                        {"factor", kFactor},
                        {"low_freq_factor", kLowFreqFactor},
                        {"high_freq_factor", kHighFreqFactor},
                        {"original_max_position_embeddings", static_cast<int>(kOldContext)}};
  for (const auto& e : fs::directory_iterator(SharedPath("golden/families/llama/hf"))) {
    if (e.path().filename() != "config.json") {
      fs::create_symlink(e.path(), out->dir / "hf" / e.path().filename());
    }
  }
  std::ofstream(out->dir / "hf" / "config.json") << hf.dump(2);
  out->hf = (out->dir / "hf").string();
}

// Every prompt of the family's reference through the engine on `path`: logits of every prompt
// position and of 16 greedy steps, per prompt.
std::vector<EngineRun> RunFamilyPrompts(const std::string& path, RopeScalingType want_type) {
  auto weights = LoadModelWeights(path, LoadFormat::kSafetensors);
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  if (!weights.ok()) return {};
  EXPECT_EQ((*weights)->config.rope_scaling.type, want_type) << path;
  auto exec = RankExecutor::Create(**weights);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return {};
  std::vector<EngineRun> runs;
  const json ref = ReadJson(SharedPath("golden/families/llama/reference.json"));
  for (const auto& p : ref["prompts"]) {
    runs.push_back(RunEngineGreedy(**exec, p["ids"].get<std::vector<int32_t>>(), 16));
  }
  return runs;
}

// The largest |a - b| over every logit of two runs of the same prompts; greedy ids must match.
double MaxDiff(const std::vector<EngineRun>& a, const std::vector<EngineRun>& b, bool same_ids) {
  double most = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t p = 0; p < a.size() && p < b.size(); ++p) {
    if (same_ids) {
      EXPECT_EQ(a[p].ids, b[p].ids) << "prompt " << p;
    }
    auto rows = [&](const auto& x, const auto& y) {
      for (size_t r = 0; r < x.size() && r < y.size(); ++r) {
        for (size_t i = 0; i < x[r].size(); ++i) {
          most = std::max(most, static_cast<double>(std::fabs(x[r][i] - y[r][i])));
        }
      }
    };
    rows(a[p].prompt_logits, b[p].prompt_logits);
    if (same_ids) rows(a[p].step_logits, b[p].step_logits);
  }
  return most;
}

TEST(Llama3RopeFreqsGguf, EngineMatchesTheHfLlama3Scaling) {
  LLM_REQUIRE_SHARED("golden/families/llama/llama.gguf");
  LLM_REQUIRE_SHARED("golden/families/llama/hf/config.json");
  Llama3Files files;
  ASSERT_NO_FATAL_FAILURE(WriteLlama3Files(&files));
  const auto gguf = RunFamilyPrompts(files.gguf, RopeScalingType::kFreqFactors);
  const auto hf = RunFamilyPrompts(files.hf, RopeScalingType::kLlama3);
  const auto plain =
      RunFamilyPrompts(SharedPath("golden/families/llama/llama.gguf"), RopeScalingType::kNone);
  ASSERT_FALSE(gguf.empty());
  // Both are F32 runs of one function: only the factors' float rounding (the converter's float32
  // frequencies) separates them.
  const double diff = MaxDiff(gguf, hf, /*same_ids=*/true);
  EXPECT_LT(diff, 1e-4);
  // Without the factors the prompt logits move far beyond that (positions up to the prompt's).
  const double unscaled = MaxDiff(gguf, plain, /*same_ids=*/false);
  EXPECT_GT(unscaled, 1e-2);
  std::printf("[ llama3 rope_freqs ] max |gguf - hf llama3| = %.3g, |gguf - unscaled| = %.3g\n",
              diff, unscaled);
}

}  // namespace
}  // namespace llm::testing
