// Gemma 3 (Gemma3ForCausalLM): there is no shared golden for it, so the test builds its own.
// gemma3_model.h writes a small random-weight model (fixed seed) as an F32 safetensors folder,
// and gemma3_reference.h runs a naive float64 forward pass written from transformers'
// modeling_gemma3.py. The engine must give the reference's greedy ids exactly and every logit
// (all 512, at every prompt position and every decode step) within 1e-3, on prompts of 5, 12
// and 21 tokens (sliding window 4) plus 8 greedy steps.
//
// Why the reference can be trusted: ReferenceMatchesSharedGemma2 runs the same reference code
// on the shared gemma2 model (whose float64 NumPy reference was cross-checked against
// llama.cpp) and reproduces its greedy ids and every stored logit to the 7 significant digits
// it is stored with. Gemma 2 exercises the 1 + w norms, the embedding scale, GELU-tanh,
// query_pre_attn_scalar, both soft-caps, the sandwich norms, the sliding window and GQA; what
// Gemma 3 adds (q/k norms, the layer pattern, the local RoPE base, linear scaling on global
// layers) is checked by hand in ReferenceGemma3Rules.
#include <cmath>
#include <cstdio>

#include "common/model_config.h"
#include "tests/golden/gemma3_model.h"
#include "tests/golden/gemma3_reference.h"
#include "tests/golden/golden_util.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;
using reference::GemmaReference;

constexpr double kTolerance = 1e-3;  // engine (float32) vs reference (float64)
constexpr int kSteps = 8;            // greedy tokens per prompt

TEST(Gemma3Reference, ReferenceMatchesSharedGemma2) {
  LLM_REQUIRE_SHARED("golden/families/gemma2/reference.json");
  const std::string dir = SharedPath("golden/families/gemma2/hf");
  const auto config = reference::GemmaRefConfigFromJson(ReadJson(dir + "/config.json"));
  EXPECT_EQ(config.sliding, (std::vector<bool>{true, false, true}));
  const auto tensors = ReadSafetensorsF32(dir + "/model.safetensors");
  const GemmaReference ref(config, &tensors);
  ExpectReferenceMatchesSharedGolden(ref, "gemma2");
}

// The Gemma 3 rules of the reference, by hand against transformers' Gemma3TextConfig and
// Gemma3RotaryEmbedding: the layer pattern, the two RoPE bases, linear scaling on full layers
// only, and the (1 + w) q/k norm.
TEST(Gemma3Reference, ReferenceGemma3Rules) {
  const TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kPattern);
  auto c = reference::GemmaRefConfigFromJson(m.config);
  EXPECT_EQ(c.sliding, (std::vector<bool>{true, false, true, false}));
  const GemmaReference ref(c, &m.tensors);
  for (int i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ(ref.InvFreq(0)[i], std::pow(10000.0, -i / 8.0));
    EXPECT_DOUBLE_EQ(ref.InvFreq(1)[i], std::pow(1e6, -i / 8.0) / 2);
  }
  const reference::Vec n = ref.RmsNorm({3.0, 4.0}, {0.5, -0.5});  // rms = sqrt(12.5)
  EXPECT_NEAR(n[0], 3.0 / std::sqrt(12.5 + 1e-6) * 1.5, 1e-12);
  EXPECT_NEAR(n[1], 4.0 / std::sqrt(12.5 + 1e-6) * 0.5, 1e-12);
  // sliding_window_pattern 6 (the default): layers 5, 11 global.
  nlohmann::json j = m.config;
  j.erase("sliding_window_pattern");
  j["num_hidden_layers"] = 12;
  c = reference::GemmaRefConfigFromJson(j);
  for (int l = 0; l < 12; ++l) EXPECT_EQ(c.sliding[l], l != 5 && l != 11) << l;
  c = reference::GemmaRefConfigFromJson(MakeTinyGemma3(1, Gemma3Variant::kLayerTypes).config);
  EXPECT_EQ(c.sliding, (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(c.attn_softcap, 20.0);
  EXPECT_EQ(c.final_softcap, 15.0);
}

// The golden is sensitive to every Gemma 3 rule: the reference with any one of them dropped
// (no sliding window, one RoPE base for all layers, no linear scaling, no q/k norms) moves some
// logit of the test prompts by far more than the tolerance.
TEST(Gemma3Reference, EveryRuleMovesTheLogits) {
  const TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kPattern);
  const reference::GemmaRefConfig c = reference::GemmaRefConfigFromJson(m.config);
  const GemmaReference ref(c, &m.tensors);
  const std::vector<int32_t> prompt = StoriesPrompts().back();
  const std::vector<reference::Vec> want = ref.Forward(prompt);
  auto moved = [&](const reference::GemmaRefConfig& other) {
    const std::vector<reference::Vec> got = GemmaReference(other, &m.tensors).Forward(prompt);
    double d = 0;
    for (size_t p = 0; p < got.size(); ++p) {
      for (size_t v = 0; v < got[p].size(); ++v) d = std::max(d, std::fabs(got[p][v] - want[p][v]));
    }
    return d;
  };
  reference::GemmaRefConfig x = c;
  x.window = 0;
  EXPECT_GT(moved(x), 100 * kTolerance) << "sliding window";
  x = c;
  x.local_theta = c.theta;
  EXPECT_GT(moved(x), 100 * kTolerance) << "local RoPE base";
  x = c;
  x.linear_factor = 1;
  EXPECT_GT(moved(x), 100 * kTolerance) << "linear scaling";
  x = c;
  x.qk_norm = false;
  EXPECT_GT(moved(x), 100 * kTolerance) << "q/k norms";
}

fs::path TempModelPath(const std::string& name) {
  return fs::temp_directory_path() / ("llm_gemma3_" + std::to_string(getpid()) + "_" + name);
}

// Loads `path` (a folder or a .gguf) and runs every prompt against the reference of `m`.
void ExpectEngineMatchesReference(const std::string& path, const TinyGemma3& m,
                                  const std::vector<int>& want_window, const std::string& name) {
  auto weights = LoadModelWeights(path, LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const ModelConfig& cfg = (*weights)->config;
  EXPECT_EQ(cfg.arch, ModelArch::kGemma3);
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_TRUE(cfg.sandwich_norms);
  EXPECT_EQ(cfg.layer_sliding_window, want_window);
  for (size_t l = 0; l < want_window.size(); ++l) {
    EXPECT_EQ(cfg.layer_uses_local_rope(static_cast<int>(l)), want_window[l] > 0) << l;
  }
  auto exec = RankExecutor::Create(**weights);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();

  const GemmaReference ref(reference::GemmaRefConfigFromJson(m.config), &m.tensors);
  const GreedyComparison r =
      ExpectEngineMatchesGreedy(**exec, ref, StoriesPrompts(), kSteps, kTolerance);
  // The comparison means something only if no greedy choice is a near-tie.
  EXPECT_GT(r.min_margin, 50 * kTolerance);
  std::printf("[ gemma3 %s ] max |engine - reference| = %.3g, min greedy margin %.3g\n",
              name.c_str(), r.max_diff, r.min_margin);
}

class Gemma3Golden : public ::testing::TestWithParam<Gemma3Variant> {};

TEST_P(Gemma3Golden, EngineMatchesReference) {
  const bool pattern = GetParam() == Gemma3Variant::kPattern;
  const TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, GetParam());
  const fs::path dir = TempModelPath(pattern ? "pattern" : "layer_types");
  m.Write(dir, SharedPath("models/stories260K"));
  ExpectEngineMatchesReference(
      dir.string(), m, pattern ? std::vector<int>{4, 0, 4, 0} : std::vector<int>{4, 0, 4, 4},
      pattern ? "sliding_window_pattern" : "layer_types+softcaps");
  fs::remove_all(dir);
}

// The 6-layer variant as an F32 GGUF in llama.cpp's gemma3 layout (written here: llama.cpp's
// converter is not available to the tests), config and weights from the file alone; the same
// model from its folder first.
TEST(Gemma3Gguf, F32GgufMatchesReference) {
  const TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kGguf);
  const std::vector<int> window = {4, 4, 4, 4, 4, 0};
  const fs::path dir = TempModelPath("gguf_hf");
  m.Write(dir, SharedPath("models/stories260K"));
  ExpectEngineMatchesReference(dir.string(), m, window, "pattern 6 hf");
  fs::remove_all(dir);
  const fs::path path = TempModelPath("m.gguf");
  WriteTinyGemma3Gguf(m, path.string());
  ExpectEngineMatchesReference(path.string(), m, window, "pattern 6 gguf");
  fs::remove(path);
}

// The multimodal checkpoints (Gemma3ForConditionalGeneration: gemma-3-4b/12b/27b) serve their
// language model: the same weights under both layouts, tied and untied, give the reference's
// output; the vision tower and projector are skipped, not reported as unexpected.
TEST(Gemma3Multimodal, LanguageModelMatchesReference) {
  for (const auto layout : {MultimodalLayout::kPublished, MultimodalLayout::kTransformers452}) {
    for (const bool untied : {false, true}) {
      TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kPattern);
      const TinyModel mm = AsGemma3Multimodal(m, layout, untied);
      const std::string name =
          std::string(layout == MultimodalLayout::kPublished ? "multimodal published"
                                                             : "multimodal transformers-4.52") +
          (untied ? " untied" : " tied");
      SCOPED_TRACE(name);
      const fs::path dir = TempModelPath("multimodal");
      mm.Write(dir, SharedPath("models/stories260K"));
      auto cfg = LoadModelConfig(dir.string());
      ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
      EXPECT_EQ(cfg->architecture, "Gemma3ForConditionalGeneration");
      EXPECT_TRUE(cfg->language_model_of_multimodal);
      EXPECT_EQ(cfg->tie_word_embeddings, !untied);
      EXPECT_EQ(cfg->eos_token_ids, (std::vector<int32_t>{1, 106}));  // the top level's
      ExpectEngineMatchesReference(dir.string(), m, {4, 0, 4, 0}, name);
      fs::remove_all(dir);
    }
  }
}

// A multimodal checkpoint missing a language-model tensor names it as the files would; an
// extra language-model tensor is still reported.
TEST(Gemma3Multimodal, MissingAndUnexpectedTensorsAreNamed) {
  TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kPattern);
  TinyModel mm = AsGemma3Multimodal(m, MultimodalLayout::kPublished, false);
  const fs::path dir = TempModelPath("multimodal_bad");
  mm.files.erase("language_model.model.layers.1.mlp.up_proj.weight");
  mm.Write(dir, SharedPath("models/stories260K"));
  auto w = LoadModelWeights(dir.string(), LoadFormat::kSafetensors);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().ToString().find("language_model.model.layers.1.mlp.up_proj.weight"),
            std::string::npos)
      << w.status().ToString();

  mm = AsGemma3Multimodal(m, MultimodalLayout::kTransformers452, false);
  NormalStream rng(7);
  mm.Add(rng, "model.language_model.layers.0.self_attn.extra.weight", {4}, 0.0, 1.0);
  mm.Write(dir, SharedPath("models/stories260K"));
  w = LoadModelWeights(dir.string(), LoadFormat::kSafetensors);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().ToString().find("unexpected tensor"), std::string::npos)
      << w.status().ToString();
  fs::remove_all(dir);
}

std::string VariantName(const ::testing::TestParamInfo<Gemma3Variant>& p) {
  return p.param == Gemma3Variant::kPattern ? "Pattern" : "LayerTypes";
}

INSTANTIATE_TEST_SUITE_P(Gemma3, Gemma3Golden,
                         ::testing::Values(Gemma3Variant::kPattern, Gemma3Variant::kLayerTypes),
                         VariantName);

// How kGemma3Seed was chosen: run with --gtest_also_run_disabled_tests.
TEST(Gemma3Golden, DISABLED_SeedScan) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    double margin = 1e300;
    for (auto v : {Gemma3Variant::kPattern, Gemma3Variant::kLayerTypes, Gemma3Variant::kGguf}) {
      const TinyGemma3 m = MakeTinyGemma3(seed, v);
      const GemmaReference ref(reference::GemmaRefConfigFromJson(m.config), &m.tensors);
      for (const auto& prompt : StoriesPrompts()) {
        margin = std::min(margin, reference::ReferenceGreedy(ref, prompt, kSteps).min_margin);
      }
    }
    std::printf("seed %d: min greedy margin %.4f\n", static_cast<int>(seed), margin);
  }
}

// Config parsing follows transformers' Gemma3TextConfig.
constexpr const char* kBase = R"({"architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "vocab_size": 512)";

TEST(Gemma3Config, DefaultsFollowTransformers) {
  auto c = ParseModelConfig(std::string(kBase) + "}", "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, ModelArch::kGemma3);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->sandwich_norms);
  EXPECT_TRUE(c->norm_weight_plus_one);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->hidden_act, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(c->embedding_scale, 8.0f);
  EXPECT_EQ(c->query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c->attn_logit_softcap, 0.0);
  EXPECT_EQ(c->final_logit_softcap, 0.0);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_local_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  // sliding_window_pattern 6, sliding_window 4096: layers 5 and 11 are global.
  for (int l = 0; l < 12; ++l) {
    const bool global = l == 5 || l == 11;
    EXPECT_EQ(c->layer_sliding_window[l], global ? 0 : 4096) << l;
    EXPECT_EQ(c->layer_uses_local_rope(l), !global) << l;
  }
}

TEST(Gemma3Config, PatternLayerTypesAndRope) {
  auto c = ParseModelConfig(std::string(kBase) + R"(, "sliding_window_pattern": 3,
      "sliding_window": 512, "rope_theta": 500000, "rope_local_base_freq": 20000,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "attn_logit_softcapping": 30,
      "final_logit_softcapping": null, "query_pre_attn_scalar": 32})",
                            "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int l = 0; l < 12; ++l) EXPECT_EQ(c->layer_sliding_window[l], (l + 1) % 3 ? 512 : 0) << l;
  EXPECT_EQ(c->attn_logit_softcap, 30.0);
  EXPECT_EQ(c->final_logit_softcap, 0.0);
  EXPECT_EQ(c->query_pre_attn_scalar, 32.0);
  const std::vector<float> global = RopeInvFreq(*c), local = RopeInvFreqLocal(*c);
  ASSERT_EQ(global.size(), 8u);
  ASSERT_EQ(local.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(global[i], static_cast<float>(std::pow(500000.0, -i / 8.0) / 8.0));
    EXPECT_FLOAT_EQ(local[i], static_cast<float>(std::pow(20000.0, -i / 8.0)));
  }

  // layer_types wins over the pattern.
  std::string types = R"(, "sliding_window_pattern": 3, "layer_types": [)";
  for (int l = 0; l < 12; ++l) {
    types +=
        std::string(l ? ", " : "") + (l % 4 == 0 ? "\"full_attention\"" : "\"sliding_attention\"");
  }
  c = ParseModelConfig(std::string(kBase) + types + "]}", "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int l = 0; l < 12; ++l) EXPECT_EQ(c->layer_uses_local_rope(l), l % 4 != 0) << l;

  // transformers 5's rope_parameters, one entry per layer type.
  c = ParseModelConfig(std::string(kBase) + R"(, "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})",
                       "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 4.0);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_local_theta, 1e4);
}

// google/gemma-3-1b-it's config.json as published (transformers 4.50).
TEST(Gemma3Config, Gemma3_1BConfig) {
  auto c = ParseModelConfig(R"({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
      "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2,
      "cache_implementation": "hybrid", "eos_token_id": [1, 106], "final_logit_softcapping": null,
      "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
      "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
      "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26,
      "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256,
      "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_scaling": null,
      "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
      "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": true,
      "vocab_size": 262144})",
                            "gemma-3-1b-it/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->num_kv_heads, 1);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(c->torch_dtype, DType::kBF16);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  int global = 0;
  for (int l = 0; l < 26; ++l) {
    EXPECT_EQ(c->layer_sliding_window[l], (l + 1) % 6 ? 512 : 0) << l;
    global += c->layer_sliding_window[l] == 0;
  }
  EXPECT_EQ(global, 4);  // layers 5, 11, 17, 23
}

TEST(Gemma3Config, ErrorsNameTheKey) {
  auto bad = ParseModelConfig(std::string(kBase) + R"(, "layer_types": ["full_attention"]})", "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("layer_types"), std::string::npos);
  bad = ParseModelConfig(std::string(kBase) + R"(, "sliding_window_pattern": 0})", "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("sliding_window_pattern"), std::string::npos);
  bad = ParseModelConfig(
      R"({"architectures": ["Gemma3ForConditionalGeneration"], "text_config": [64]})", "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("text_config"), std::string::npos);
  bad = ParseModelConfig(
      R"({"architectures": ["Gemma3ForConditionalGeneration"],
          "text_config": {"num_hidden_layers": -2}})",
      "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("num_hidden_layers"), std::string::npos);
}

// google/gemma-3-4b-it's config.json as published (transformers 4.50): text_config lists only
// what differs from Gemma3TextConfig's defaults; the eos ids and the dtype are at the top level.
TEST(Gemma3Config, Gemma3_4BMultimodalConfig) {
  auto c = ParseModelConfig(R"({"architectures": ["Gemma3ForConditionalGeneration"],
      "boi_token_index": 255999, "eoi_token_index": 256000, "eos_token_id": [1, 106],
      "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
      "model_type": "gemma3", "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
      "model_type": "gemma3_text", "num_hidden_layers": 34,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
      "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
      "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
      "patch_size": 14, "vision_use_head": false}})",
                            "gemma-3-4b-it/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, ModelArch::kGemma3);
  EXPECT_EQ(c->architecture, "Gemma3ForConditionalGeneration");
  EXPECT_TRUE(c->language_model_of_multimodal);
  EXPECT_EQ(c->hidden_size, 2560);
  EXPECT_EQ(c->intermediate_size, 10240);
  EXPECT_EQ(c->num_layers, 34);
  EXPECT_EQ(c->vocab_size, 262208);  // Gemma3TextConfig's defaults from here on
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_local_theta, 1e4);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->hidden_act, Activation::kGeluTanh);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(c->torch_dtype, DType::kBF16);
  for (int l = 0; l < 34; ++l) EXPECT_EQ(c->layer_sliding_window[l], (l + 1) % 6 ? 1024 : 0) << l;
}

}  // namespace
}  // namespace llm::testing
