// Tensors of a GGUF file for LoadModelWeights: llama.cpp's tensor names mapped to the Hugging
// Face names the loader asks for, GGUF shapes (dims[0] is the row length, so [cols, rows])
// checked against the config, F32/F16/BF16 and block-format (Q8_0, Q4_0 ... Q6_K) data as views
// into the mapping, and the q/k rows of the llama architecture un-permuted:
// convert_hf_to_gguf.py's LlamaModel.permute interleaves the two halves of every head
// (llama.cpp runs llama with GPT-J-style RoPE), and this engine's RoPE is rotate-half, so row 2b +
// a of a GGUF head is row a * head_dim / 2 + b of the Hugging Face head (a in {0, 1}).
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "worker/model/weight_source.h"

namespace llm::weights_internal {
namespace {

// One expert's matrix in llama.cpp's stacked [experts, rows, cols] tensor: (the GGUF name,
// the expert), or ("", -1) when `hf` names no expert matrix. Mixtral: experts.E.w1/w3/w2;
// Qwen2-MoE: experts.E.gate_proj/up_proj/down_proj.
std::pair<std::string, int> ExpertOf(const std::string& hf) {
  static const std::map<std::string, std::string> kParts = {
      {"w1.weight", "ffn_gate_exps.weight"},    {"w3.weight", "ffn_up_exps.weight"},
      {"w2.weight", "ffn_down_exps.weight"},    {"gate_proj.weight", "ffn_gate_exps.weight"},
      {"up_proj.weight", "ffn_up_exps.weight"}, {"down_proj.weight", "ffn_down_exps.weight"}};
  const std::string prefix = "model.layers.";
  const size_t experts = hf.find(".experts.");
  if (hf.compare(0, prefix.size(), prefix) != 0 || experts == std::string::npos) return {"", -1};
  const size_t layer_end = hf.find('.', prefix.size());
  const size_t e_begin = experts + 9, e_end = hf.find('.', e_begin);
  if (e_end == std::string::npos || e_end == e_begin || e_end - e_begin > 6) return {"", -1};
  const auto part = kParts.find(hf.substr(e_end + 1));
  if (part == kParts.end()) return {"", -1};
  int e = 0;
  for (size_t i = e_begin; i < e_end; ++i) {
    if (hf[i] < '0' || hf[i] > '9') return {"", -1};
    e = e * 10 + (hf[i] - '0');
  }
  return {"blk." + hf.substr(prefix.size(), layer_end - prefix.size()) + "." + part->second, e};
}

// Hugging Face name -> llama.cpp name ("" when there is none). With Gemma 2's sandwich norms
// llama.cpp names the attention output's norm post_attention_norm and the MLP input's
// ffn_norm (elsewhere post_attention_layernorm is the MLP input's norm: ffn_norm). GLM-4-0414's
// sandwich norms (glm4) are post_self_attn_layernorm -> post_attention_norm,
// post_attention_layernorm -> ffn_norm, post_mlp_layernorm -> post_ffw_norm (gguf-py's
// tensor_mapping.py), so `sandwich_norms` is false for it.
std::string GgufName(const std::string& hf, bool sandwich_norms) {
  static const std::map<std::string, std::string> kSandwich = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"post_self_attn_layernorm.weight", "post_attention_norm.weight"},
      {"post_mlp_layernorm.weight", "post_ffw_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
      {"self_attn.qkv_proj.bias", "attn_qkv.bias"},
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate_proj.bias", "ffn_gate.bias"},
      {"mlp.up_proj.bias", "ffn_up.bias"},
      {"mlp.down_proj.bias", "ffn_down.bias"}};
  if (const auto it = kTop.find(hf); it != kTop.end()) return it->second;
  if (ExpertOf(hf).second >= 0) return ExpertOf(hf).first;
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string local = hf.substr(dot + 1);
  auto it = kLayer.find(local);
  if (sandwich_norms) {
    if (const auto s = kSandwich.find(local); s != kSandwich.end()) it = s;
  }
  if (it == kLayer.end()) return "";
  return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + it->second;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Row `r` of the Hugging Face layout lives in row Permuted(r) of a permuted GGUF tensor.
int Permuted(int r, int head_dim) {
  const int half = head_dim / 2, in_head = r % head_dim;
  return r - in_head + 2 * (in_head % half) + in_head / half;
}

class GgufSource : public TensorSource {
 public:
  GgufSource(const GgufFile& file, ModelWeights* w) : f_(file), w_(w) {
    const GgufValue* arch = file.Find("general.architecture");
    permuted_ = arch != nullptr && arch->type == GgufType::kString && arch->str == "llama";
  }

  StatusOr<Weight> Matrix(const std::string& name, int rows, int cols,
                          const MatrixSlice& slice) override {
    LLM_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Take(name));
    if (const int expert = ExpertOf(name).second; expert >= 0) {
      // Rows [expert * rows, (expert + 1) * rows) of the stacked tensor seen as 2-D.
      if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] <= expert) {
        return InvalidArgument(f_.path() + ": tensor '" + t->name + "' has shape " +
                               t->ShapeString() + ", expected [" + std::to_string(cols) + ", " +
                               std::to_string(rows) + ", > " + std::to_string(expert) +
                               "] (GGML order) from the metadata");
      }
      LLM_ASSIGN_OR_RETURN(DType format, Format(*t, true));
      MatrixSlice shifted = slice;
      shifted.rows = {expert * rows + slice.rows.begin, expert * rows + slice.rows.end};
      return SliceMatrix(*w_, t->data, format, cols, shifted, t->name);
    }
    // Qwen2-MoE's shared-expert gate [1, hidden] is stored as a vector.
    const bool row_vector = rows == 1 && t->dims.size() == 1 && t->dims[0] == cols;
    if (!row_vector && (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows)) {
      return InvalidArgument(f_.path() + ": tensor '" + t->name + "' has shape " +
                             t->ShapeString() + ", expected [" + std::to_string(cols) + ", " +
                             std::to_string(rows) + "] (GGML order) from the metadata");
    }
    LLM_ASSIGN_OR_RETURN(DType format, Format(*t, true));
    if (!(permuted_ && IsPermuted(name))) {
      return SliceMatrix(*w_, t->data, format, cols, slice, t->name);
    }
    // q/k of llama: rows un-permuted within each head (the slice is whole heads, so it never
    // mixes heads); a copy.
    const int hd = w_->config.head_dim;
    const size_t row_bytes = RowBytes(format, cols);
    const int out_rows = slice.rows.size();
    char* dst = OwnBytes(*w_, format, row_bytes * out_rows);
    const char* src = static_cast<const char*>(t->data);
    for (int r = 0; r < out_rows; ++r) {
      const int from = Permuted(slice.rows.begin + r, hd);
      std::memcpy(dst + row_bytes * r, src + row_bytes * from, row_bytes);
    }
    return Weight{dst, format, out_rows, cols};
  }

  bool norms_include_one() const override { return true; }

  StatusOr<std::vector<float>> Vector(const std::string& name, int size, float) override {
    // A q/k/v bias of a fused attn_qkv: entries [offset, offset + size) of attn_qkv.bias.
    std::string source = name;
    int offset = 0, total = size;
    if (const int at = FusedQkvBias(name, &source); at >= 0) {
      offset = at;
      total = w_->config.q_dim() + 2 * w_->config.kv_dim();
    }
    LLM_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Take(source));
    if (t->dims.size() != 1 || t->dims[0] != total) {
      return InvalidArgument(f_.path() + ": tensor '" + t->name + "' has shape " +
                             t->ShapeString() + ", expected [" + std::to_string(total) +
                             "] from the metadata");
    }
    LLM_ASSIGN_OR_RETURN(DType format, Format(*t, false));
    std::vector<float> out(size);
    const char* p = static_cast<const char*>(t->data);
    const bool permute = permuted_ && IsPermuted(name);
    for (int i = 0; i < size; ++i) {
      const int from = offset + (permute ? Permuted(i, w_->config.head_dim) : i);
      uint16_t h = 0;
      if (format == DType::kF32) {
        std::memcpy(&out[i], p + 4 * static_cast<size_t>(from), 4);
      } else {
        std::memcpy(&h, p + 2 * static_cast<size_t>(from), 2);
        out[i] = format == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
      }
    }
    return out;
  }

  std::vector<std::string> Unexpected() const override {
    // Phi-3's LongRoPE factors and Llama 3.1's rope_freqs are read into the config
    // (ModelConfigFromGguf).
    const RopeScalingType rope = w_->config.rope_scaling.type;
    std::vector<std::string> out;
    for (const auto& t : f_.tensors()) {
      if (rope == RopeScalingType::kLongRope &&
          (t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight")) {
        continue;
      }
      if (rope == RopeScalingType::kFreqFactors && t.name == "rope_freqs.weight") continue;
      if (!used_.count(t.name)) out.push_back(t.name);
    }
    return out;
  }

 private:
  // With fused_qkv (Phi-3, ChatGLM's attn_qkv), q_proj.bias / k_proj.bias / v_proj.bias are
  // parts of one [q; k; v] bias: sets `fused` to its Hugging Face name and returns the part's
  // first entry; -1 for any other name.
  int FusedQkvBias(const std::string& hf, std::string* fused) const {
    const ModelConfig& c = w_->config;
    if (!c.fused_qkv) return -1;
    const std::pair<std::string, int> parts[] = {{"self_attn.q_proj.bias", 0},
                                                 {"self_attn.k_proj.bias", c.q_dim()},
                                                 {"self_attn.v_proj.bias", c.q_dim() + c.kv_dim()}};
    for (const auto& [suffix, at] : parts) {
      if (!EndsWith(hf, suffix)) continue;
      *fused = hf.substr(0, hf.size() - suffix.size()) + "self_attn.qkv_proj.bias";
      return at;
    }
    return -1;
  }

  static bool IsPermuted(const std::string& hf) {
    return EndsWith(hf, "q_proj.weight") || EndsWith(hf, "k_proj.weight") ||
           EndsWith(hf, "q_proj.bias") || EndsWith(hf, "k_proj.bias");
  }

  StatusOr<const GgufTensorInfo*> Take(const std::string& hf) {
    const ModelConfig& c = w_->config;
    const std::string name = GgufName(hf, c.sandwich_norms && c.arch != ModelArch::kGlm4);
    const GgufTensorInfo* t = name.empty() ? nullptr : f_.FindTensor(name);
    if (t == nullptr) {
      return NotFound(f_.path() + ": missing tensor '" + (name.empty() ? hf : name) + "'");
    }
    used_.insert(name);
    return t;
  }

  // The weight format of a tensor's GGML type; matrices may also be in a block format (the
  // reader has checked that rows are whole blocks and the data lie inside the file).
  StatusOr<DType> Format(const GgufTensorInfo& t, bool matrix) const {
    static constexpr std::pair<GgmlType, DType> kFormats[] = {
        {GgmlType::kF32, DType::kF32},         {GgmlType::kF16, DType::kF16},
        {GgmlType::kBF16, DType::kBF16},       {GgmlType::kQ8_0, DType::kQ8_0},
        {GgmlType::kQ4_0, DType::kQ4_0},       {GgmlType::kQ4_1, DType::kQ4_1},
        {GgmlType::kQ5_0, DType::kQ5_0},       {GgmlType::kQ5_1, DType::kQ5_1},
        {GgmlType::kQ2_K, DType::kQ2_K},       {GgmlType::kQ3_K, DType::kQ3_K},
        {GgmlType::kQ4_K, DType::kQ4_K},       {GgmlType::kQ5_K, DType::kQ5_K},
        {GgmlType::kQ6_K, DType::kQ6_K},       {GgmlType::kIQ4_NL, DType::kIQ4_NL},
        {GgmlType::kIQ4_XS, DType::kIQ4_XS},   {GgmlType::kIQ2_XXS, DType::kIQ2_XXS},
        {GgmlType::kIQ2_XS, DType::kIQ2_XS},   {GgmlType::kIQ2_S, DType::kIQ2_S},
        {GgmlType::kIQ3_XXS, DType::kIQ3_XXS}, {GgmlType::kIQ3_S, DType::kIQ3_S},
        {GgmlType::kIQ1_S, DType::kIQ1_S},     {GgmlType::kIQ1_M, DType::kIQ1_M},
        {GgmlType::kTQ1_0, DType::kTQ1_0},     {GgmlType::kTQ2_0, DType::kTQ2_0},
        {GgmlType::kMXFP4, DType::kMXFP4},     {GgmlType::kQ1_0, DType::kQ1_0},
        {GgmlType::kNVFP4, DType::kNVFP4}};
    for (const auto& [ggml, dtype] : kFormats) {
      if (static_cast<GgmlType>(t.type) != ggml || (!matrix && IsBlockFormat(dtype))) continue;
      const size_t want = RowBytes(dtype, t.dims.empty() ? 0 : t.dims[0]) *
                          static_cast<size_t>(t.dims.empty() ? 0 : t.numel() / t.dims[0]);
      if (t.dims.empty() || t.dims[0] % BlockSize(dtype) != 0 || t.nbytes < want) {
        return InvalidArgument(f_.path() + ": tensor '" + t.name + "' of type " + t.TypeName() +
                               " and shape " + t.ShapeString() + " is not a whole number of " +
                               std::to_string(BlockSize(dtype)) + "-weight blocks");
      }
      return dtype;
    }
    return Unimplemented(
        f_.path() + ": tensor '" + t.name + "' is " + t.TypeName() +
        ", which is not supported yet (supported: F32, F16, BF16" +
        (matrix
             ? ", Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, "
               "MXFP4, NVFP4, Q1_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, "
               "TQ2_0)"
             : " for vectors)"));
  }

  const GgufFile& f_;
  ModelWeights* w_;
  bool permuted_ = false;
  std::set<std::string> used_;
};

}  // namespace

std::unique_ptr<TensorSource> MakeGgufSource(const GgufFile& file, ModelWeights* w) {
  return std::make_unique<GgufSource>(file, w);
}

}  // namespace llm::weights_internal
