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
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/gguf_writer.h"
#include "tests/golden/reference_common.h"

namespace llm::testing {

// The seed of the test models: of seeds 1-40, the one whose reference (both variants, every
// prompt, 8 greedy steps) keeps the greedy top-1 minus top-2 logit farthest from a tie (0.091;
// glm_golden_test.cc's DISABLED_SeedScan).
constexpr uint64_t kGlmSeed = 33;

// `head_dim` 16 gives heads × head_dim = hidden, as llama.cpp's chatglm needs (its converter
// writes no key_length and its graph takes q, k, v as n_embd-wide views).
inline TinyModel MakeTinyGlm(uint64_t seed, bool glm4, int head_dim = 32) {
  constexpr int kHidden = 64, kLayers = 2, kHeads = 4, kKvHeads = 2;
  constexpr int kVocab = 512, kInter = 96;
  const int kHeadDim = head_dim;
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

// How WriteTinyGlmGguf lays out q/k/v, and what it breaks (for the error tests).
struct GlmGgufOptions {
  // attn_qkv.weight / .bias = [q; k; v] (convert_hf_to_gguf.py's ChatGLMModel on THUDM's
  // ChatGLM layout, whose query_key_value it keeps); false: attn_q/k/v (GlmForCausalLM,
  // Glm4ForCausalLM).
  bool fused_qkv = false;
  std::string drop;   // a tensor left out
  std::string halve;  // a matrix written with only its first half of rows
};

// `m` (MakeTinyGlm) as an F32 GGUF the way llama.cpp's convert_hf_to_gguf.py writes it.
// GlmForCausalLM -> architecture chatglm (ChatGLMModel.set_gguf_parameters): context_length =
// seq_length or hidden_size, rope.dimension_count = int(hidden / heads × partial_rotary_factor),
// rope.freq_base = 10000 × rope_ratio (rope_theta is not read), layer_norm_rms_epsilon =
// layernorm_epsilon or 1e-5, no key_length. Glm4ForCausalLM -> glm4 (TextModel + Glm4Model):
// context_length = max_position_embeddings, key/value_length = head_dim, rope.dimension_count =
// int(head_dim × partial_rotary_factor), rope.freq_base = rope_theta, rms_norm_eps. Tensors
// (gguf-py tensor_mapping.py): token_embd, output_norm, output, blk.N.attn_norm, attn_q/k/v (+
// bias) or attn_qkv (+ bias), attn_output, ffn_norm (post_attention_layernorm), ffn_up
// (gate_up_proj, 2 × feed_forward_length rows, [gate; up]), ffn_down; glm4 adds
// post_attention_norm (post_self_attn_layernorm) and post_ffw_norm (post_mlp_layernorm). No
// tokenizer.
inline void WriteTinyGlmGguf(const TinyModel& m, const std::string& path,
                             const GlmGgufOptions& o = {}) {
  const nlohmann::json& c = m.config;
  const bool glm4 = c["architectures"][0] == "Glm4ForCausalLM";
  const std::string a = glm4 ? "glm4" : "chatglm";
  const int hidden = c["hidden_size"], heads = c["num_attention_heads"];
  const int head_dim = c["head_dim"];
  const double factor = c.value("partial_rotary_factor", 0.5);
  GgufWriter w;
  w.Str("general.architecture", a);
  w.U32(a + ".context_length", glm4 ? c["max_position_embeddings"].get<uint32_t>() : hidden);
  w.U32(a + ".embedding_length", hidden);
  w.U32(a + ".feed_forward_length", c["intermediate_size"].get<uint32_t>());
  w.U32(a + ".block_count", c["num_hidden_layers"].get<uint32_t>());
  w.U32(a + ".attention.head_count", heads);
  w.U32(a + ".attention.head_count_kv", c["num_key_value_heads"].get<uint32_t>());
  w.F32(a + ".attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  if (glm4) {
    w.U32(a + ".attention.key_length", head_dim);
    w.U32(a + ".attention.value_length", head_dim);
    w.U32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim * factor));
    w.F32(a + ".rope.freq_base", c["rope_theta"].get<float>());
  } else {
    w.U32(a + ".rope.dimension_count", static_cast<uint32_t>((hidden / heads) * factor));
    w.F32(a + ".rope.freq_base", 10000.0f);
    w.Bool("tokenizer.ggml.add_bos_token", false);
  }
  w.U32("tokenizer.ggml.eos_token_id", 2);
  auto put_values = [&](const std::string& gguf, std::vector<uint64_t> dims, std::vector<float> v) {
    if (gguf == o.drop) return;
    if (gguf == o.halve) {
      dims.back() /= 2;
      v.resize(v.size() / 2);
    }
    w.TensorF32(gguf, dims, v);
  };
  auto put = [&](const std::string& gguf, const std::string& hf) {
    const FakeTensor& t = m.files.at(hf);
    put_values(gguf, std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()), t.values);
  };
  put("token_embd.weight", "model.embed_tokens.weight");
  put("output_norm.weight", "model.norm.weight");
  put("output.weight", "lm_head.weight");
  const int layers = c["num_hidden_layers"];
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    put(b + "attn_norm.weight", p + "input_layernorm.weight");
    if (o.fused_qkv) {
      for (const char* kind : {"weight", "bias"}) {
        std::vector<float> v;
        uint64_t rows = 0;
        for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
          const FakeTensor& t = m.files.at(p + "self_attn." + proj + "." + kind);
          v.insert(v.end(), t.values.begin(), t.values.end());
          rows += t.shape[0];
        }
        put_values(b + "attn_qkv." + kind,
                   std::string(kind) == "weight" ? std::vector<uint64_t>{uint64_t(hidden), rows}
                                                 : std::vector<uint64_t>{rows},
                   v);
      }
    } else {
      for (const char* proj : {"q", "k", "v"}) {
        for (const char* kind : {"weight", "bias"}) {
          put(b + "attn_" + proj + "." + kind,
              p + "self_attn." + proj + "_proj." + std::string(kind));
        }
      }
    }
    put(b + "attn_output.weight", p + "self_attn.o_proj.weight");
    put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight");
    put(b + "ffn_up.weight", p + "mlp.gate_up_proj.weight");
    put(b + "ffn_down.weight", p + "mlp.down_proj.weight");
    if (glm4) {
      put(b + "post_attention_norm.weight", p + "post_self_attn_layernorm.weight");
      put(b + "post_ffw_norm.weight", p + "post_mlp_layernorm.weight");
    }
  }
  w.Write(path);
}

}  // namespace llm::testing
