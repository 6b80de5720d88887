// A small random-weight Phi-3 model with LongRoPE (Phi3ForCausalLM, rope_scaling type
// "longrope"), written at test time as an F32 safetensors folder (TinyModel::Write) or as an F32
// GGUF in llama.cpp's phi3 layout, for the reference of tests/golden/phi3_reference.h. Used by
// phi3_longrope_golden_test.cc and, under mpirun, by tests/mpi/tp_golden_test.cc.
//
// The model: hidden 64, 2 layers, 4 query / 2 KV heads of head_dim 16, intermediate 96, fused
// qkv_proj and gate_up_proj, untied lm_head, θ = 1e4, vocab 512 (the stories260K tokenizer,
// copied into the folder when present). original_max_position_embeddings 32 and
// max_position_embeddings 128 (factor 4, so the default attention_factor is
// sqrt(1 + ln 4 / ln 32) ≈ 1.183); short factors 1 + 0.1 i, long factors 1.6^i (i < 8). The
// prompts (Phi3Prompts) stay short, cross 32 while decoding, and start long.
// Weights: projections N(0, 0.25²), embeddings and lm_head N(0, 0.5²), norms 1 + N(0, 0.1²).
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/gguf_writer.h"
#include "tests/golden/reference_common.h"

namespace llm::testing {

// Prompts (stories260K ids) of 12 tokens (every position short, 8 greedy steps included), 28
// (the prompt short, its decode steps from length 33 on long) and 40 (long from the start).
inline std::vector<std::vector<int32_t>> Phi3Prompts() {
  const std::vector<int32_t> base = {1,   403, 407, 261, 378, 317, 269, 274, 287, 263,
                                     377, 267, 265, 282, 295, 433, 403, 407, 261, 378};
  std::vector<int32_t> p28 = base, p40 = base;
  for (int i = 0; i < 8; ++i) p28.push_back(300 + 7 * i);
  for (int i = 0; i < 20; ++i) p40.push_back(270 + 11 * i);
  return {{base.begin(), base.begin() + 12}, p28, p40};
}

constexpr uint64_t kPhi3Seed = 7;

// `attention_factor` < 0: the key is absent (transformers' default applies).
// `partial_rotary_factor` < 1 (Phi-4-mini: 0.75) sets that key: RoPE on the first
// int(16 × factor) lanes of each head, with that / 2 factors of each kind (same weights).
inline TinyModel MakeTinyPhi3(uint64_t seed, double attention_factor = -1,
                              double partial_rotary_factor = 1.0) {
  constexpr int kHidden = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 16;
  constexpr int kVocab = 512, kInter = 96;
  const int rotary_dim = static_cast<int>(kHeadDim * partial_rotary_factor);
  std::vector<double> short_factor, long_factor;
  for (int i = 0; i < rotary_dim / 2; ++i) {
    short_factor.push_back(1.0 + 0.1 * i);
    long_factor.push_back(std::pow(1.6, i));
  }
  nlohmann::json rope = {
      {"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}};
  if (attention_factor >= 0) rope["attention_factor"] = attention_factor;
  TinyModel m;
  m.config = {{"architectures", {"Phi3ForCausalLM"}},
              {"model_type", "phi3"},
              {"bos_token_id", 1},
              {"eos_token_id", 2},
              {"hidden_act", "silu"},
              {"hidden_size", kHidden},
              {"intermediate_size", kInter},
              {"max_position_embeddings", 128},
              {"original_max_position_embeddings", 32},
              {"num_attention_heads", kHeads},
              {"num_hidden_layers", kLayers},
              {"num_key_value_heads", kKvHeads},
              {"rms_norm_eps", 1e-5},
              {"rope_scaling", rope},
              {"rope_theta", 10000.0},
              {"sliding_window", nullptr},
              {"tie_word_embeddings", false},
              {"torch_dtype", "float32"},
              {"vocab_size", kVocab}};
  if (partial_rotary_factor != 1.0) m.config["partial_rotary_factor"] = partial_rotary_factor;
  NormalStream rng(seed);
  m.Add(rng, "model.embed_tokens.weight", {kVocab, kHidden}, 0, 0.5);
  m.Add(rng, "lm_head.weight", {kVocab, kHidden}, 0, 0.5);
  m.Add(rng, "model.norm.weight", {kHidden}, 1, 0.1);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m.Add(rng, p + "input_layernorm.weight", {kHidden}, 1, 0.1);
    m.Add(rng, p + "post_attention_layernorm.weight", {kHidden}, 1, 0.1);
    m.Add(rng, p + "self_attn.qkv_proj.weight", {(kHeads + 2 * kKvHeads) * kHeadDim, kHidden}, 0,
          0.25);
    m.Add(rng, p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, 0, 0.25);
    m.Add(rng, p + "mlp.gate_up_proj.weight", {2 * kInter, kHidden}, 0, 0.25);
    m.Add(rng, p + "mlp.down_proj.weight", {kHidden, kInter}, 0, 0.25);
  }
  return m;
}

// `m` as an F32 GGUF the way llama.cpp's convert_hf_to_gguf.py (Phi3MiniModel) writes it:
// attn_qkv and ffn_up (= [gate; up]) fused, rope_factors_{long,short}.weight,
// rope.scaling.original_context_length and rope.scaling.attn_factor (which the converter always
// computes from the lengths), rope.dimension_count from partial_rotary_factor. No tokenizer.
// `short_factors` false leaves out rope_factors_short.weight (a broken file, for the error test).
inline void WriteTinyPhi3Gguf(const TinyModel& m, const std::string& path,
                              bool short_factors = true) {
  const nlohmann::json& c = m.config;
  const int hidden = c["hidden_size"], heads = c["num_attention_heads"];
  const double max_pos = c["max_position_embeddings"], orig = c["original_max_position_embeddings"];
  const double scale = max_pos / orig;
  GgufWriter w;
  w.Str("general.architecture", "phi3");
  w.U32("phi3.embedding_length", hidden);
  w.U32("phi3.feed_forward_length", c["intermediate_size"].get<uint32_t>());
  w.U32("phi3.block_count", c["num_hidden_layers"].get<uint32_t>());
  w.U32("phi3.attention.head_count", heads);
  w.U32("phi3.attention.head_count_kv", c["num_key_value_heads"].get<uint32_t>());
  w.U32("phi3.context_length", static_cast<uint32_t>(max_pos));
  w.U32("phi3.rope.scaling.original_context_length", static_cast<uint32_t>(orig));
  w.F32("phi3.rope.scaling.attn_factor",
        static_cast<float>(scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(orig)) : 1.0));
  // Phi3MiniModel.set_gguf_parameters: int(partial_rotary_factor × hidden) // heads.
  const double rot_pct = c.value("partial_rotary_factor", 1.0);
  w.U32("phi3.rope.dimension_count", static_cast<uint32_t>(rot_pct * hidden) / heads);
  w.F32("phi3.rope.freq_base", c["rope_theta"].get<float>());
  w.F32("phi3.attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  w.U32("phi3.attention.sliding_window", 0);
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", 2);
  auto put = [&](const std::string& gguf, const std::string& hf) {
    const FakeTensor& t = m.files.at(hf);
    w.TensorF32(gguf, std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()), t.values);
  };
  for (const char* which : {"long", "short"}) {
    if (!short_factors && std::string(which) == "short") continue;
    const auto f = c["rope_scaling"][std::string(which) + "_factor"].get<std::vector<float>>();
    w.TensorF32(std::string("rope_factors_") + which + ".weight", {f.size()}, f);
  }
  put("token_embd.weight", "model.embed_tokens.weight");
  put("output.weight", "lm_head.weight");
  put("output_norm.weight", "model.norm.weight");
  const int layers = c["num_hidden_layers"];
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    put(b + "attn_norm.weight", p + "input_layernorm.weight");
    put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight");
    put(b + "attn_qkv.weight", p + "self_attn.qkv_proj.weight");
    put(b + "attn_output.weight", p + "self_attn.o_proj.weight");
    put(b + "ffn_up.weight", p + "mlp.gate_up_proj.weight");
    put(b + "ffn_down.weight", p + "mlp.down_proj.weight");
  }
  w.Write(path);
}

}  // namespace llm::testing
