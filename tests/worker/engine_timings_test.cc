// The per-request timings the engine reports with a request's last token (vLLM's queue /
// prefill / decode / inference times), on the real stories260K model: each is non-negative,
// inference is prefill + decode, and a request that waits behind a full batch (max_num_seqs 1)
// reports the whole run of the one ahead of it as queue time.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/greedy_request.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm {
namespace {

using ::llm::testing::GreedyRequest;

const std::string kModel = std::string(LLM_SHARED_DIR) + "/models/stories260K";

void ExpectConsistent(const RequestTimings& t, const std::string& what) {
  EXPECT_GE(t.queue_s, 0) << what;
  EXPECT_GT(t.prefill_s, 0) << what;  // at least one forward pass
  EXPECT_GT(t.decode_s, 0) << what;   // more than one token
  EXPECT_NEAR(t.inference_s, t.prefill_s + t.decode_s, 1e-6) << what;
}

TEST(EngineTimings, OrderedNonNegativeAndQueueTimeGrowsBehindAFullBatch) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "missing shared test data: " << kModel;
  auto weights = LoadModelWeights(kModel, LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EngineConfig cfg;
  cfg.num_blocks = 128;
  cfg.scheduler.max_num_seqs = 1;  // a second request waits until the first finishes
  auto engine = Engine::Create(**weights, cfg);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();

  auto alone = GenerateAll(**engine, {GreedyRequest({1, 403, 407, 261}, 8)});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  ASSERT_EQ((*alone)[0].tokens.size(), 8u);
  const RequestTimings a = (*alone)[0].timings;
  ExpectConsistent(a, "alone");

  // Both arrive before the first step; the second runs only once the first has finished.
  auto both =
      GenerateAll(**engine, {GreedyRequest({1, 403, 407, 261}, 48), GreedyRequest({1, 378}, 8)});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  const RequestTimings first = (*both)[0].timings, second = (*both)[1].timings;
  ExpectConsistent(first, "first");
  ExpectConsistent(second, "second");
  // Its arrival is before the first's scheduling and its own scheduling after the first's last
  // token, so its queue time holds the first's whole inference time.
  EXPECT_GE(second.queue_s, first.inference_s);
  EXPECT_GT(second.queue_s, first.queue_s);
  EXPECT_GT(second.queue_s, a.queue_s);
}

}  // namespace
}  // namespace llm
