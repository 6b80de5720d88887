#include "common/model_config.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/gguf.h"

namespace llm {

using nlohmann::json;

namespace {

constexpr const char* kSupported =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
    "GemmaForCausalLM, Gemma2ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, "
    "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM, "
    "Gemma3ForConditionalGeneration (text only), GlmForCausalLM, Glm4ForCausalLM";

// Upper bounds on the sizes a config.json may declare: far above any released model, low enough
// that no derived size (a layer list, a dummy weight tensor's element count) overflows.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden, intermediate, head_dim
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 30;

// Reads a positive integer key at most `max`; `required` false returns `fallback` when absent
// or null.
Status ReadInt(const json& j, const std::string& source, const char* key, bool required,
               int fallback, int* out, int64_t max = kMaxPositions) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) return InvalidArgument(source + ": missing key '" + key + "'");
    *out = fallback;
    return Status::Ok();
  }
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0 || j[key].get<int64_t>() > max) {
    return InvalidArgument(source + ": key '" + key + "' must be a positive integer of at most " +
                           std::to_string(max) + ", got " + j[key].dump());
  }
  *out = j[key].get<int>();
  return Status::Ok();
}

// Reads a string key; absent or null gives `fallback`, any other type is an error naming it.
Status ReadString(const json& j, const std::string& source, const char* key,
                  const std::string& fallback, std::string* out) {
  if (!j.contains(key) || j[key].is_null()) {
    *out = fallback;
    return Status::Ok();
  }
  if (!j[key].is_string()) {
    return InvalidArgument(source + ": key '" + key + "' must be a string, got " + j[key].dump());
  }
  *out = j[key].get<std::string>();
  return Status::Ok();
}

Status ReadNumber(const json& j, const std::string& source, const char* key, double fallback,
                  double* out) {
  if (!j.contains(key) || j[key].is_null()) {
    *out = fallback;
    return Status::Ok();
  }
  if (!j[key].is_number() || !(j[key].get<double>() > 0)) {
    return InvalidArgument(source + ": key '" + key + "' must be a positive number, got " +
                           j[key].dump());
  }
  *out = j[key].get<double>();
  return Status::Ok();
}

bool ReadBool(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

// bos/eos ids may be a number, a list of numbers or null.
Status ReadIdList(const json& j, const std::string& source, const char* key,
                  std::vector<int32_t>* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::Ok();
  const json& v = j[key];
  if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX) {
    out->push_back(v.get<int32_t>());
    return Status::Ok();
  }
  if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) break;
      out->push_back(x.get<int32_t>());
    }
    if (out->size() == v.size()) return Status::Ok();
  }
  return InvalidArgument(source + ": key '" + key +
                         "' must be a token id or a list of token ids (integers in [0, 2^31))");
}

// A list of exactly `n` positive numbers under `key` of `rs`.
Status ReadFactorList(const json& rs, const std::string& where, const char* key, int n,
                      std::vector<double>* out) {
  const std::string what = where + ": key '" + key +
                           "' must list the rotary dimension / 2 = " + std::to_string(n) +
                           " positive numbers";
  if (!rs.contains(key) || !rs[key].is_array()) return InvalidArgument(what + " (missing)");
  if (rs[key].size() != static_cast<size_t>(n)) {
    return InvalidArgument(what + ", got " + std::to_string(rs[key].size()));
  }
  out->clear();
  for (const json& v : rs[key]) {
    if (!v.is_number() || !(v.get<double>() > 0)) {
      return InvalidArgument(what + ", got " + v.dump());
    }
    out->push_back(v.get<double>());
  }
  return Status::Ok();
}

// LongRoPE as transformers' _compute_longrope_parameters reads it. original_max_position_embeddings
// from the top level (Phi-3), else from rope_scaling, else max_position_embeddings; the
// extension factor max_position_embeddings / original_max_position_embeddings when an original
// length is given, else rope_scaling.factor (default 1); attention_factor as given, else
// sqrt(1 + ln(factor) / ln(original)) when factor > 1, else 1.
Status ReadLongRope(const json& j, const std::string& source, const json& rs,
                    const std::string& where, const ModelConfig& c, RopeScaling* out) {
  out->type = RopeScalingType::kLongRope;
  const int n = c.rope_dim() / 2;
  LLM_RETURN_IF_ERROR(ReadFactorList(rs, where, "short_factor", n, &out->short_factor));
  LLM_RETURN_IF_ERROR(ReadFactorList(rs, where, "long_factor", n, &out->long_factor));
  int orig = 0;
  LLM_RETURN_IF_ERROR(ReadInt(rs, where, "original_max_position_embeddings", false, 0, &orig));
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "original_max_position_embeddings", false, orig, &orig));
  LLM_RETURN_IF_ERROR(ReadNumber(rs, where, "factor", 1.0, &out->factor));
  if (orig > 0) {
    out->factor = static_cast<double>(c.max_position_embeddings) / orig;
  } else {
    orig = c.max_position_embeddings;
  }
  out->original_max_position_embeddings = orig;
  if (out->factor > 1.0 && orig < 2) {  // ln(original) would be 0
    return InvalidArgument(where + ": original_max_position_embeddings must be at least 2");
  }
  const double fallback =
      out->factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(out->factor) / std::log(orig));
  return ReadNumber(rs, where, "attention_factor", fallback, &out->attention_factor);
}

Status ReadRopeScaling(const json& j, const std::string& source, const ModelConfig& c,
                       RopeScaling* out) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return Status::Ok();
  const json& rs = j["rope_scaling"];
  const std::string where = source + ": rope_scaling";
  if (!rs.is_object()) return InvalidArgument(where + " must be an object or null");
  std::string legacy_type, type;
  LLM_RETURN_IF_ERROR(ReadString(rs, where, "type", "", &legacy_type));
  LLM_RETURN_IF_ERROR(ReadString(rs, where, "rope_type", legacy_type, &type));
  if (type == "default") return Status::Ok();
  if (type == "longrope" || type == "su") return ReadLongRope(j, source, rs, where, c, out);
  if (type != "linear" && type != "llama3") {
    return Unimplemented(where + ": type '" + type +
                         "' is not supported (supported: linear, llama3, longrope, su)");
  }
  out->type = type == "linear" ? RopeScalingType::kLinear : RopeScalingType::kLlama3;
  LLM_RETURN_IF_ERROR(ReadNumber(rs, where, "factor", 0, &out->factor));
  if (out->factor <= 0) return InvalidArgument(where + ": key 'factor' is required");
  if (out->type == RopeScalingType::kLlama3) {
    LLM_RETURN_IF_ERROR(ReadNumber(rs, where, "low_freq_factor", 1.0, &out->low_freq_factor));
    LLM_RETURN_IF_ERROR(ReadNumber(rs, where, "high_freq_factor", 4.0, &out->high_freq_factor));
    int orig = 0;
    LLM_RETURN_IF_ERROR(ReadInt(rs, where, "original_max_position_embeddings", false, 8192, &orig));
    out->original_max_position_embeddings = orig;
    if (out->high_freq_factor <= out->low_freq_factor) {
      return InvalidArgument(where + ": high_freq_factor must exceed low_freq_factor");
    }
  }
  return Status::Ok();
}

// The rotary dimension: int(head_dim * partial_rotary_factor) as transformers computes it (Phi-3
// default 1, GLM 0.5; other architectures rotate whole heads), even and positive.
Status ReadRotaryDim(const json& j, const std::string& source, ModelConfig* c) {
  const bool glm = c->arch == ModelArch::kGlm || c->arch == ModelArch::kGlm4;
  c->rope_interleaved = glm;
  c->rotary_dim = c->head_dim;
  if (!glm && c->arch != ModelArch::kPhi3) return Status::Ok();
  double factor = 1.0;
  LLM_RETURN_IF_ERROR(ReadNumber(j, source, "partial_rotary_factor", glm ? 0.5 : 1.0, &factor));
  const double dim = c->head_dim * factor;
  if (factor > 1.0 || dim < 2 || static_cast<int>(dim) % 2 != 0) {
    return InvalidArgument(source + ": key 'partial_rotary_factor' must give an even rotary " +
                           "dimension int(head_dim × factor) in [2, head_dim], got " +
                           std::to_string(static_cast<int>(dim)));
  }
  c->rotary_dim = static_cast<int>(dim);
  return Status::Ok();
}

Status ReadArch(const json& j, const std::string& source, ModelConfig* c) {
  if (!j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].empty() || !j["architectures"][0].is_string()) {
    return InvalidArgument(source +
                           ": missing key 'architectures' (a list naming the model class)");
  }
  c->architecture = j["architectures"][0].get<std::string>();
  if (c->architecture == "LlamaForCausalLM") {
    c->arch = ModelArch::kLlama;
  } else if (c->architecture == "MistralForCausalLM") {
    c->arch = ModelArch::kMistral;
  } else if (c->architecture == "Qwen2ForCausalLM") {
    c->arch = ModelArch::kQwen2;
  } else if (c->architecture == "Qwen3ForCausalLM") {
    c->arch = ModelArch::kQwen3;
  } else if (c->architecture == "GemmaForCausalLM") {
    c->arch = ModelArch::kGemma;
  } else if (c->architecture == "Gemma2ForCausalLM") {
    c->arch = ModelArch::kGemma2;
  } else if (c->architecture == "Phi3ForCausalLM") {
    c->arch = ModelArch::kPhi3;
  } else if (c->architecture == "MixtralForCausalLM") {
    c->arch = ModelArch::kMixtral;
  } else if (c->architecture == "Qwen2MoeForCausalLM") {
    c->arch = ModelArch::kQwen2Moe;
  } else if (c->architecture == "Qwen3MoeForCausalLM") {
    c->arch = ModelArch::kQwen3Moe;
  } else if (c->architecture == "Gemma3ForCausalLM") {
    c->arch = ModelArch::kGemma3;
  } else if (c->architecture == "GlmForCausalLM") {
    c->arch = ModelArch::kGlm;
  } else if (c->architecture == "Glm4ForCausalLM") {
    c->arch = ModelArch::kGlm4;
  } else {
    return Unimplemented(source + ": architecture '" + c->architecture +
                         "' is not supported (supported: " + kSupported + ")");
  }
  const bool gemma = c->arch == ModelArch::kGemma || c->arch == ModelArch::kGemma2 ||
                     c->arch == ModelArch::kGemma3;
  // Gemma reads hidden_activation (transformers: legacy configs with only hidden_act "gelu"
  // still run gelu_pytorch_tanh).
  std::string act;
  LLM_RETURN_IF_ERROR(
      ReadString(j, source, "hidden_act", gemma ? "gelu_pytorch_tanh" : "silu", &act));
  if (gemma) {
    LLM_RETURN_IF_ERROR(ReadString(j, source, "hidden_activation", "gelu_pytorch_tanh", &act));
    if (act == "gelu") act = "gelu_pytorch_tanh";
  }
  if (act == "silu" && !gemma) {
    c->hidden_act = Activation::kSilu;
  } else if (act == "gelu_pytorch_tanh" && gemma) {
    c->hidden_act = Activation::kGeluTanh;
  } else {
    return Unimplemented(source + ": hidden_act '" + act + "' is not supported for " +
                         c->architecture +
                         " (supported: " + (gemma ? "gelu_pytorch_tanh" : "silu") + ")");
  }
  return Status::Ok();
}

// Which layers use a sliding window, following each architecture's transformers code.
Status ReadSlidingWindow(const json& j, const std::string& source, ModelConfig* c) {
  c->layer_sliding_window.assign(c->num_layers, 0);
  int window = 0;
  const bool zero = j.contains("sliding_window") && j["sliding_window"].is_number_integer() &&
                    j["sliding_window"].get<int64_t>() == 0;  // some configs say 0 for none
  // transformers Gemma3TextConfig: sliding_window defaults to 4096.
  const int fallback = c->arch == ModelArch::kGemma3 ? 4096 : 0;
  if (!zero) LLM_RETURN_IF_ERROR(ReadInt(j, source, "sliding_window", false, fallback, &window));
  if (window <= 0) return Status::Ok();
  if (c->arch == ModelArch::kMistral || c->arch == ModelArch::kPhi3 ||
      c->arch == ModelArch::kMixtral) {
    c->layer_sliding_window.assign(c->num_layers, window);
  } else if (c->arch == ModelArch::kGemma3) {
    for (int l = 0; l < c->num_layers; ++l) {
      if (c->layer_local_rope[l]) c->layer_sliding_window[l] = window;
    }
  } else if (c->arch == ModelArch::kGemma2) {
    // transformers Gemma2: layers 0, 2, 4, ... slide, the others attend globally.
    for (int l = 0; l < c->num_layers; l += 2) c->layer_sliding_window[l] = window;
  } else if (c->arch == ModelArch::kQwen2 || c->arch == ModelArch::kQwen3 ||
             c->arch == ModelArch::kQwen2Moe || c->arch == ModelArch::kQwen3Moe) {
    if (!ReadBool(j, "use_sliding_window", false)) return Status::Ok();
    int first = c->num_layers;
    LLM_RETURN_IF_ERROR(
        ReadInt(j, source, "max_window_layers", false, c->num_layers, &first, kMaxLayers));
    for (int l = first; l < c->num_layers; ++l) c->layer_sliding_window[l] = window;
  }
  return Status::Ok();
}

// Which layers of a Qwen2-MoE / Qwen3-MoE are sparse, as transformers decides: layer l is
// sparse unless it is listed in mlp_only_layers or (l + 1) % decoder_sparse_step != 0.
Status ReadSparseLayers(const json& j, const std::string& source, ModelConfig* c) {
  int step = 1;
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "decoder_sparse_step", false, 1, &step, kMaxLayers));
  c->layer_sparse.assign(c->num_layers, 0);
  for (int l = 0; l < c->num_layers; ++l) c->layer_sparse[l] = (l + 1) % step == 0 ? 1 : 0;
  if (!j.contains("mlp_only_layers") || j["mlp_only_layers"].is_null()) return Status::Ok();
  const json& dense = j["mlp_only_layers"];
  if (!dense.is_array()) {
    return InvalidArgument(source + ": key 'mlp_only_layers' must be a list of layer indices");
  }
  for (const auto& v : dense) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c->num_layers) {
      return InvalidArgument(source + ": key 'mlp_only_layers' must list layer indices in [0, " +
                             std::to_string(c->num_layers) + "), got " + v.dump());
    }
    c->layer_sparse[v.get<int>()] = 0;
  }
  return Status::Ok();
}

// Mixtral: num_local_experts experts of intermediate_size, renormalized top-k, every layer
// sparse. Qwen2-MoE: num_experts of moe_intermediate_size, norm_topk_prob, a shared expert.
// Qwen3-MoE: the same without the shared expert. Both may keep some layers dense.
Status ReadMoe(const json& j, const std::string& source, ModelConfig* c) {
  if (c->arch != ModelArch::kMixtral && c->arch != ModelArch::kQwen2Moe &&
      c->arch != ModelArch::kQwen3Moe) {
    return Status::Ok();
  }
  constexpr int kMaxExperts = 1024;
  const bool mixtral = c->arch == ModelArch::kMixtral;
  LLM_RETURN_IF_ERROR(ReadInt(j, source, mixtral ? "num_local_experts" : "num_experts", true, 0,
                              &c->num_experts, kMaxExperts));
  LLM_RETURN_IF_ERROR(
      ReadInt(j, source, "num_experts_per_tok", true, 0, &c->experts_per_token, kMaxExperts));
  if (c->num_experts <= 0 || c->experts_per_token <= 0 || c->experts_per_token > c->num_experts) {
    return InvalidArgument(source + ": num_experts_per_tok must be in [1, number of experts]");
  }
  if (mixtral) {
    c->moe_intermediate_size = c->intermediate_size;
    c->norm_topk_prob = true;
    c->layer_sparse.assign(c->num_layers, 1);
    return Status::Ok();
  }
  LLM_RETURN_IF_ERROR(
      ReadInt(j, source, "moe_intermediate_size", true, 0, &c->moe_intermediate_size, kMaxWidth));
  if (c->arch == ModelArch::kQwen2Moe) {
    LLM_RETURN_IF_ERROR(ReadInt(j, source, "shared_expert_intermediate_size", false, 0,
                                &c->shared_expert_intermediate_size, kMaxWidth));
  }
  // transformers' default is false for both (real Qwen3-MoE configs say true).
  c->norm_topk_prob = ReadBool(j, "norm_topk_prob", false);
  return ReadSparseLayers(j, source, c);
}

// Gemma 3 (transformers Gemma3TextConfig / Gemma3TextModel): which layers are sliding and the
// two RoPE bases. layer_types ("sliding_attention" / "full_attention" per layer) when given,
// else sliding_window_pattern (default 6): layer i slides unless (i + 1) % pattern == 0.
// Sliding layers rotate with rope_local_base_freq (default 1e4) unscaled, the others with
// rope_theta (default 1e6) and rope_scaling. The newer rope_parameters form
// ({"full_attention": {...}, "sliding_attention": {...}}, each with rope_theta and a rope_type)
// is read the same way when present.
Status ReadGemma3(const json& j, const std::string& source, ModelConfig* c) {
  c->layer_local_rope.assign(c->num_layers, 0);
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& types = j["layer_types"];
    if (!types.is_array() || types.size() != static_cast<size_t>(c->num_layers)) {
      return InvalidArgument(source + ": key 'layer_types' must list num_hidden_layers (" +
                             std::to_string(c->num_layers) + ") layer types");
    }
    for (int l = 0; l < c->num_layers; ++l) {
      const json& t = types[l];
      if (t == "sliding_attention") {
        c->layer_local_rope[l] = 1;
      } else if (t != "full_attention") {
        return InvalidArgument(source + ": key 'layer_types' entries must be 'sliding_attention' " +
                               "or 'full_attention', got " + t.dump());
      }
    }
  } else {
    int pattern = 6;
    LLM_RETURN_IF_ERROR(
        ReadInt(j, source, "sliding_window_pattern", false, 6, &pattern, kMaxLayers));
    for (int l = 0; l < c->num_layers; ++l) c->layer_local_rope[l] = (l + 1) % pattern != 0;
  }
  LLM_RETURN_IF_ERROR(ReadNumber(j, source, "rope_theta", 1e6, &c->rope_theta));
  LLM_RETURN_IF_ERROR(ReadNumber(j, source, "rope_local_base_freq", 10000.0, &c->rope_local_theta));
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
      j["rope_parameters"].contains("full_attention")) {
    const json& rp = j["rope_parameters"];
    const std::string where = source + ": rope_parameters";
    const json full = rp["full_attention"];
    if (!full.is_object()) return InvalidArgument(where + ".full_attention must be an object");
    LLM_RETURN_IF_ERROR(
        ReadNumber(full, where + ".full_attention", "rope_theta", c->rope_theta, &c->rope_theta));
    c->rope_scaling = RopeScaling{};
    LLM_RETURN_IF_ERROR(ReadRopeScaling(json{{"rope_scaling", full}}, where + ".full_attention", *c,
                                        &c->rope_scaling));
    if (rp.contains("sliding_attention") && !rp["sliding_attention"].is_null()) {
      const json& local = rp["sliding_attention"];
      if (!local.is_object()) {
        return InvalidArgument(where + ".sliding_attention must be an object");
      }
      LLM_RETURN_IF_ERROR(ReadNumber(local, where + ".sliding_attention", "rope_theta",
                                     c->rope_local_theta, &c->rope_local_theta));
      RopeScaling local_scaling;
      LLM_RETURN_IF_ERROR(ReadRopeScaling(json{{"rope_scaling", local}},
                                          where + ".sliding_attention", *c, &local_scaling));
      if (local_scaling.type != RopeScalingType::kNone) {
        return Unimplemented(where + ".sliding_attention: only rope_type 'default' is supported");
      }
    }
  }
  return Status::Ok();
}

// Gemma3ForConditionalGeneration (the multimodal Gemma 3 checkpoints: 4B, 12B, 27B): the
// language model is a Gemma 3 text model described by `text_config`, which lists only the keys
// that differ from transformers' Gemma3TextConfig defaults (filled in here). The top level keeps
// what generation reads (eos/bos ids, dtype, tie_word_embeddings), which wins over text_config.
// The vision tower is not loaded: the model serves text.
json Gemma3TextConfigOf(const json& top) {
  json t = {{"vocab_size", 262208},
            {"hidden_size", 2304},
            {"intermediate_size", 9216},
            {"num_hidden_layers", 26},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 4},
            {"head_dim", 256},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"max_position_embeddings", 131072},
            {"rms_norm_eps", 1e-6},
            {"bos_token_id", 2},
            {"eos_token_id", 1},
            {"tie_word_embeddings", true},
            {"rope_theta", 1000000.0},
            {"query_pre_attn_scalar", 256},
            {"sliding_window", 4096},
            {"rope_local_base_freq", 10000.0}};
  if (top.contains("text_config") && top["text_config"].is_object()) {
    for (const auto& [key, value] : top["text_config"].items()) t[key] = value;
  }
  for (const char* key :
       {"bos_token_id", "eos_token_id", "tie_word_embeddings", "torch_dtype", "dtype"}) {
    if (top.contains(key) && !top[key].is_null()) t[key] = top[key];
  }
  t["architectures"] = {"Gemma3ForCausalLM"};
  return t;
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(source + ": not a JSON object");
  ModelConfig c;
  const bool multimodal = j.contains("architectures") && j["architectures"].is_array() &&
                          !j["architectures"].empty() &&
                          j["architectures"][0] == "Gemma3ForConditionalGeneration";
  if (multimodal) {
    if (j.contains("text_config") && !j["text_config"].is_object()) {
      return InvalidArgument(source + ": key 'text_config' must be an object");
    }
    j = Gemma3TextConfigOf(j);
  }
  LLM_RETURN_IF_ERROR(ReadArch(j, source, &c));
  if (multimodal) {
    c.architecture = "Gemma3ForConditionalGeneration";
    c.language_model_of_multimodal = true;
  }
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "hidden_size", true, 0, &c.hidden_size, kMaxWidth));
  LLM_RETURN_IF_ERROR(
      ReadInt(j, source, "intermediate_size", true, 0, &c.intermediate_size, kMaxWidth));
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "num_hidden_layers", true, 0, &c.num_layers, kMaxLayers));
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "num_attention_heads", true, 0, &c.num_heads, kMaxHeads));
  LLM_RETURN_IF_ERROR(
      ReadInt(j, source, "num_key_value_heads", false, c.num_heads, &c.num_kv_heads, kMaxHeads));
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "vocab_size", true, 0, &c.vocab_size, kMaxVocab));
  LLM_RETURN_IF_ERROR(
      ReadInt(j, source, "max_position_embeddings", false, 2048, &c.max_position_embeddings));
  if (c.hidden_size % c.num_heads != 0 && !(j.contains("head_dim") && !j["head_dim"].is_null())) {
    return InvalidArgument(source +
                           ": hidden_size is not a multiple of num_attention_heads and "
                           "no 'head_dim' is given");
  }
  const bool glm = c.arch == ModelArch::kGlm || c.arch == ModelArch::kGlm4;
  // transformers' GlmConfig / Glm4Config default head_dim to 128.
  LLM_RETURN_IF_ERROR(ReadInt(j, source, "head_dim", false, glm ? 128 : c.hidden_size / c.num_heads,
                              &c.head_dim, kMaxWidth));
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(source + ": num_attention_heads (" + std::to_string(c.num_heads) +
                           ") is not a multiple of num_key_value_heads (" +
                           std::to_string(c.num_kv_heads) + ")");
  }
  if (static_cast<int64_t>(c.num_heads) * c.head_dim > kMaxWidth) {
    return InvalidArgument(source + ": num_attention_heads × head_dim must be at most " +
                           std::to_string(kMaxWidth) + ", got " + std::to_string(c.num_heads) +
                           " × " + std::to_string(c.head_dim));
  }
  // The upper limit is the kernel backend's (asked of it when the model is created).
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return InvalidArgument(source + ": head_dim must be even and positive, got " +
                           std::to_string(c.head_dim));
  }
  LLM_RETURN_IF_ERROR(
      ReadNumber(j, source, "rms_norm_eps", glm ? 1.5625e-07 : 1e-6, &c.rms_norm_eps));
  LLM_RETURN_IF_ERROR(ReadNumber(j, source, "rope_theta", 10000.0, &c.rope_theta));
  LLM_RETURN_IF_ERROR(ReadRotaryDim(j, source, &c));
  LLM_RETURN_IF_ERROR(ReadRopeScaling(j, source, c, &c.rope_scaling));
  // GLM: attention_bias (default true) on q/k/v only, o_proj has none.
  const bool attention_bias = ReadBool(j, "attention_bias", glm);
  const bool qwen2 = c.arch == ModelArch::kQwen2 || c.arch == ModelArch::kQwen2Moe;
  c.qkv_bias = qwen2 || attention_bias;
  c.o_bias = !qwen2 && !glm && attention_bias;
  c.mlp_bias = ReadBool(j, "mlp_bias", false);
  c.qk_norm =
      c.arch == ModelArch::kQwen3 || c.arch == ModelArch::kQwen3Moe || c.arch == ModelArch::kGemma3;
  const bool gemma =
      c.arch == ModelArch::kGemma || c.arch == ModelArch::kGemma2 || c.arch == ModelArch::kGemma3;
  c.tie_word_embeddings = ReadBool(j, "tie_word_embeddings", gemma);
  if (gemma) {
    c.norm_weight_plus_one = true;
    c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  }
  c.fused_qkv = c.arch == ModelArch::kPhi3;
  c.fused_gate_up = c.arch == ModelArch::kPhi3 || glm;
  c.sandwich_norms = c.arch == ModelArch::kGlm4;
  LLM_RETURN_IF_ERROR(ReadMoe(j, source, &c));
  if (c.arch == ModelArch::kGemma3) LLM_RETURN_IF_ERROR(ReadGemma3(j, source, &c));
  if (c.arch == ModelArch::kGemma2 || c.arch == ModelArch::kGemma3) {
    // Gemma 3 as Gemma 2, with transformers' Gemma3TextConfig defaults: query_pre_attn_scalar
    // 256, no soft-caps unless the keys are set.
    c.sandwich_norms = true;
    const double scalar_default = c.arch == ModelArch::kGemma3 ? 256.0 : c.head_dim;
    LLM_RETURN_IF_ERROR(
        ReadNumber(j, source, "query_pre_attn_scalar", scalar_default, &c.query_pre_attn_scalar));
    LLM_RETURN_IF_ERROR(
        ReadNumber(j, source, "attn_logit_softcapping", 0.0, &c.attn_logit_softcap));
    LLM_RETURN_IF_ERROR(
        ReadNumber(j, source, "final_logit_softcapping", 0.0, &c.final_logit_softcap));
    if (c.query_pre_attn_scalar <= 0 || c.attn_logit_softcap < 0 || c.final_logit_softcap < 0) {
      return InvalidArgument(source +
                             ": query_pre_attn_scalar must be positive and the soft-caps "
                             "non-negative");
    }
  }
  LLM_RETURN_IF_ERROR(ReadSlidingWindow(j, source, &c));
  LLM_RETURN_IF_ERROR(ReadIdList(j, source, "bos_token_id", &c.bos_token_ids));
  LLM_RETURN_IF_ERROR(ReadIdList(j, source, "eos_token_id", &c.eos_token_ids));
  std::string dtype_key, dtype;
  LLM_RETURN_IF_ERROR(ReadString(j, source, "dtype", "float32", &dtype_key));
  LLM_RETURN_IF_ERROR(ReadString(j, source, "torch_dtype", dtype_key, &dtype));
  if (!ParseDType(dtype, &c.torch_dtype)) {
    return Unimplemented(source + ": torch_dtype '" + dtype +
                         "' is not supported (supported: float32, float16, bfloat16)");
  }
  return c;
}

StatusOr<LoadFormat> ParseLoadFormat(const std::string& text, const std::string& what) {
  if (text == "safetensors") return LoadFormat::kSafetensors;
  if (text == "gguf") return LoadFormat::kGguf;
  if (text == "dummy") return LoadFormat::kDummy;
  return InvalidArgument(what + " must be 'safetensors', 'gguf' or 'dummy', got '" + text + "'");
}

const char* LoadFormatName(LoadFormat f) {
  switch (f) {
    case LoadFormat::kSafetensors:
      return "safetensors";
    case LoadFormat::kGguf:
      return "gguf";
    case LoadFormat::kDummy:
      return "dummy";
  }
  return "?";
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  if (IsGgufPath(dir)) {
    LLM_ASSIGN_OR_RETURN(auto file, GgufFile::Open(dir));
    return ModelConfigFromGguf(*file);
  }
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open (is '" + dir + "' a model folder?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseModelConfig(ss.str(), path);
}

std::vector<float> RopeInvFreqLocal(const ModelConfig& c) {
  if (c.rope_local_theta <= 0) return {};
  ModelConfig local;
  local.head_dim = c.head_dim;
  local.rope_theta = c.rope_local_theta;
  return RopeInvFreq(local);
}

bool RopeUsesLongFactors(const RopeScaling& rs, int64_t length) {
  return rs.type == RopeScalingType::kLongRope && length > rs.original_max_position_embeddings;
}

std::vector<float> RopeInvFreq(const ModelConfig& c, bool long_factors) {
  const int dim = c.rope_dim(), half = dim / 2;
  std::vector<float> inv(half);
  const RopeScaling& rs = c.rope_scaling;
  for (int i = 0; i < half; ++i) {
    double freq = 1.0 / std::pow(c.rope_theta, (2.0 * i) / dim);
    if (rs.type == RopeScalingType::kLongRope) {
      freq /= (long_factors ? rs.long_factor : rs.short_factor)[i];
    } else if (rs.type == RopeScalingType::kFreqFactors) {
      freq /= rs.freq_factors[i];
    } else if (rs.type == RopeScalingType::kLinear) {
      freq /= rs.factor;
    } else if (rs.type == RopeScalingType::kLlama3) {
      // transformers _compute_llama3_parameters
      const double old_len = static_cast<double>(rs.original_max_position_embeddings);
      const double low_wavelen = old_len / rs.low_freq_factor;
      const double high_wavelen = old_len / rs.high_freq_factor;
      const double wavelen = 2 * M_PI / freq;
      if (wavelen > low_wavelen) {
        freq /= rs.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        freq = (1 - smooth) * freq / rs.factor + smooth * freq;
      }
    }
    inv[i] = static_cast<float>(freq);
  }
  return inv;
}

}  // namespace llm
