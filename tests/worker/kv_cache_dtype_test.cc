// engine.kv_cache_dtype "auto" (ResolveKvCacheDtype, worker/engine/device_setup.h): a half
// cache for a model stored in 16 bits or quantized (vLLM's auto follows the model's dtype,
// llama.cpp's cache is F16), float32 for a float32 model and on a backend without a half cache;
// explicit values win. On the real family files of ../shared (llama as F32 safetensors, F16 and
// Q8_0 GGUF).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kernels/backend.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm {
namespace {

std::string Llama(const std::string& rel) {
  return std::string(LLM_SHARED_DIR) + "/golden/families/llama/" + rel;
}

#define REQUIRE_FILE(path) \
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing shared test data: " << (path)

DType Resolve(const ModelWeights& w, const std::string& value,
              const kernels::BackendCaps& caps = kernels::CpuBackend().caps()) {
  EngineSection e;
  e.kv_cache_dtype = value;
  return ResolveKvCacheDtype(e, w, caps);
}

TEST(KvCacheDtype, AutoFollowsTheModelsStorage) {
  REQUIRE_FILE(Llama("llama-q8_0.gguf"));
  auto f32 = LoadModelWeights(Llama("hf"), LoadFormat::kSafetensors);
  auto f16 = LoadModelWeights(Llama("llama-f16.gguf"), LoadFormat::kGguf);
  auto q8 = LoadModelWeights(Llama("llama-q8_0.gguf"), LoadFormat::kGguf);
  // The F32 safetensors quantized at load (model.quantization): its matrices are Q8_0 then.
  auto f32_as_q8 = LoadModelWeights(Llama("hf"), LoadFormat::kSafetensors, 0, {}, DType::kQ8_0);
  ASSERT_TRUE(f32.ok() && f16.ok() && q8.ok() && f32_as_q8.ok());

  EXPECT_EQ(Resolve(**f32, "auto"), DType::kF32);
  EXPECT_EQ(Resolve(**f16, "auto"), DType::kF16);
  EXPECT_EQ(Resolve(**q8, "auto"), DType::kF16);
  EXPECT_EQ(Resolve(**f32_as_q8, "auto"), DType::kF16);
  // Explicit values are kept whatever the model.
  EXPECT_EQ(Resolve(**f16, "float32"), DType::kF32);
  EXPECT_EQ(Resolve(**f32, "float16"), DType::kF16);
  // A backend whose cache holds float32 only (CUDA's today): auto stays float32 there.
  kernels::BackendCaps f32_only = kernels::CpuBackend().caps();
  f32_only.kv_cache_dtypes = {DType::kF32};
  EXPECT_EQ(Resolve(**f16, "auto", f32_only), DType::kF32);
  EXPECT_EQ(Resolve(**q8, "auto", f32_only), DType::kF32);

  EngineSection e;
  EXPECT_EQ(KvCacheDtypeLogName(e, DType::kF16), "float16 (auto)");
  e.kv_cache_dtype = "float32";
  EXPECT_EQ(KvCacheDtypeLogName(e, DType::kF32), "float32");
}

// The engine sizes and allocates the cache in the resolved type: with auto, the same bytes of an
// F16 model's cache hold twice the blocks of a float32 one.
TEST(KvCacheDtype, TheEngineSizesTheResolvedCache) {
  REQUIRE_FILE(Llama("llama-f16.gguf"));
  auto w = LoadModelWeights(Llama("llama-f16.gguf"), LoadFormat::kGguf);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EngineConfig cfg;
  cfg.kv_cache_bytes = 1 << 20;
  auto half = Engine::Create(**w, cfg);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_EQ((*half)->kv_cache_dtype(), DType::kF16);
  cfg.kv_cache_dtype = "float32";
  auto full = Engine::Create(**w, cfg);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ((*full)->kv_cache_dtype(), DType::kF32);
  const ModelConfig& mc = (*w)->config;
  const int64_t f32_block = 2LL * 4 * cfg.block_size * mc.kv_dim() * mc.num_layers;
  EXPECT_EQ((*full)->stats().blocks_total, (1 << 20) / f32_block);
  EXPECT_EQ((*half)->stats().blocks_total, (1 << 20) / (f32_block / 2));
}

}  // namespace
}  // namespace llm
