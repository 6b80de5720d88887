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
//                soft-caps set (attention 20, final 15);
//   kGguf:       what llama.cpp's gemma3 runs, for the GGUF test: 6 layers with
//                sliding_window_pattern 6 (layer 5 global), query_pre_attn_scalar = head_dim.
// Weights: projections N(0, 0.25²), embeddings N(0, 0.5²), RMSNorm weights N(0, 0.1²) (Gemma
// stores w and applies 1 + w), drawn from the SplitMix64 + Box-Muller stream of
// reference_common.h so every platform writes the same bytes for a seed.
#pragma once

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/gguf_writer.h"
#include "tests/golden/gemma3_reference.h"
#include "tests/golden/reference_common.h"

namespace llm::testing {

enum class Gemma3Variant { kPattern, kLayerTypes, kGguf };

// The seed of the test model: of seeds 1-40, the one whose reference (all three variants,
// every prompt, 8 greedy steps) keeps the greedy top-1 minus top-2 logit farthest from a tie
// (3.85; gemma3_golden_test.cc's DISABLED_SeedScan).
constexpr uint64_t kGemma3Seed = 25;

using TinyGemma3 = TinyModel;

inline TinyGemma3 MakeTinyGemma3(uint64_t seed, Gemma3Variant variant) {
  constexpr int kHidden = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16;
  const int kLayers = variant == Gemma3Variant::kGguf ? 6 : 4;
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
  } else if (variant == Gemma3Variant::kGguf) {
    m.config["sliding_window_pattern"] = 6;
    m.config["query_pre_attn_scalar"] = kHeadDim;
  } else {
    m.config["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                               "sliding_attention"};
    m.config["attn_logit_softcapping"] = 20.0;
    m.config["final_logit_softcapping"] = 15.0;
  }
  NormalStream rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double std) {
    m.Add(rng, name, std::move(shape), 0.0, std);
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

// `m` (the kGguf variant) as an F32 GGUF in llama.cpp's gemma3 layout: norms stored as 1 + w,
// the sandwich norms as post_attention_norm / ffn_norm / post_ffw_norm, attn_{q,k}_norm, no
// output.weight (tied), rope.scaling linear; the layer pattern and the local RoPE base are not
// in the file (llama.cpp fixes them). No tokenizer.
inline void WriteTinyGemma3Gguf(const TinyGemma3& m, const std::string& path) {
  const nlohmann::json& c = m.config;
  GgufWriter w;
  w.Str("general.architecture", "gemma3");
  w.U32("gemma3.embedding_length", c["hidden_size"].get<uint32_t>());
  w.U32("gemma3.feed_forward_length", c["intermediate_size"].get<uint32_t>());
  w.U32("gemma3.block_count", c["num_hidden_layers"].get<uint32_t>());
  w.U32("gemma3.attention.head_count", c["num_attention_heads"].get<uint32_t>());
  w.U32("gemma3.attention.head_count_kv", c["num_key_value_heads"].get<uint32_t>());
  w.U32("gemma3.attention.key_length", c["head_dim"].get<uint32_t>());
  w.U32("gemma3.attention.value_length", c["head_dim"].get<uint32_t>());
  w.U32("gemma3.attention.sliding_window", c["sliding_window"].get<uint32_t>());
  w.U32("gemma3.context_length", c["max_position_embeddings"].get<uint32_t>());
  w.F32("gemma3.attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  w.F32("gemma3.rope.freq_base", c["rope_theta"].get<float>());
  w.Str("gemma3.rope.scaling.type", "linear");
  w.F32("gemma3.rope.scaling.factor", c["rope_scaling"]["factor"].get<float>());
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", 2);
  auto put = [&](const std::string& gguf, const std::string& hf, bool norm = false) {
    const FakeTensor& t = m.files.at(hf);
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    std::vector<float> v = t.values;
    if (norm) {
      for (float& x : v) x += 1.0f;  // convert_hf_to_gguf.py stores Gemma's 1 + w
    }
    w.TensorF32(gguf, dims, v);
  };
  put("token_embd.weight", "model.embed_tokens.weight");
  put("output_norm.weight", "model.norm.weight", true);
  const int layers = c["num_hidden_layers"];
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    put(b + "attn_norm.weight", p + "input_layernorm.weight", true);
    put(b + "post_attention_norm.weight", p + "post_attention_layernorm.weight", true);
    put(b + "ffn_norm.weight", p + "pre_feedforward_layernorm.weight", true);
    put(b + "post_ffw_norm.weight", p + "post_feedforward_layernorm.weight", true);
    put(b + "attn_q.weight", p + "self_attn.q_proj.weight");
    put(b + "attn_k.weight", p + "self_attn.k_proj.weight");
    put(b + "attn_v.weight", p + "self_attn.v_proj.weight");
    put(b + "attn_output.weight", p + "self_attn.o_proj.weight");
    put(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", true);
    put(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", true);
    put(b + "ffn_gate.weight", p + "mlp.gate_proj.weight");
    put(b + "ffn_up.weight", p + "mlp.up_proj.weight");
    put(b + "ffn_down.weight", p + "mlp.down_proj.weight");
  }
  w.Write(path);
}

// The two ways a Gemma3ForConditionalGeneration checkpoint names its language model: as the
// published checkpoints do (transformers < 4.52: language_model.model.*, vision_tower.*,
// multi_modal_projector.*) and as transformers >= 4.52 saves them (model.language_model.*,
// model.vision_tower.*, model.multi_modal_projector.*, lm_head.*).
enum class MultimodalLayout { kPublished, kTransformers452 };

// `m` (a text model) as the language model of a multimodal Gemma 3 checkpoint, laid out like
// google/gemma-3-4b-it: config.json with architectures Gemma3ForConditionalGeneration, the text
// model in text_config with the keys equal to Gemma3TextConfig's defaults left out, eos ids and
// dtype at the top level, a vision_config; the weights renamed, plus vision tower and projector
// tensors (random, never read by a text-only load). With `untied`, an lm_head of its own is added
// (top-level tie_word_embeddings false) and also to `m`'s tensors for the reference.
inline TinyModel AsGemma3Multimodal(TinyGemma3& m, MultimodalLayout layout, bool untied) {
  TinyModel mm;
  NormalStream rng(kGemma3Seed + 1);  // of +1..+6, the widest untied greedy margin (0.29)
  const int hidden = m.config["hidden_size"], vocab = m.config["vocab_size"];
  if (untied) {
    m.Add(rng, "lm_head.weight", {vocab, hidden}, 0.0, 1.0);
    m.config["tie_word_embeddings"] = false;
  }
  nlohmann::json text = m.config;
  for (const char* key :
       {"architectures", "bos_token_id", "eos_token_id", "torch_dtype", "hidden_activation",
        "rms_norm_eps", "rope_local_base_freq", "tie_word_embeddings"}) {
    text.erase(key);
  }
  mm.config = {{"architectures", {"Gemma3ForConditionalGeneration"}},
               {"model_type", "gemma3"},
               {"boi_token_index", 255999},
               {"eoi_token_index", 256000},
               {"image_token_index", 262144},
               {"mm_tokens_per_image", 256},
               {"eos_token_id", {1, 106}},
               {"torch_dtype", "float32"},
               {"text_config", text},
               {"vision_config",
                {{"model_type", "siglip_vision_model"},
                 {"hidden_size", 32},
                 {"image_size", 896},
                 {"intermediate_size", 64},
                 {"num_attention_heads", 2},
                 {"num_hidden_layers", 1},
                 {"patch_size", 14}}}};
  if (untied) mm.config["tie_word_embeddings"] = false;
  const bool published = layout == MultimodalLayout::kPublished;
  for (const auto& [name, t] : m.files) {
    std::string renamed = name;
    if (name == "lm_head.weight") {
      renamed = published ? "language_model.lm_head.weight" : "lm_head.weight";
    } else if (published) {
      renamed = "language_model." + name;
    } else {
      renamed = "model.language_model." + name.substr(std::strlen("model."));
    }
    mm.files[renamed] = t;
  }
  const std::string vision = published ? "" : "model.";
  mm.Add(rng, vision + "vision_tower.vision_model.embeddings.patch_embedding.weight",
         {32, 3, 14, 14}, 0.0, 0.1);
  mm.Add(rng, vision + "vision_tower.vision_model.post_layernorm.weight", {32}, 0.0, 0.1);
  mm.Add(rng, vision + "multi_modal_projector.mm_input_projection_weight", {32, hidden}, 0.0, 0.1);
  mm.Add(rng, vision + "multi_modal_projector.mm_soft_emb_norm.weight", {32}, 0.0, 0.1);
  return mm;
}

}  // namespace llm::testing
