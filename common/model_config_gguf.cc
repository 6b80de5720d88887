// ModelConfigFromGguf: a ModelConfig from GGUF metadata (llama.cpp's key names, see
// gguf-py/gguf/constants.py Keys.LLM / Keys.Attention / Keys.Rope).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/gguf.h"
#include "common/model_config.h"

namespace llm {
namespace {

constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 30;

class Reader {
 public:
  Reader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string Key(const std::string& suffix) const { return arch_ + "." + suffix; }
  const std::string& arch() const { return arch_; }

  // A positive integer <arch>.<suffix> of at most `max`; absent gives `fallback` unless
  // `required`.
  Status Int(const std::string& suffix, bool required, int fallback, int64_t max, int* out) const {
    const std::string key = Key(suffix);
    if (!f_.Find(key)) {
      if (required) return NotFound(f_.path() + ": missing key '" + key + "'");
      *out = fallback;
      return Status::Ok();
    }
    LLM_ASSIGN_OR_RETURN(int64_t v, f_.GetInt(key));
    return Check(key, v, max, out);
  }

  // The same, where a per-layer array is allowed when all its entries are equal.
  Status IntOrUniformArray(const std::string& suffix, int fallback, int64_t max, int* out) const {
    const std::string key = Key(suffix);
    const GgufValue* v = f_.Find(key);
    if (v == nullptr || v->type != GgufType::kArray) return Int(suffix, false, fallback, max, out);
    LLM_ASSIGN_OR_RETURN(std::vector<int64_t> all, f_.GetIntArray(key));
    if (all.empty()) return InvalidArgument(f_.path() + ": key '" + key + "' is an empty array");
    for (int64_t x : all) {
      if (x != all[0]) {
        return Unimplemented(f_.path() + ": key '" + key +
                             "' differs between layers, which is not supported");
      }
    }
    return Check(key, all[0], max, out);
  }

  Status Float(const std::string& suffix, bool required, double fallback, double* out) const {
    const std::string key = Key(suffix);
    if (!f_.Find(key)) {
      if (required) return NotFound(f_.path() + ": missing key '" + key + "'");
      *out = fallback;
      return Status::Ok();
    }
    LLM_ASSIGN_OR_RETURN(*out, f_.GetFloat(key));
    if (!(*out > 0)) {
      return InvalidArgument(f_.path() + ": key '" + key + "' must be a positive number");
    }
    return Status::Ok();
  }

 private:
  Status Check(const std::string& key, int64_t v, int64_t max, int* out) const {
    if (v <= 0 || v > max) {
      return InvalidArgument(f_.path() + ": key '" + key +
                             "' must be a positive integer of at most " + std::to_string(max) +
                             ", got " + std::to_string(v));
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  }
  const GgufFile& f_;
  std::string arch_;
};

Status ReadArch(const GgufFile& f, ModelConfig* c, std::string* arch) {
  LLM_ASSIGN_OR_RETURN(*arch, f.GetString("general.architecture"));
  if (*arch == "llama") {
    c->arch = ModelArch::kLlama;
    c->architecture = "LlamaForCausalLM";
  } else if (*arch == "qwen2") {
    c->arch = ModelArch::kQwen2;
    c->architecture = "Qwen2ForCausalLM";
  } else if (*arch == "qwen3") {
    c->arch = ModelArch::kQwen3;
    c->architecture = "Qwen3ForCausalLM";
  } else if (*arch == "gemma") {
    c->arch = ModelArch::kGemma;
    c->architecture = "GemmaForCausalLM";
  } else if (*arch == "gemma2") {
    c->arch = ModelArch::kGemma2;
    c->architecture = "Gemma2ForCausalLM";
  } else if (*arch == "gemma3") {
    c->arch = ModelArch::kGemma3;
    c->architecture = "Gemma3ForCausalLM";
  } else if (*arch == "phi3") {
    c->arch = ModelArch::kPhi3;
    c->architecture = "Phi3ForCausalLM";
  } else if (*arch == "qwen2moe") {
    c->arch = ModelArch::kQwen2Moe;
    c->architecture = "Qwen2MoeForCausalLM";
  } else if (*arch == "qwen3moe") {
    c->arch = ModelArch::kQwen3Moe;
    c->architecture = "Qwen3MoeForCausalLM";
  } else if (*arch == "chatglm") {
    c->arch = ModelArch::kGlm;
    c->architecture = "GlmForCausalLM";
  } else if (*arch == "glm4") {
    c->arch = ModelArch::kGlm4;
    c->architecture = "Glm4ForCausalLM";
  } else {
    return Unimplemented(f.path() + ": general.architecture '" + *arch +
                         "' is not supported (supported: llama, qwen2, qwen3, gemma, gemma2, "
                         "gemma3, phi3, qwen2moe, qwen3moe, chatglm, glm4)");
  }
  // llama with experts is Mixtral (ReadMoe reads the expert keys).
  if (*arch == "llama" && f.Find("llama.expert_count")) {
    LLM_ASSIGN_OR_RETURN(int64_t n, f.GetInt("llama.expert_count"));
    if (n > 0) {
      c->arch = ModelArch::kMixtral;
      c->architecture = "MixtralForCausalLM";
    }
  }
  return Status::Ok();
}

// rope.dimension_count: the rotary lanes of each head (llama.cpp's n_rot). Phi-3 (Phi-4-mini's
// partial_rotary_factor: rotate-half over the first n_rot lanes, as llama.cpp's NEOX rope) and
// GLM (ChatGLM / GLM-4-0414, default half of each head, rotated in interleaved pairs as
// llama.cpp's NORM rope) may rotate part of a head; the other architectures must rotate all of
// it.
Status ReadRope(const GgufFile& f, const Reader& r, ModelConfig* c) {
  LLM_RETURN_IF_ERROR(r.Float("rope.freq_base", false, 10000.0, &c->rope_theta));
  const bool glm = c->arch == ModelArch::kGlm || c->arch == ModelArch::kGlm4;
  c->rope_interleaved = glm;
  int rot = 0;
  LLM_RETURN_IF_ERROR(
      r.Int("rope.dimension_count", false, glm ? c->head_dim / 2 : c->head_dim, kMaxWidth, &rot));
  if (rot != c->head_dim && !glm && c->arch != ModelArch::kPhi3) {
    return Unimplemented(f.path() + ": key '" + r.Key("rope.dimension_count") +
                         "' = " + std::to_string(rot) + " rotates part of each head (head_dim " +
                         std::to_string(c->head_dim) + "), which is only supported for phi3, " +
                         "chatglm and glm4");
  }
  if (rot > c->head_dim || rot < 2 || rot % 2 != 0) {
    return InvalidArgument(
        f.path() + ": key '" + r.Key("rope.dimension_count") + "' = " + std::to_string(rot) +
        " must be even and in [2, head_dim = " + std::to_string(c->head_dim) + "]");
  }
  c->rotary_dim = rot;
  const std::string type_key = r.Key("rope.scaling.type");
  if (!f.Find(type_key)) return Status::Ok();
  LLM_ASSIGN_OR_RETURN(std::string type, f.GetString(type_key));
  if (type == "none") return Status::Ok();
  if (type != "linear") {
    return Unimplemented(f.path() + ": key '" + type_key + "' = '" + type +
                         "' is not supported (supported: none, linear)");
  }
  c->rope_scaling.type = RopeScalingType::kLinear;
  return r.Float("rope.scaling.factor", true, 1.0, &c->rope_scaling.factor);
}

Status ReadTokenIds(const GgufFile& f, ModelConfig* c) {
  auto id = [&](const char* key, std::vector<int32_t>* out) -> Status {
    if (!f.Find(key)) return Status::Ok();
    LLM_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
    if (v < 0 || v >= c->vocab_size) {
      return InvalidArgument(f.path() + ": key '" + key + "' = " + std::to_string(v) +
                             " is outside the vocabulary of " + std::to_string(c->vocab_size));
    }
    for (int32_t x : *out) {
      if (x == v) return Status::Ok();
    }
    out->push_back(static_cast<int32_t>(v));
    return Status::Ok();
  };
  LLM_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", &c->bos_token_ids));
  // Chat models end a turn with EOT (Llama 3's <|eot_id|>) or EOM: both stop generation.
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    LLM_RETURN_IF_ERROR(id(key, &c->eos_token_ids));
  }
  return Status::Ok();
}

// Mixtral (llama + expert_count), Qwen2-MoE and Qwen3-MoE as llama.cpp stores them:
// expert_count, expert_used_count, the experts' width (Mixtral: feed_forward_length; Qwen2/3-MoE:
// expert_feed_forward_length, Qwen2-MoE also expert_shared_feed_forward_length),
// expert_weights_norm (absent: Mixtral and Qwen3-MoE renormalize, as llama.cpp's graphs do,
// Qwen2-MoE does not). Every layer is sparse (llama.cpp has no dense layers among them).
Status ReadMoe(const GgufFile& f, const Reader& r, ModelConfig* c) {
  if (c->arch != ModelArch::kMixtral && c->arch != ModelArch::kQwen2Moe &&
      c->arch != ModelArch::kQwen3Moe) {
    return Status::Ok();
  }
  constexpr int kMaxExperts = 1024;
  LLM_RETURN_IF_ERROR(r.Int("expert_count", true, 0, kMaxExperts, &c->num_experts));
  LLM_RETURN_IF_ERROR(r.Int("expert_used_count", true, 0, kMaxExperts, &c->experts_per_token));
  if (c->num_experts <= 0 || c->experts_per_token <= 0 || c->experts_per_token > c->num_experts) {
    return InvalidArgument(f.path() + ": " + r.Key("expert_used_count") +
                           " must be in [1, expert_count]");
  }
  const bool mixtral = c->arch == ModelArch::kMixtral;
  c->layer_sparse.assign(c->num_layers, 1);
  c->norm_topk_prob = mixtral || c->arch == ModelArch::kQwen3Moe;
  if (f.Find(r.Key("expert_weights_norm"))) {
    LLM_ASSIGN_OR_RETURN(c->norm_topk_prob, f.GetBool(r.Key("expert_weights_norm")));
  }
  if (mixtral) {
    c->moe_intermediate_size = c->intermediate_size;
    return Status::Ok();
  }
  LLM_RETURN_IF_ERROR(
      r.Int("expert_feed_forward_length", true, 0, kMaxWidth, &c->moe_intermediate_size));
  if (c->arch == ModelArch::kQwen3Moe) return Status::Ok();
  return r.Int("expert_shared_feed_forward_length", false, 0, kMaxWidth,
               &c->shared_expert_intermediate_size);
}

// Gemma, Gemma 2 and Gemma 3 as llama.cpp runs them: GELU-tanh, embeddings × sqrt(hidden), norms
// stored as 1 + w; Gemma 2's soft-caps, sandwich norms, sliding window on even layers, and the
// attention scale from attention.scale or, as llama.cpp does without it, from the layer count.
// Gemma 3 (llama.cpp's LLM_ARCH_GEMMA3): the same plus q/k norms, every 6th layer global (the
// pattern is fixed in llama.cpp, not in the file), the others sliding with RoPE base 1e4
// unscaled; rope.freq_base and rope.scaling on the global layers; the 62-layer 27B scales by
// (hidden / heads)^-0.5, the others by head_dim^-0.5.
Status ReadGemma(const GgufFile& f, const Reader& r, int window, ModelConfig* c) {
  if (c->arch != ModelArch::kGemma && c->arch != ModelArch::kGemma2 &&
      c->arch != ModelArch::kGemma3) {
    return Status::Ok();
  }
  c->hidden_act = Activation::kGeluTanh;
  c->norm_weight_plus_one = true;
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  if (c->arch == ModelArch::kGemma) return Status::Ok();
  const bool gemma3 = c->arch == ModelArch::kGemma3;
  c->sandwich_norms = true;
  LLM_RETURN_IF_ERROR(r.Float("attn_logit_softcapping", false, 0.0, &c->attn_logit_softcap));
  LLM_RETURN_IF_ERROR(r.Float("final_logit_softcapping", false, 0.0, &c->final_logit_softcap));
  double scale = 0;
  LLM_RETURN_IF_ERROR(r.Float("attention.scale", false, 0.0, &scale));
  if (scale > 0) {
    c->query_pre_attn_scalar = 1.0 / (scale * scale);
  } else {
    const int big = gemma3 ? 62 : 46;  // Gemma 3 27B, Gemma 2 27B
    c->query_pre_attn_scalar = c->num_layers == big ? c->hidden_size / c->num_heads : c->head_dim;
  }
  if (gemma3) {
    c->qk_norm = true;
    c->rope_local_theta = 10000.0;
    c->layer_local_rope.assign(c->num_layers, 0);
    for (int l = 0; l < c->num_layers; ++l) {
      if ((l + 1) % 6 == 0) continue;
      c->layer_local_rope[l] = 1;
      c->layer_sliding_window[l] = window;
    }
  } else {
    for (int l = 0; l < c->num_layers; l += 2) c->layer_sliding_window[l] = window;
  }
  if (c->attn_logit_softcap < 0 || c->final_logit_softcap < 0) {
    return InvalidArgument(f.path() + ": the Gemma soft-caps must not be negative");
  }
  return Status::Ok();
}

// One F32 vector tensor of exactly `n` positive entries.
Status ReadFactorTensor(const GgufFile& f, const std::string& name, int n,
                        std::vector<double>* out) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) {
    return InvalidArgument(f.path() + ": tensor '" + name +
                           "' is missing (LongRoPE needs both rope_factors_long.weight and "
                           "rope_factors_short.weight)");
  }
  if (t->type != static_cast<uint32_t>(GgmlType::kF32) || t->dims.size() != 1 || t->dims[0] != n ||
      t->data == nullptr) {
    return InvalidArgument(f.path() + ": tensor '" + name +
                           "' must be F32 [rope dimension / 2 = " + std::to_string(n) + "]");
  }
  out->resize(n);
  for (int i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, static_cast<const char*>(t->data) + sizeof(float) * i, sizeof(float));
    if (!(v > 0)) {
      return InvalidArgument(f.path() + ": tensor '" + name +
                             "' holds a factor that is not positive");
    }
    (*out)[i] = v;
  }
  return Status::Ok();
}

// Phi-3 LongRoPE as llama.cpp's convert_hf_to_gguf.py stores it: the factors as the F32 tensors
// rope_factors_long.weight / rope_factors_short.weight, rope.scaling.original_context_length and
// rope.scaling.attn_factor (absent: transformers' default from context_length / the original
// length). The engine then follows transformers (RopeUsesLongFactors), not llama.cpp's choice by
// the configured context size.
Status ReadPhi3LongRope(const GgufFile& f, const Reader& r, ModelConfig* c) {
  if (c->arch != ModelArch::kPhi3 ||
      (!f.FindTensor("rope_factors_long.weight") && !f.FindTensor("rope_factors_short.weight"))) {
    return Status::Ok();
  }
  RopeScaling& rs = c->rope_scaling;
  if (rs.type != RopeScalingType::kNone) {
    return InvalidArgument(f.path() + ": rope_factors tensors together with " +
                           r.Key("rope.scaling.type"));
  }
  rs.type = RopeScalingType::kLongRope;
  LLM_RETURN_IF_ERROR(
      ReadFactorTensor(f, "rope_factors_short.weight", c->rope_dim() / 2, &rs.short_factor));
  LLM_RETURN_IF_ERROR(
      ReadFactorTensor(f, "rope_factors_long.weight", c->rope_dim() / 2, &rs.long_factor));
  int orig = 0;
  LLM_RETURN_IF_ERROR(r.Int("rope.scaling.original_context_length", false,
                            c->max_position_embeddings, kMaxPositions, &orig));
  rs.original_max_position_embeddings = orig;
  rs.factor = static_cast<double>(c->max_position_embeddings) / orig;
  const double fallback =
      rs.factor > 1.0 && orig > 1 ? std::sqrt(1.0 + std::log(rs.factor) / std::log(orig)) : 1.0;
  return r.Float("rope.scaling.attn_factor", false, fallback, &rs.attention_factor);
}

// Llama 3.1 / 3.2 as llama.cpp's convert_hf_to_gguf.py stores their "llama3" rope scaling: no
// scaling keys, one F32 tensor rope_freqs.weight of rope dimension / 2 factors that divide the
// rotation frequencies (llama.cpp's freq_factors). A file that also names a rope.scaling.type
// (or Phi-3's LongRoPE tensors) is refused rather than guessed at.
Status ReadRopeFreqs(const GgufFile& f, const Reader& r, ModelConfig* c) {
  if (!f.FindTensor("rope_freqs.weight")) return Status::Ok();
  RopeScaling& rs = c->rope_scaling;
  if (rs.type != RopeScalingType::kNone) {
    return InvalidArgument(f.path() + ": tensor 'rope_freqs.weight' together with " +
                           (rs.type == RopeScalingType::kLongRope ? "the rope_factors tensors"
                                                                  : r.Key("rope.scaling.type")));
  }
  LLM_RETURN_IF_ERROR(
      ReadFactorTensor(f, "rope_freqs.weight", c->rope_dim() / 2, &rs.freq_factors));
  rs.type = RopeScalingType::kFreqFactors;
  return Status::Ok();
}

// ChatGLM / GLM-4 (llama.cpp's chatglm, from convert_hf_to_gguf.py's ChatGLMModel: THUDM's
// ChatGLM layout with attn_qkv [q; k; v] and its bias, or GlmForCausalLM with attn_q/k/v and
// their biases) and GLM-4-0414 (glm4, Glm4Model: attn_q/k/v or attn_qkv, the sandwich norms
// post_attention_norm and post_ffw_norm). Both: ffn_up = [gate; up] (2 × feed_forward_length
// rows), no attn_output bias.
Status ReadGlm(const GgufFile& f, const Reader& r, ModelConfig* c) {
  if (c->arch != ModelArch::kGlm && c->arch != ModelArch::kGlm4) return Status::Ok();
  c->fused_gate_up = true;
  c->fused_qkv = f.FindTensor("blk.0.attn_qkv.weight") != nullptr;
  c->sandwich_norms = c->arch == ModelArch::kGlm4;
  if (c->o_bias) {
    return InvalidArgument(f.path() + ": tensor 'blk.0.attn_output.bias' is not part of a " +
                           r.arch() +
                           " model (llama.cpp's GLM graphs have no attention output bias)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  std::string arch;
  LLM_RETURN_IF_ERROR(ReadArch(f, &c, &arch));
  const Reader r(f, arch);
  LLM_RETURN_IF_ERROR(r.Int("embedding_length", true, 0, kMaxWidth, &c.hidden_size));
  LLM_RETURN_IF_ERROR(r.Int("feed_forward_length", true, 0, kMaxWidth, &c.intermediate_size));
  LLM_RETURN_IF_ERROR(r.Int("block_count", true, 0, kMaxLayers, &c.num_layers));
  LLM_RETURN_IF_ERROR(r.Int("attention.head_count", true, 0, kMaxHeads, &c.num_heads));
  LLM_RETURN_IF_ERROR(
      r.IntOrUniformArray("attention.head_count_kv", c.num_heads, kMaxHeads, &c.num_kv_heads));
  LLM_RETURN_IF_ERROR(
      r.Int("context_length", false, 2048, kMaxPositions, &c.max_position_embeddings));
  if (c.hidden_size % c.num_heads != 0 && !f.Find(r.Key("attention.key_length"))) {
    return InvalidArgument(f.path() +
                           ": embedding_length is not a multiple of head_count and no '" +
                           r.Key("attention.key_length") + "' is given");
  }
  LLM_RETURN_IF_ERROR(
      r.Int("attention.key_length", false, c.hidden_size / c.num_heads, kMaxWidth, &c.head_dim));
  int value_length = 0;
  LLM_RETURN_IF_ERROR(r.Int("attention.value_length", false, c.head_dim, kMaxWidth, &value_length));
  if (value_length != c.head_dim) {
    return Unimplemented(f.path() + ": attention.value_length " + std::to_string(value_length) +
                         " differs from attention.key_length " + std::to_string(c.head_dim));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(f.path() + ": head_count (" + std::to_string(c.num_heads) +
                           ") is not a multiple of head_count_kv (" +
                           std::to_string(c.num_kv_heads) + ")");
  }
  if (static_cast<int64_t>(c.num_heads) * c.head_dim > kMaxWidth || c.head_dim % 2 != 0) {
    return InvalidArgument(f.path() + ": head_count × key_length must be at most " +
                           std::to_string(kMaxWidth) + " and key_length even, got " +
                           std::to_string(c.num_heads) + " × " + std::to_string(c.head_dim));
  }
  LLM_RETURN_IF_ERROR(r.Float("attention.layer_norm_rms_epsilon", true, 0, &c.rms_norm_eps));
  LLM_RETURN_IF_ERROR(ReadRope(f, r, &c));
  // The vocabulary: the embedding's rows (what the weights need), else the tokenizer's.
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  int64_t vocab = 0;
  if (embd != nullptr && embd->dims.size() == 2) {
    vocab = embd->dims[1];
  } else if (const GgufValue* tokens = f.Find("tokenizer.ggml.tokens")) {
    vocab = static_cast<int64_t>(tokens->array_size());
  }
  if (vocab <= 0 || vocab > kMaxVocab) {
    return InvalidArgument(f.path() + ": vocabulary size " + std::to_string(vocab) +
                           " (from token_embd.weight or tokenizer.ggml.tokens) is not in [1, " +
                           std::to_string(kMaxVocab) + "]");
  }
  c.vocab_size = static_cast<int>(vocab);
  c.qkv_bias = f.FindTensor("blk.0.attn_q.bias") != nullptr ||
               f.FindTensor("blk.0.attn_qkv.bias") != nullptr;
  c.o_bias = f.FindTensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = f.FindTensor("blk.0.ffn_up.bias") != nullptr;
  c.qk_norm = c.arch == ModelArch::kQwen3 || c.arch == ModelArch::kQwen3Moe;
  c.tie_word_embeddings = f.FindTensor("output.weight") == nullptr;
  // llama.cpp applies attention.sliding_window to every layer of the llama architecture
  // (Mistral); Qwen2/3 GGUFs carry none that is used.
  c.layer_sliding_window.assign(c.num_layers, 0);
  int64_t window = 0;
  if (f.Find(r.Key("attention.sliding_window"))) {
    LLM_ASSIGN_OR_RETURN(window, f.GetInt(r.Key("attention.sliding_window")));
    if (window < 0 || window > kMaxPositions) {
      return InvalidArgument(f.path() + ": key '" + r.Key("attention.sliding_window") +
                             "' is out of range");
    }
  }
  if (window > 0 && c.arch == ModelArch::kLlama) {
    c.arch = ModelArch::kMistral;
    c.architecture = "MistralForCausalLM";
    c.layer_sliding_window.assign(c.num_layers, static_cast<int>(window));
  }
  if (window > 0 && c.arch == ModelArch::kMixtral) {
    c.layer_sliding_window.assign(c.num_layers, static_cast<int>(window));
  }
  if (c.arch == ModelArch::kPhi3) {  // llama.cpp's phi3: fused attn_qkv and ffn_up [gate; up]
    c.fused_qkv = c.fused_gate_up = true;
    c.layer_sliding_window.assign(c.num_layers, static_cast<int>(window));
  }
  LLM_RETURN_IF_ERROR(ReadGlm(f, r, &c));
  LLM_RETURN_IF_ERROR(ReadPhi3LongRope(f, r, &c));
  LLM_RETURN_IF_ERROR(ReadRopeFreqs(f, r, &c));
  LLM_RETURN_IF_ERROR(ReadGemma(f, r, static_cast<int>(window), &c));
  LLM_RETURN_IF_ERROR(ReadMoe(f, r, &c));
  LLM_RETURN_IF_ERROR(ReadTokenIds(f, &c));
  c.torch_dtype = DType::kF32;
  if (embd != nullptr && embd->type == static_cast<uint32_t>(GgmlType::kF16)) {
    c.torch_dtype = DType::kF16;
  } else if (embd != nullptr && embd->type == static_cast<uint32_t>(GgmlType::kBF16)) {
    c.torch_dtype = DType::kBF16;
  }
  return c;
}

}  // namespace llm
