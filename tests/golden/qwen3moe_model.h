// A small random-weight Qwen3-MoE model (Qwen3MoeForCausalLM) written at test time as an F32
// safetensors folder (TinyModel::Write), for the reference of tests/golden/qwen3moe_reference.h.
// Used by qwen3moe_golden_test.cc and, under mpirun, by tests/mpi/tp_golden_test.cc.
//
// The model: hidden 64, 2 layers, 4 query / 2 KV heads of head_dim 32 (4 × 32 = 128 ≠ 64),
// 8 experts of moe_intermediate_size 32, top-2 renormalized (norm_topk_prob true), no shared
// expert, q/k norms, tied embeddings, θ = 1e6, vocab 512 (the stories260K tokenizer of
// ../shared/models/stories260K, copied into the folder when present). With dense_layer >= 0
// that layer is listed in mlp_only_layers and is a dense SwiGLU MLP of intermediate_size 96.
// Weights follow the scales of ../shared/golden/families (projections N(0, 0.25²),
// embeddings and routers N(0, 0.5²), norms 1 + N(0, 0.1²)), drawn from SplitMix64 +
// Box-Muller so every platform writes the same bytes for a seed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/gguf_writer.h"
#include "tests/golden/qwen3moe_reference.h"

namespace llm::testing {

// The stories260K ids (BOS included) of "Once upon a time" and "Lily and Tom went to the park",
// the two prompts of ../shared/golden/families.
inline std::vector<std::vector<int32_t>> Qwen3MoePrompts() {
  return {{1, 403, 407, 261, 378}, {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433}};
}

// The seed of the test model: of seeds 1-399, the one whose reference (both variants, both
// prompts, 8 greedy steps) stays farthest from ties: greedy top-1 minus top-2 logit >= 0.068
// and the k-th minus (k+1)-th router probability >= 1.5e-3 on every token and sparse layer.
constexpr uint64_t kQwen3MoeSeed = 39;

using TinyQwen3Moe = TinyModel;

inline TinyQwen3Moe MakeTinyQwen3Moe(uint64_t seed, int dense_layer = -1) {
  constexpr int kHidden = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 32;
  constexpr int kVocab = 512, kExperts = 8, kMoeInter = 32, kInter = 96;
  TinyQwen3Moe m;
  m.config = {
      {"architectures", {"Qwen3MoeForCausalLM"}},
      {"model_type", "qwen3_moe"},
      {"attention_bias", false},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"decoder_sparse_step", 1},
      {"head_dim", kHeadDim},
      {"hidden_act", "silu"},
      {"hidden_size", kHidden},
      {"intermediate_size", kInter},
      {"max_position_embeddings", 512},
      {"max_window_layers", kLayers},
      {"mlp_only_layers", dense_layer >= 0 ? std::vector<int>{dense_layer} : std::vector<int>{}},
      {"moe_intermediate_size", kMoeInter},
      {"norm_topk_prob", true},
      {"num_attention_heads", kHeads},
      {"num_experts", kExperts},
      {"num_experts_per_tok", 2},
      {"num_hidden_layers", kLayers},
      {"num_key_value_heads", kKvHeads},
      {"rms_norm_eps", 1e-6},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000.0},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
      {"use_sliding_window", false},
      {"vocab_size", kVocab}};
  NormalStream rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double mean, double std) {
    m.Add(rng, name, std::move(shape), mean, std);
  };
  add("model.embed_tokens.weight", {kVocab, kHidden}, 0, 0.5);
  add("model.norm.weight", {kHidden}, 1, 0.1);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kHidden}, 1, 0.1);
    add(p + "post_attention_layernorm.weight", {kHidden}, 1, 0.1);
    add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, 0, 0.25);
    add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0, 0.25);
    add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0, 0.25);
    add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, 0, 0.25);
    add(p + "self_attn.q_norm.weight", {kHeadDim}, 1, 0.1);
    add(p + "self_attn.k_norm.weight", {kHeadDim}, 1, 0.1);
    if (l == dense_layer) {
      add(p + "mlp.gate_proj.weight", {kInter, kHidden}, 0, 0.25);
      add(p + "mlp.up_proj.weight", {kInter, kHidden}, 0, 0.25);
      add(p + "mlp.down_proj.weight", {kHidden, kInter}, 0, 0.25);
      continue;
    }
    add(p + "mlp.gate.weight", {kExperts, kHidden}, 0, 0.5);
    for (int e = 0; e < kExperts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      add(x + "gate_proj.weight", {kMoeInter, kHidden}, 0, 0.25);
      add(x + "up_proj.weight", {kMoeInter, kHidden}, 0, 0.25);
      add(x + "down_proj.weight", {kHidden, kMoeInter}, 0, 0.25);
    }
  }
  return m;
}

// `m` (every layer sparse: llama.cpp's qwen3moe has no dense layers) as an F32 GGUF in
// llama.cpp's layout: arch qwen3moe, blk.N.attn_{q,k,v,output}, attn_{q,k}_norm,
// ffn_gate_inp (the router) and the experts stacked in ffn_{gate,up,down}_exps
// (GGML dims [cols, rows, experts]); no output.weight (tied). No tokenizer.
inline void WriteTinyQwen3MoeGguf(const TinyQwen3Moe& m, const std::string& path) {
  const nlohmann::json& c = m.config;
  GgufWriter w;
  w.Str("general.architecture", "qwen3moe");
  w.U32("qwen3moe.embedding_length", c["hidden_size"].get<uint32_t>());
  w.U32("qwen3moe.feed_forward_length", c["intermediate_size"].get<uint32_t>());
  w.U32("qwen3moe.block_count", c["num_hidden_layers"].get<uint32_t>());
  w.U32("qwen3moe.attention.head_count", c["num_attention_heads"].get<uint32_t>());
  w.U32("qwen3moe.attention.head_count_kv", c["num_key_value_heads"].get<uint32_t>());
  w.U32("qwen3moe.attention.key_length", c["head_dim"].get<uint32_t>());
  w.U32("qwen3moe.attention.value_length", c["head_dim"].get<uint32_t>());
  w.U32("qwen3moe.context_length", c["max_position_embeddings"].get<uint32_t>());
  w.F32("qwen3moe.attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  w.F32("qwen3moe.rope.freq_base", c["rope_theta"].get<float>());
  w.U32("qwen3moe.expert_count", c["num_experts"].get<uint32_t>());
  w.U32("qwen3moe.expert_used_count", c["num_experts_per_tok"].get<uint32_t>());
  w.U32("qwen3moe.expert_feed_forward_length", c["moe_intermediate_size"].get<uint32_t>());
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", 2);
  auto put = [&](const std::string& gguf, const std::string& hf) {
    const FakeTensor& t = m.files.at(hf);
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    w.TensorF32(gguf, dims, t.values);
  };
  put("token_embd.weight", "model.embed_tokens.weight");
  put("output_norm.weight", "model.norm.weight");
  const int layers = c["num_hidden_layers"], experts = c["num_experts"];
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    put(b + "attn_norm.weight", p + "input_layernorm.weight");
    put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight");
    put(b + "attn_q.weight", p + "self_attn.q_proj.weight");
    put(b + "attn_k.weight", p + "self_attn.k_proj.weight");
    put(b + "attn_v.weight", p + "self_attn.v_proj.weight");
    put(b + "attn_output.weight", p + "self_attn.o_proj.weight");
    put(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight");
    put(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight");
    put(b + "ffn_gate_inp.weight", p + "mlp.gate.weight");
    for (const char* part : {"gate", "up", "down"}) {
      std::vector<float> stacked;
      std::vector<int64_t> shape;
      for (int e = 0; e < experts; ++e) {
        const FakeTensor& t =
            m.files.at(p + "mlp.experts." + std::to_string(e) + "." + part + "_proj.weight");
        stacked.insert(stacked.end(), t.values.begin(), t.values.end());
        shape = t.shape;
      }
      w.TensorF32(b + "ffn_" + part + "_exps.weight",
                  {static_cast<uint64_t>(shape[1]), static_cast<uint64_t>(shape[0]),
                   static_cast<uint64_t>(experts)},
                  stacked);
    }
  }
  w.Write(path);
}

}  // namespace llm::testing
