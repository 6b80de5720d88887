// Small random-weight GLM-4 models written at test time as F32 safetensors folders
// (TinyModel::Write), for the reference of tests/golden/glm_reference.h: GlmForCausalLM (model_type
// "glm", as THUDM/glm-4-9b-chat-hf) and Glm4ForCausalLM (model_type "glm4", GLM-4-0414, with
// post_self_attn_layernorm and post_mlp_layernorm). Used by glm_golden_test.cc and, under
// mpirun, by tests/mpi/tp_golden_test.cc.
//
// The model: hidden 64, 2 layers, 4 query / 2 KV heads of head_dim 32 (4 × 32 ≠ 64),
// partial_rotary_factor 0.5 (the first 16 lanes of each head rotate, interleaved), q/k/v biases
// (attention_bias), fused gate_up_proj of intermediate 96, untied lm_head, θ = 1e4, vocab 512
// (the stories260K tokenizer, copied into the folder when present). Weights: projections
// N(0, 0.25²), biases N(0, 0.5²), embeddings and lm_head N(0, 0.5²), norms 1 + N(0, 0.1²).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/golden/reference_common.h"

namespace llm::testing {

// The seed of the test models: of seeds 1-40, the one whose reference (both variants, every
// prompt, 8 greedy steps) keeps the greedy top-1 minus top-2 logit farthest from a tie (0.091;
// glm_golden_test.cc's DISABLED_SeedScan).
constexpr uint64_t kGlmSeed = 33;

inline TinyModel MakeTinyGlm(uint64_t seed, bool glm4) {
  constexpr int kHidden = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 32;
  constexpr int kVocab = 512, kInter = 96;
  TinyModel m;
  m.config = {{"architectures", {glm4 ? "Glm4ForCausalLM" : "GlmForCausalLM"}},
              {"model_type", glm4 ? "glm4" : "glm"},
              {"attention_bias", true},
              {"bos_token_id", 1},
              {"eos_token_id", {2}},
              {"head_dim", kHeadDim},
              {"hidden_act", "silu"},
              {"hidden_size", kHidden},
              {"intermediate_size", kInter},
              {"max_position_embeddings", 512},
              {"num_attention_heads", kHeads},
              {"num_hidden_layers", kLayers},
              {"num_key_value_heads", kKvHeads},
              {"partial_rotary_factor", 0.5},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", false},
              {"torch_dtype", "float32"},
              {"vocab_size", kVocab}};
  NormalStream rng(seed);
  m.Add(rng, "model.embed_tokens.weight", {kVocab, kHidden}, 0, 0.5);
  m.Add(rng, "lm_head.weight", {kVocab, kHidden}, 0, 0.5);
  m.Add(rng, "model.norm.weight", {kHidden}, 1, 0.1);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m.Add(rng, p + "input_layernorm.weight", {kHidden}, 1, 0.1);
    m.Add(rng, p + "post_attention_layernorm.weight", {kHidden}, 1, 0.1);
    if (glm4) {
      m.Add(rng, p + "post_self_attn_layernorm.weight", {kHidden}, 1, 0.1);
      m.Add(rng, p + "post_mlp_layernorm.weight", {kHidden}, 1, 0.1);
    }
    const std::pair<const char*, int> projections[] = {{"q_proj", kHeads * kHeadDim},
                                                       {"k_proj", kKvHeads * kHeadDim},
                                                       {"v_proj", kKvHeads * kHeadDim}};
    for (const auto& [name, rows] : projections) {
      m.Add(rng, p + "self_attn." + name + ".weight", {rows, kHidden}, 0, 0.25);
      m.Add(rng, p + "self_attn." + name + ".bias", {rows}, 0, 0.5);
    }
    m.Add(rng, p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, 0, 0.25);
    m.Add(rng, p + "mlp.gate_up_proj.weight", {2 * kInter, kHidden}, 0, 0.25);
    m.Add(rng, p + "mlp.down_proj.weight", {kHidden, kInter}, 0, 0.25);
  }
  return m;
}

}  // namespace llm::testing
