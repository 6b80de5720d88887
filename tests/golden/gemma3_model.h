// A small random-weight Gemma 3 text model (Gemma3ForCausalLM, model_type gemma3_text) written
// at test time as an F32 safetensors folder, for the float64 reference of
// tests/golden/gemma3_reference.h. Used by gemma3_golden_test.cc and, under mpirun, by
// tests/mpi/tp_golden_test.cc.
//
// The model: hidden 64, 4 layers, 4 query / 2 KV heads of head_dim 16, intermediate 128,
// query_pre_attn_scalar 24 (≠ head_dim), sliding_window 4 on the sliding layers, RoPE bases
// 1e4 (sliding layers) and 1e6 with rope_scaling linear factor 2 (full layers), q/k norms, tied
// embeddings, vocab 512 (the stories260K tokenizer of ../shared/models/stories260K, copied into
// the folder when present). Variants:
//   kPattern:    sliding_window_pattern 2 (layers 0 and 2 slide, 1 and 3 are global), no
//                soft-caps (Gemma 3's defaults);
//   kLayerTypes: an explicit layer_types list (sliding, full, sliding, sliding) and both
//                soft-caps set (attention 20, final 15).
// Weights: projections N(0, 0.25²), embeddings N(0, 0.5²), RMSNorm weights N(0, 0.1²) (Gemma
// stores w and applies 1 + w), drawn from the SplitMix64 + Box-Muller stream of
// qwen3moe_model.h so every platform writes the same bytes for a seed.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/golden/gemma3_reference.h"
#include "tests/golden/qwen3moe_model.h"  // NormalStream, ReadSafetensorsF32, WriteSafetensors

namespace llm::testing {

enum class Gemma3Variant { kPattern, kLayerTypes };

// Stories260K ids: the two prompts of ../shared/golden/families (5 and 12 tokens) and a longer
// one (21 tokens); all but the first are longer than the sliding window of 4.
inline std::vector<std::vector<int32_t>> Gemma3Prompts() {
  return {{1, 403, 407, 261, 378},
          {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433},
          {1,   403, 407, 261, 378, 317, 269, 274, 287, 263, 377,
           267, 265, 282, 295, 433, 403, 407, 261, 378, 269}};
}

// The seed of the test model: of seeds 1-40, the one whose reference (both variants, every
// prompt, 8 greedy steps) keeps the greedy top-1 minus top-2 logit farthest from a tie (3.92;
// gemma3_golden_test.cc's DISABLED_SeedScan).
constexpr uint64_t kGemma3Seed = 33;

struct TinyGemma3 {
  nlohmann::json config;
  reference::RefTensors tensors;  // the stored float32 values, as double
  std::map<std::string, FakeTensor> files;
};

inline TinyGemma3 MakeTinyGemma3(uint64_t seed, Gemma3Variant variant) {
  constexpr int kHidden = 64, kLayers = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 16;
  constexpr int kVocab = 512, kInter = 128;
  TinyGemma3 m;
  m.config = {{"architectures", {"Gemma3ForCausalLM"}},
              {"model_type", "gemma3_text"},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"bos_token_id", 1},
              {"eos_token_id", 2},
              {"pad_token_id", 0},
              {"head_dim", kHeadDim},
              {"hidden_activation", "gelu_pytorch_tanh"},
              {"hidden_size", kHidden},
              {"intermediate_size", kInter},
              {"max_position_embeddings", 512},
              {"num_attention_heads", kHeads},
              {"num_hidden_layers", kLayers},
              {"num_key_value_heads", kKvHeads},
              {"query_pre_attn_scalar", 24},
              {"rms_norm_eps", 1e-6},
              {"rope_local_base_freq", 10000.0},
              {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}},
              {"rope_theta", 1000000.0},
              {"sliding_window", 4},
              {"tie_word_embeddings", true},
              {"torch_dtype", "float32"},
              {"vocab_size", kVocab}};
  if (variant == Gemma3Variant::kPattern) {
    m.config["sliding_window_pattern"] = 2;
    m.config["attn_logit_softcapping"] = nullptr;
    m.config["final_logit_softcapping"] = nullptr;
  } else {
    m.config["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                               "sliding_attention"};
    m.config["attn_logit_softcapping"] = 20.0;
    m.config["final_logit_softcapping"] = 15.0;
  }
  NormalStream rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double std) {
    FakeTensor t;
    t.shape = shape;
    int64_t n = 1;
    for (auto d : shape) n *= d;
    auto& ref = m.tensors[name];
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(std * rng.Next());
      t.values.push_back(v);
      ref.push_back(v);
    }
    m.files[name] = std::move(t);
  };
  add("model.embed_tokens.weight", {kVocab, kHidden}, 0.5);
  add("model.norm.weight", {kHidden}, 0.1);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm",
                             "pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
      add(p + norm + ".weight", {kHidden}, 0.1);
    }
    add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, 0.25);
    add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0.25);
    add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0.25);
    add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, 0.25);
    add(p + "self_attn.q_norm.weight", {kHeadDim}, 0.1);
    add(p + "self_attn.k_norm.weight", {kHeadDim}, 0.1);
    add(p + "mlp.gate_proj.weight", {kInter, kHidden}, 0.25);
    add(p + "mlp.up_proj.weight", {kInter, kHidden}, 0.25);
    add(p + "mlp.down_proj.weight", {kHidden, kInter}, 0.25);
  }
  return m;
}

// Writes `m` as config.json + model.safetensors (+ the stories260K tokenizer files found in
// `tokenizer_dir`) into a fresh folder `dir`.
inline void WriteTinyGemma3(const TinyGemma3& m, const std::filesystem::path& dir,
                            const std::filesystem::path& tokenizer_dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << m.config.dump(2);
  WriteSafetensors((dir / "model.safetensors").string(), m.files);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"}) {
    if (std::filesystem::exists(tokenizer_dir / f)) {
      std::filesystem::copy_file(tokenizer_dir / f, dir / f);
    }
  }
}

}  // namespace llm::testing
