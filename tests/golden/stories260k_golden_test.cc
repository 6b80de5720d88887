// stories260K (real TinyStories weights) against the NumPy float64 reference, and batch
// invariance: golden prompts plus 8 others, batched in any order with 7-token prefill chunks,
// give exactly the ids each gives alone.
#include <algorithm>
#include <cmath>
#include <random>

#include "tests/golden/golden_util.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

constexpr const char* kGolden = "golden/stories260K_greedy.jsonl";
constexpr const char* kModel = "models/stories260K";

// Greedy ids and the top-5 logits of the first steps against the NumPy float64 reference, with
// the KV cache in `kv_dtype`, the logits within `rel` (relative, at least 1 absolute).
void ExpectGoldenIdsAndTop5(DType kv_dtype, double rel) {
  auto weights = LoadModelWeights(SharedPath(kModel), LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  auto exec = RankExecutor::Create(**weights);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  RankExecutor& model = **exec;
  const int vocab = model.config().vocab_size;
  const auto cases = ReadJsonl(SharedPath(kGolden));
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    const auto want = c["greedy_token_ids"].get<std::vector<int32_t>>();
    SequenceRunner runner(model, static_cast<int>(prompt.size() + want.size()), 16, kv_dtype);
    std::vector<float> logits = runner.Feed(prompt, false);
    std::vector<int32_t> got;
    for (size_t k = 0; k < want.size(); ++k) {
      for (const auto& step : c["top5_first_steps"]) {
        if (step["step"].get<size_t>() != k) continue;
        for (const auto& t : step["top5"]) {
          const double ref = t["logit"].get<double>();
          EXPECT_NEAR(logits[t["id"].get<int>()], ref, rel * std::max(1.0, std::fabs(ref)))
              << c["prompt"] << " step " << k;
        }
      }
      got.push_back(Argmax(logits.data(), vocab));
      logits = runner.Feed({got.back()}, false);
    }
    EXPECT_EQ(got, want) << "prompt: " << c["prompt"];
  }
}

TEST(Stories260K, GreedyIdsAndTop5MatchNumpy) {
  LLM_REQUIRE_SHARED(kGolden);
  LLM_REQUIRE_SHARED(kModel);
  ExpectGoldenIdsAndTop5(DType::kF32, 1e-3);
}

// engine.kv_cache_dtype float16: K and V rounded to half once each (about 5e-4 relative); the
// greedy ids stay the reference's (the smallest top-1/top-2 margin of the golden runs is 0.036)
// and the logits stay within 5e-3. (1e-3 fails for the half cache: the test can tell them apart.)
TEST(Stories260K, HalfKvCacheKeepsTheGreedyIdsAndTop5) {
  LLM_REQUIRE_SHARED(kGolden);
  LLM_REQUIRE_SHARED(kModel);
  ExpectGoldenIdsAndTop5(DType::kF16, 5e-3);
}

// Greedy ids of `prompts` generated together (in `order`) or one by one, with the KV cache in
// `kv_dtype` (engine.kv_cache_dtype).
std::vector<std::vector<int32_t>> Generate(const ModelWeights& w,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<int>& lens,
                                           const std::vector<size_t>& order, int chunk,
                                           int prefill_bound = 0,
                                           const std::string& kv_dtype = "auto") {
  EngineConfig cfg;
  cfg.kv_cache_dtype = kv_dtype;
  cfg.num_blocks = 512;
  cfg.block_size = 16;
  cfg.scheduler.max_prefill_chunk = chunk;
  cfg.scheduler.max_prefill_tokens_while_decoding = prefill_bound;
  cfg.scheduler.max_num_batched_tokens = 64;
  auto engine = Engine::Create(w, cfg);
  EXPECT_TRUE(engine.ok());
  std::vector<GenerateRequest> reqs;
  for (size_t i : order) reqs.push_back(GreedyRequest(prompts[i], lens[i]));
  auto results = GenerateAll(**engine, reqs);
  EXPECT_TRUE(results.ok()) << results.status().ToString();
  std::vector<std::vector<int32_t>> out(prompts.size());
  for (size_t j = 0; j < order.size(); ++j) out[order[j]] = TokenIds((*results)[j]);
  EXPECT_EQ((*engine)->stats().blocks_free, 512) << "blocks leaked";
  return out;
}

TEST(Stories260K, BatchInvariantUnderChunkingAndOrder) {
  LLM_REQUIRE_SHARED(kGolden);
  LLM_REQUIRE_SHARED(kModel);
  auto weights = LoadModelWeights(SharedPath(kModel), LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> lens;
  for (const auto& c : ReadJsonl(SharedPath(kGolden))) {
    prompts.push_back(c["prompt_token_ids"].get<std::vector<int32_t>>());
    lens.push_back(static_cast<int>(c["greedy_token_ids"].size()));
  }
  const size_t golden = prompts.size();
  std::mt19937 rng(7);
  for (int extra : {1, 3, 6, 7, 8, 15, 23, 40}) {  // 8 more prompts of different lengths
    std::vector<int32_t> p{1};
    for (int i = 0; i < extra; ++i) p.push_back(3 + static_cast<int32_t>(rng() % 509));
    prompts.push_back(p);
    lens.push_back(10 + extra % 13);
  }
  // The same with the KV cache in float16 (engine.kv_cache_dtype): bitwise invariance holds too.
  for (const std::string kv : {"auto", "float16"}) {
    std::vector<std::vector<int32_t>> alone(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      alone[i] = Generate(**weights, prompts, lens, {i}, 0, 0, kv)[i];
    }
    for (size_t i = 0; i < golden; ++i) {
      const auto want = ReadJsonl(SharedPath(kGolden))[i]["greedy_token_ids"];
      EXPECT_EQ(alone[i], want.get<std::vector<int32_t>>())
          << "golden prompt " << i << ", KV cache " << kv;
    }
    std::vector<size_t> order(prompts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (int trial = 0; trial < 3; ++trial) {
      std::shuffle(order.begin(), order.end(), rng);
      auto together = Generate(**weights, prompts, lens, order, 7, 0, kv);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(together[i], alone[i])
            << "prompt " << i << " trial " << trial << ", KV cache " << kv;
      }
      // The 64-token budget admits the first prompts; the rest are prefilled at most 5 tokens a
      // step (over all of them) beside the ones decoding, in pieces that cross block borders.
      auto bounded = Generate(**weights, prompts, lens, order, 7, 5, kv);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(bounded[i], alone[i])
            << "prompt " << i << " trial " << trial << ", bound 5, KV cache " << kv;
      }
    }
  }
}

}  // namespace
// Prefix caching: a prompt that extends an earlier request's prompt + output reuses its KV
// blocks, and still generates exactly the golden ids (the cached K/V equal what it would
// compute), with fewer prompt tokens computed than without the cache.
TEST(Stories260K, PrefixCacheReusesBlocksAndKeepsTheIds) {
  LLM_REQUIRE_SHARED(kGolden);
  LLM_REQUIRE_SHARED(kModel);
  auto weights = LoadModelWeights(SharedPath(kModel), LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const auto c = ReadJsonl(SharedPath(kGolden))[0];
  const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
  const auto want = c["greedy_token_ids"].get<std::vector<int32_t>>();
  ASSERT_GE(want.size(), 48u);
  // The second request continues the first: its prompt is the golden prompt + 40 golden ids.
  std::vector<int32_t> extended = prompt;
  extended.insert(extended.end(), want.begin(), want.begin() + 40);
  const std::vector<int32_t> rest(want.begin() + 40, want.end());
  int64_t computed[2] = {0, 0};
  for (bool caching : {true, false}) {
    EngineConfig cfg;
    cfg.num_blocks = 64;
    cfg.block_size = 16;
    cfg.enable_prefix_caching = caching;
    auto engine = Engine::Create(**weights, cfg);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto first = GenerateAll(**engine, {GreedyRequest(prompt, static_cast<int>(want.size()))});
    ASSERT_TRUE(first.ok());
    // Then the continuation, three times in one batch (they also share with each other).
    const GenerateRequest next = GreedyRequest(extended, static_cast<int>(rest.size()));
    auto second = GenerateAll(**engine, {next, next, next});
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    for (const auto& r : *second) EXPECT_EQ(TokenIds(r), rest) << "prefix caching " << caching;
    const EngineStats st = (*engine)->stats();
    computed[caching ? 0 : 1] = st.prompt_tokens_computed;
    EXPECT_EQ(st.blocks_free, 64) << "blocks leaked";
    if (caching) {
      // 45 tokens of which the first 2 blocks (32 tokens) were computed by the first request.
      EXPECT_GE(st.prefix_cache_hit_tokens, 3 * 32);
    } else {
      EXPECT_EQ(st.prefix_cache_hit_tokens, 0);
    }
  }
  EXPECT_LT(computed[0] + 3 * 32, computed[1] + 1);
}

}  // namespace llm::testing
