// The architecture hyper-parameters of a Hugging Face model folder (config.json), validated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace llm {

class GgufFile;  // common/gguf.h

// How a model's weights are obtained: from its safetensors (or, when model.path is a .gguf file,
// from that file), from a GGUF file (kGguf insists on one), or seeded random values in the
// config's dtype (vLLM's --load-format dummy: any size runs, the output is meaningless).
enum class LoadFormat { kSafetensors, kGguf, kDummy };
// "safetensors", "gguf" or "dummy" (model.load_format, the tools' --load-format); anything else
// is InvalidArgument naming `what`.
StatusOr<LoadFormat> ParseLoadFormat(const std::string& text, const std::string& what);
const char* LoadFormatName(LoadFormat f);

enum class ModelArch {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kGemma,
  kGemma2,
  kPhi3,
  kMixtral,
  kQwen2Moe,
  kQwen3Moe,
  kGemma3,
  kGlm,  // GlmForCausalLM (GLM-4, model_type "glm")
  kGlm4  // Glm4ForCausalLM (GLM-4-0414, model_type "glm4")
};

// The MLP's activation: silu(gate) * up, or Gemma's gelu_pytorch_tanh(gate) * up.
enum class Activation { kSilu, kGeluTanh };

// kFreqFactors: llama.cpp's rope_freqs.weight (what its converter writes for Llama 3.1 / 3.2's
// "llama3" scaling): inv_freq_i = 1 / (freq_factors_i * theta^(2i / rotary dim)), the same
// rotation transformers' _compute_llama3_parameters gives, as fixed per-lane factors.
enum class RopeScalingType { kNone, kLinear, kLlama3, kLongRope, kFreqFactors };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  // LongRoPE (Phi-3's "longrope" / "su"; transformers _compute_longrope_parameters):
  // inv_freq_i = 1 / (factor_i * theta^(2i / head_dim)) with short_factor, or with long_factor
  // for a sequence longer than original_max_position_embeddings (RopeUsesLongFactors); cos and
  // sin are multiplied by attention_factor. rope_dim() / 2 factors each.
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
  std::vector<double> freq_factors;  // kFreqFactors: rope_dim() / 2 of them
};

// LongRoPE: whether a sequence rotates this step's tokens with the long factors, given `length`
// = max(its prompt length, the tokens it holds after this step) (ForwardBatch::rope_len).
// transformers decides per forward call, with the largest position + 1 of the call; the engine
// decides per sequence, which is the same for one sequence with a KV cache (the prompt in one
// call, then one token per call): tokens already cached keep the rotation they were stored with.
// A prompt prefilled in several chunks decides by its whole length, as the one call would. False
// for every other scaling.
bool RopeUsesLongFactors(const RopeScaling& rs, int64_t length);

struct ModelConfig {
  std::string architecture;  // as in config.json, e.g. "LlamaForCausalLM"
  ModelArch arch = ModelArch::kLlama;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  // RoPE rotates the first rotary_dim lanes of each head (head_dim * partial_rotary_factor:
  // Phi-3 default 1, GLM default 0.5), in rotate-half pairs (i, i + rotary_dim / 2) or, with
  // rope_interleaved (GLM), (2i, 2i + 1). 0: head_dim.
  int rotary_dim = 0;
  bool rope_interleaved = false;
  RopeScaling rope_scaling;
  // Gemma 3: the layers marked in layer_local_rope (its sliding-window layers) rotate with
  // base rope_local_theta and no rope_scaling; the others with rope_theta and rope_scaling.
  // Empty: every layer uses rope_theta and rope_scaling.
  double rope_local_theta = 0.0;
  std::vector<uint8_t> layer_local_rope;
  bool qkv_bias = false;  // Qwen2 always; Llama with attention_bias
  bool o_bias = false;    // Llama with attention_bias
  bool mlp_bias = false;
  // Qwen3, Qwen3-MoE, Gemma 3: per-head RMSNorm of q and k before RoPE (Gemma: weight 1 + w).
  bool qk_norm = false;
  bool tie_word_embeddings = false;
  Activation hidden_act = Activation::kSilu;
  // Gemma: the stored RMSNorm weight w means 1 + w (added when the weights load; GGUF files
  // store 1 + w already), and the embeddings are multiplied by embedding_scale = sqrt(hidden).
  bool norm_weight_plus_one = false;
  float embedding_scale = 0.0f;  // 0: none
  // Gemma 2: attention scale query_pre_attn_scalar^-0.5 (0: head_dim^-0.5), scores and final
  // logits soft-capped (tanh(s / cap) * cap; 0: none), and "sandwich" norms: the attention and
  // MLP outputs are normalized before the residual add (post_attention_layernorm,
  // post_feedforward_layernorm) and the MLP input by pre_feedforward_layernorm.
  double query_pre_attn_scalar = 0.0;
  double attn_logit_softcap = 0.0;
  double final_logit_softcap = 0.0;
  bool sandwich_norms = false;
  // Phi-3: q, k and v in one qkv_proj (rows [q; k; v]) and gate and up in one gate_up_proj
  // (rows [gate; up]); split into the usual matrices when the weights load.
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // GLM-4-0414: the sandwich norms (sandwich_norms) are named post_self_attn_layernorm (the
  // attention output), post_attention_layernorm (the MLP input) and post_mlp_layernorm.
  // Sparse mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): a router picks
  // experts_per_token of num_experts per token (softmax, top-k, renormalized when
  // norm_topk_prob); each expert is a SwiGLU MLP of moe_intermediate_size. Qwen2-MoE adds a
  // shared expert (shared_expert_intermediate_size) scaled by sigmoid(shared_expert_gate(x)).
  // Qwen2-MoE and Qwen3-MoE may keep some layers dense (a SwiGLU MLP of intermediate_size):
  // those in mlp_only_layers and those off the decoder_sparse_step pattern.
  int num_experts = 0;  // 0: dense MLP on every layer
  int experts_per_token = 0;
  int moe_intermediate_size = 0;
  int shared_expert_intermediate_size = 0;  // 0: none
  bool norm_topk_prob = true;
  // Per layer: 1 = sparse MoE, 0 = dense MLP. Empty when num_experts is 0.
  std::vector<uint8_t> layer_sparse;
  // Per layer: 0 = full attention, otherwise the sliding window in tokens.
  std::vector<int> layer_sliding_window;
  std::vector<int32_t> bos_token_ids;
  std::vector<int32_t> eos_token_ids;
  DType torch_dtype = DType::kF32;
  // Gemma3ForConditionalGeneration: the config describes the language model of a multimodal
  // checkpoint (its text_config), whose weights are named language_model.model.* /
  // language_model.lm_head.* (or, as transformers >= 4.52 saves them, model.language_model.* /
  // lm_head.*) beside a vision tower and projector that are not loaded.
  bool language_model_of_multimodal = false;

  int q_dim() const { return num_heads * head_dim; }
  int rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  bool layer_uses_local_rope(int layer) const {
    return layer < static_cast<int>(layer_local_rope.size()) && layer_local_rope[layer] != 0;
  }
  bool layer_is_moe(int layer) const {
    return num_experts > 0 && layer < static_cast<int>(layer_sparse.size()) &&
           layer_sparse[layer] != 0;
  }
};

// Parses and validates config.json in `dir`, or the metadata of `dir` when it is a .gguf file.
// Errors name the file and the key.
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);
// The hyper-parameters of a GGUF model from its metadata (general.architecture and the
// <arch>.* keys, the tokenizer's bos/eos ids) and tensor list (biases, tied output), validated
// like config.json. Architectures: llama (and Mistral: llama with attention.sliding_window),
// qwen2, qwen3, gemma, gemma2, gemma3, phi3, qwen2moe, qwen3moe, chatglm (GlmForCausalLM),
// glm4 (Glm4ForCausalLM); others are Unimplemented naming the architecture.
StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);
// Same, from the JSON text (for tests); `source` names it in errors.
StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source);

// The rotary inverse frequencies (rope_dim() / 2 of them), with rope_scaling applied (LongRoPE:
// the short factors, or the long ones when `long_factors`).
std::vector<float> RopeInvFreq(const ModelConfig& config, bool long_factors = false);
// Gemma 3's local layers: base rope_local_theta, no scaling (empty when rope_local_theta is 0).
std::vector<float> RopeInvFreqLocal(const ModelConfig& config);

}  // namespace llm
