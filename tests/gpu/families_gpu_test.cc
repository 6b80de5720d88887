// The family goldens on the CUDA backend (label gpu; skips without a CUDA device): each
// random-weight model of ../shared/golden/families from its hf/ folder, F32 weights on the GPU,
// against the NumPy float64 reference with the CPU's bounds (tests/golden/family_golden.h:
// greedy ids exact, every listed logit within 1e-3). Covers what the stories260K goldens do not:
// biases, sliding windows, soft-caps, per-head q/k norms, GELU, tied and scaled embeddings,
// partial rotary and experts.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda_backend.h"
#include "tests/golden/family_golden.h"

namespace llm::testing {
namespace {

class GpuFamilyGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuFamilyGolden, GreedyIdsAndLogitsMatchNumpy) {
  if (kernels::CudaDeviceCount() == 0) {
    GTEST_SKIP() << (kernels::CudaCompiled() ? "no CUDA device on this host"
                                             : "this build has no CUDA backend (no nvcc)")
                 << ": GPU test skipped";
  }
  const std::string family = GetParam();
  LLM_REQUIRE_SHARED("golden/families/" + family + "/reference.json");
  StatusOr<kernels::Backend*> backend = kernels::CudaBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  ExpectFamilyGolden(family, "hf", **backend);
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFamilyGolden,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
                                           "phi3", "mixtral", "qwen2moe"));

}  // namespace
}  // namespace llm::testing
