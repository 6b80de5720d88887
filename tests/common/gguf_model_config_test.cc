// ModelConfigFromGguf: the golden families' GGUF metadata gives the config of their hf/
// config.json, and bad or unsupported metadata is an error naming the file and the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/gguf.h"
#include "common/model_config.h"
#include "tests/common/gguf_writer.h"
#include "tests/common/llama3_rope.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& rel) {
  return (fs::path(LLM_SHARED_DIR) / rel).string();
}

TEST(GgufModelConfig, FamiliesMatchTheirConfigJson) {
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3"}) {
    const std::string dir = Shared(std::string("golden/families/") + family);
    const std::string path = dir + "/" + family + ".gguf";
    if (!fs::exists(path)) GTEST_SKIP() << "missing shared test data: " << path;
    auto hf = LoadModelConfig(dir + "/hf");
    auto gg = LoadModelConfig(path);
    ASSERT_TRUE(hf.ok()) << hf.status().ToString();
    ASSERT_TRUE(gg.ok()) << gg.status().ToString();
    const ModelConfig& a = *hf;
    const ModelConfig& b = *gg;
    SCOPED_TRACE(family);
    EXPECT_EQ(b.architecture, a.architecture);
    EXPECT_EQ(b.arch, a.arch);
    EXPECT_EQ(b.hidden_size, a.hidden_size);
    EXPECT_EQ(b.intermediate_size, a.intermediate_size);
    EXPECT_EQ(b.num_layers, a.num_layers);
    EXPECT_EQ(b.num_heads, a.num_heads);
    EXPECT_EQ(b.num_kv_heads, a.num_kv_heads);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.vocab_size, a.vocab_size);
    EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
    EXPECT_FLOAT_EQ(static_cast<float>(b.rms_norm_eps), static_cast<float>(a.rms_norm_eps));
    EXPECT_EQ(b.rope_theta, a.rope_theta);
    EXPECT_EQ(b.qkv_bias, a.qkv_bias);
    EXPECT_EQ(b.o_bias, a.o_bias);
    EXPECT_EQ(b.mlp_bias, a.mlp_bias);
    EXPECT_EQ(b.qk_norm, a.qk_norm);
    EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
    EXPECT_EQ(b.layer_sliding_window, a.layer_sliding_window);
    EXPECT_EQ(b.bos_token_ids, a.bos_token_ids);
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
    EXPECT_EQ(RopeInvFreq(b), RopeInvFreq(a));
  }
}

// A minimal llama GGUF's metadata; `edit` changes it before writing.
Status Load(const std::function<void(GgufWriter&)>& edit, bool base = true) {
  GgufWriter w;
  if (base) {
    w.Str("general.architecture", "llama");
    w.U32("llama.block_count", 2);
    w.U32("llama.embedding_length", 64);
    w.U32("llama.feed_forward_length", 128);
    w.U32("llama.attention.head_count", 4);
    w.F32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.StrArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  }
  edit(w);
  const std::string bytes = w.Build();
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size(), "m.gguf");
  if (!f.ok()) return f.status();
  return ModelConfigFromGguf(**f).status();
}

TEST(GgufModelConfig, DefaultsAndErrors) {
  EXPECT_TRUE(Load([](GgufWriter&) {}).ok());
  const struct {
    std::function<void(GgufWriter&)> edit;
    bool base;
    const char* message;
  } cases[] = {
      {[](GgufWriter&) {}, false, "m.gguf: missing key 'general.architecture'"},
      {[](GgufWriter& w) { w.Str("general.architecture", "gpt2"); }, false,
       "general.architecture 'gpt2' is not supported (supported: llama, qwen2, qwen3, gemma, "
       "gemma2, gemma3, phi3, qwen2moe, qwen3moe, chatglm, glm4)"},
      {[](GgufWriter& w) { w.U32("llama.expert_count", 8); }, true,
       "missing key 'llama.expert_used_count'"},
      {[](GgufWriter& w) { w.U32("llama.rope.dimension_count", 8); }, true,
       "key 'llama.rope.dimension_count' = 8 rotates part of each head"},
      {[](GgufWriter& w) { w.Str("llama.rope.scaling.type", "yarn"); }, true,
       "key 'llama.rope.scaling.type' = 'yarn' is not supported"},
      {[](GgufWriter& w) {
         w.I32Array("llama.attention.head_count_kv", {4, 2});
       },
       true, "key 'llama.attention.head_count_kv' differs between layers"},
      {[](GgufWriter& w) { w.U32("llama.attention.head_count_kv", 3); }, true,
       "head_count (4) is not a multiple of head_count_kv (3)"},
      {[](GgufWriter& w) { w.Str("llama.context_length", "long"); }, true,
       "key 'llama.context_length' must be an integer"},
      {[](GgufWriter& w) { w.U32("llama.attention.value_length", 8); }, true,
       "attention.value_length 8 differs from attention.key_length 16"},
      {[](GgufWriter& w) { w.U32("tokenizer.ggml.bos_token_id", 7); }, true,
       "key 'tokenizer.ggml.bos_token_id' = 7 is outside the vocabulary of 3"},
      {[](GgufWriter& w) { w.TensorF32("rope_freqs.weight", {8}, std::vector<float>(8)); }, true,
       "tensor 'rope_freqs.weight' holds a factor that is not positive"},
      {[](GgufWriter& w) { w.TensorF32("rope_freqs.weight", {4}, std::vector<float>(4, 1)); }, true,
       "tensor 'rope_freqs.weight' must be F32 [rope dimension / 2 = 8]"},
      {[](GgufWriter& w) {
         w.Str("llama.rope.scaling.type", "linear");
         w.F32("llama.rope.scaling.factor", 2);
         w.TensorF32("rope_freqs.weight", {8}, std::vector<float>(8, 1));
       },
       true, "tensor 'rope_freqs.weight' together with llama.rope.scaling.type"},
  };
  for (const auto& c : cases) {
    const Status s = Load(c.edit, c.base);
    EXPECT_FALSE(s.ok()) << c.message;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.ToString();
  }
  // Missing required keys are named.
  for (const char* key : {"block_count", "embedding_length", "feed_forward_length",
                          "attention.head_count", "attention.layer_norm_rms_epsilon"}) {
    GgufWriter w;
    w.Str("general.architecture", "qwen2");
    for (const char* k :
         {"block_count", "embedding_length", "feed_forward_length", "attention.head_count"}) {
      if (std::string(k) != key) {
        w.U32(std::string("qwen2.") + k, std::string(k) == "attention.head_count" ? 4 : 64);
      }
    }
    if (std::string(key) != "attention.layer_norm_rms_epsilon") {
      w.F32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    }
    const std::string bytes = w.Build();
    auto f = GgufFile::FromMemory(bytes.data(), bytes.size(), "m.gguf");
    ASSERT_TRUE(f.ok());
    const Status s = ModelConfigFromGguf(**f).status();
    EXPECT_NE(s.message().find(std::string("missing key 'qwen2.") + key + "'"), std::string::npos)
        << s.ToString();
  }
}

// Llama 3.1's "llama3" rope scaling as llama.cpp's converter stores it (rope_freqs.weight, the
// factors by its formula from convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors, in
// float32 as torch computes the frequencies there) gives the inv_freq of transformers'
// _compute_llama3_parameters for Llama-3.1-8B: values computed with transformers (the same as
// model_loading_test.cc's for the config.json path).
TEST(GgufModelConfig, Llama31RopeFreqsGiveTransformersInvFreq) {
  const float base = 500000.0f;
  const int dim = 128;
  const std::vector<float> factors = ConverterLlama3RopeFactors(base, dim, 8, 1, 4, 8192);
  GgufWriter w;
  w.Str("general.architecture", "llama");
  w.U32("llama.block_count", 32);
  w.U32("llama.embedding_length", 4096);
  w.U32("llama.feed_forward_length", 14336);
  w.U32("llama.attention.head_count", 32);
  w.U32("llama.attention.head_count_kv", 8);
  w.F32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.F32("llama.rope.freq_base", base);
  w.StrArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.TensorF32("rope_freqs.weight", {factors.size()}, factors);
  const std::string bytes = w.Build();
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size(), "llama31.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto c = ModelConfigFromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kFreqFactors);
  const std::vector<float> inv = RopeInvFreq(*c);
  ExpectLlama31InvFreq(inv);
}

}  // namespace
}  // namespace llm::testing
