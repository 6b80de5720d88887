// The engine samples a step's rows in parallel (Engine::SampleRows: one Sampler per OpenMP
// thread). On the real stories260K model, eight seeded requests with penalties, top-k, top-p,
// min-p and logprobs run together give exactly the tokens and logprobs each gives alone (one
// row a step: sampled on the engine thread), since the CPU forward pass is batch invariant and
// a row's draw depends only on its logits, parameters, seed and step.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <string>
#include <vector>

#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm {
namespace {

const std::string kModel = std::string(LLM_SHARED_DIR) + "/models/stories260K";

GenerateRequest Sampled(int i) {
  GenerateRequest r;
  r.prompt = {1, 403, 407, 261, static_cast<int32_t>(300 + 7 * i)};
  r.max_tokens = 24;
  r.ignore_eos = true;
  r.sampling.temperature = 0.7f + 0.1f * static_cast<float>(i % 4);
  r.sampling.seed = 1000 + static_cast<uint64_t>(i);
  r.sampling.top_k = i % 2 == 0 ? 0 : 40;
  r.sampling.top_p = i % 3 == 0 ? 1.0f : 0.9f;
  r.sampling.min_p = i % 4 == 1 ? 0.05f : 0.0f;
  r.sampling.presence_penalty = i % 2 == 0 ? 0.5f : 0.0f;
  r.sampling.frequency_penalty = i % 3 == 1 ? 0.3f : 0.0f;
  r.sampling.logprobs = i % 2 == 0 ? 3 : -1;
  return r;
}

TEST(EngineSampling, RowsSampledInParallelGiveTheTokensOfEachAlone) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "missing shared test data: " << kModel;
  omp_set_num_threads(4);  // the parallel path needs >= 2 threads, whatever the host has
  auto weights = LoadModelWeights(kModel, LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EngineConfig cfg;
  cfg.num_blocks = 256;
  auto engine = Engine::Create(**weights, cfg);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();

  constexpr int kRequests = 8;
  std::vector<GenerateRequest> all;
  for (int i = 0; i < kRequests; ++i) all.push_back(Sampled(i));
  auto together = GenerateAll(**engine, all);
  ASSERT_TRUE(together.ok()) << together.status().ToString();
  ASSERT_EQ(together->size(), static_cast<size_t>(kRequests));
  int differing = 0;  // the requests must not all draw the same tokens (a vacuous comparison)
  for (int i = 0; i < kRequests; ++i) {
    auto alone = GenerateAll(**engine, {all[i]});
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    const auto& want = (*alone)[0].tokens;
    const auto& got = (*together)[i].tokens;
    ASSERT_EQ(got.size(), want.size()) << "request " << i;
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_EQ(got[t].token, want[t].token) << "request " << i << " token " << t;
      EXPECT_EQ(got[t].logprob, want[t].logprob) << "request " << i << " token " << t;
      ASSERT_EQ(got[t].top.size(), want[t].top.size()) << "request " << i << " token " << t;
      for (size_t k = 0; k < want[t].top.size(); ++k) {
        EXPECT_EQ(got[t].top[k].token, want[t].top[k].token);
        EXPECT_EQ(got[t].top[k].logprob, want[t].top[k].logprob);
      }
    }
    if (i > 0 && want[0].token != (*together)[0].tokens[0].token) ++differing;
    EXPECT_EQ(want.size(), 24u);
    if (all[i].sampling.logprobs == 3) {
      EXPECT_EQ(want[0].top.size(), 3u);
    }
  }
  EXPECT_GT(differing, 0) << "every request drew the same first token";
}

}  // namespace
}  // namespace llm
