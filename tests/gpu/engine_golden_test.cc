// End to end on a GPU (label gpu; skips without a CUDA device): stories260K through the engine
// on CudaBackend(0) gives exactly the greedy ids of the NumPy reference in ../shared/golden, as
// the CPU backend does (tests/golden/stories260k_golden_test.cc); the KV cache sized by the
// GPU rule (engine.gpu_memory_utilization) holds at least one sequence; every block is freed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kernels/cuda_backend.h"
#include "tests/golden/golden_util.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

constexpr const char* kGolden = "golden/stories260K_greedy.jsonl";
constexpr const char* kModel = "models/stories260K";

#define LLM_REQUIRE_CUDA_DEVICE()                                                        \
  if (kernels::CudaDeviceCount() == 0)                                                   \
  GTEST_SKIP() << (kernels::CudaCompiled() ? "no CUDA device on this host"               \
                                           : "this build has no CUDA backend (no nvcc)") \
               << ": GPU test skipped"

// Param: engine.cuda_graph_max_batch (0: every step plain; 64: decode steps as CUDA graphs).
class GpuEngine : public ::testing::TestWithParam<int> {};

TEST_P(GpuEngine, Stories260KGreedyIdsMatchTheGolden) {
  LLM_REQUIRE_CUDA_DEVICE();
  LLM_REQUIRE_SHARED(kGolden);
  LLM_REQUIRE_SHARED(kModel);
  auto backend = kernels::CudaBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto weights = LoadModelWeights(SharedPath(kModel), LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  ASSERT_TRUE(PlaceWeights(**weights, **backend).ok());
  EngineConfig cfg;
  cfg.num_blocks = 256;
  cfg.block_size = 16;
  cfg.scheduler.max_num_batched_tokens = 64;
  cfg.scheduler.max_prefill_chunk = 7;  // chunked prefill on the GPU too
  cfg.cuda_graph_max_batch = GetParam();
  auto engine = Engine::Create(**weights, cfg, nullptr, **backend);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::vector<GenerateRequest> reqs;
  std::vector<std::vector<int32_t>> want;
  for (const auto& c : ReadJsonl(SharedPath(kGolden))) {
    GenerateRequest r;
    r.prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    want.push_back(c["greedy_token_ids"].get<std::vector<int32_t>>());
    r.max_tokens = static_cast<int>(want.back().size());
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    reqs.push_back(r);
  }
  ASSERT_FALSE(reqs.empty());
  auto results = GenerateAll(**engine, reqs);  // all prompts batched together
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int32_t> got;
    for (const auto& s : (*results)[i].tokens) got.push_back(s.token);
    EXPECT_EQ(got, want[i]) << "golden prompt " << i;
  }
  EXPECT_EQ((*engine)->stats().blocks_free, 256) << "blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(CudaGraphs, GpuEngine, ::testing::Values(0, 64));

TEST(GpuEngineMemory, KvCacheSizedFromTheGpuMemory) {
  LLM_REQUIRE_CUDA_DEVICE();
  LLM_REQUIRE_SHARED(kModel);
  auto backend = kernels::CudaBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto weights = LoadModelWeights(SharedPath(kModel), LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  ASSERT_TRUE(PlaceWeights(**weights, **backend).ok());
  auto mem = kernels::CudaMemoryInfo(**backend);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_GT(mem->total_bytes, 0u);
  EXPECT_LE(mem->free_bytes, mem->total_bytes);
  EngineSection e;
  e.device = "cuda";
  e.gpu_memory_utilization = 0.5;
  e.scheduler.max_num_batched_tokens = 512;
  auto blocks = ProfileKvBlocks(**weights, **backend, nullptr, nullptr, e, 512,
                                [&] { return kernels::CudaMemoryInfo(**backend); });
  if (!blocks.ok()) {
    // A GPU more than half full already (another process): the refusal names the key.
    EXPECT_NE(blocks.status().message().find("engine.gpu_memory_utilization"), std::string::npos)
        << blocks.status().ToString();
    GTEST_SKIP() << "the GPU is too busy for this check: " << blocks.status().ToString();
  }
  EXPECT_GE(*blocks, BlocksForOneSequence(512, e.block_size));
  EngineConfig cfg;
  static_cast<EngineSection&>(cfg) = e;
  cfg.num_blocks = *blocks;
  auto engine = Engine::Create(**weights, cfg, nullptr, **backend);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->stats().blocks_total, *blocks);
}

}  // namespace
}  // namespace llm::testing
