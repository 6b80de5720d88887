#include "worker/model/model_weights.h"

#include "kernels/cpu_ops.h"
#include "worker/model/weight_source.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <stdexcept>

namespace llm {

namespace weights_internal {

char* OwnBytes(ModelWeights& w, DType format, size_t bytes) {
  switch (format) {
    case DType::kF32:
      return reinterpret_cast<char*>(w.owned32.emplace_back((bytes + 3) / 4).data());
    case DType::kF16:
    case DType::kBF16:
      return reinterpret_cast<char*>(w.owned16.emplace_back((bytes + 1) / 2).data());
    default:  // block formats
      break;
  }
  return reinterpret_cast<char*>(w.owned8.emplace_back(bytes).data());
}

StatusOr<Weight> SliceMatrix(ModelWeights& w, const void* base_v, DType format, int cols,
                             const MatrixSlice& slice, const std::string& what) {
  const char* base = static_cast<const char*>(base_v);
  const int out_rows = slice.rows.size(), out_cols = slice.cols.size();
  const size_t row_bytes = RowBytes(format, cols);
  if (slice.whole_rows(cols)) {  // a row range: a view into the mapping
    return Weight{base + static_cast<size_t>(slice.rows.begin) * row_bytes, format, out_rows,
                  out_cols};
  }
  const int bs = BlockSize(format);
  if (IsBlockFormat(format) && (slice.cols.begin % bs != 0 || out_cols % bs != 0)) {
    return InvalidArgument(
        "tensor '" + what + "' is " + DTypeName(format) + " (blocks of " + std::to_string(bs) +
        " columns) and this tensor-parallel shard keeps its "
        "columns [" +
        std::to_string(slice.cols.begin) + ", " + std::to_string(slice.cols.end) +
        "), which cut a block: use a tensor_parallel_size whose column shards "
        "are multiples of " +
        std::to_string(bs) + ", or an F16/F32 model");
  }
  // A column slice: copy each row's segment into owned memory.
  const size_t seg = RowBytes(format, out_cols), skip = RowBytes(format, slice.cols.begin);
  char* dst = OwnBytes(w, format, static_cast<size_t>(out_rows) * seg);
  for (int r = 0; r < out_rows; ++r) {
    std::memcpy(dst + static_cast<size_t>(r) * seg,
                base + static_cast<size_t>(slice.rows.begin + r) * row_bytes + skip, seg);
  }
  return Weight{dst, format, out_rows, out_cols};
}

}  // namespace weights_internal

namespace {

using weights_internal::ColSlice;
using weights_internal::MatrixSlice;
using weights_internal::OwnBytes;
using weights_internal::RowSlice;
using weights_internal::TensorSource;

// The name the loader asks for (the Hugging Face CausalLM name) of each tensor in the files of a
// multimodal checkpoint's language model ("" for the vision tower and projector, which are not
// loaded); the names of a CausalLM checkpoint are their own.
std::string LanguageModelName(const std::string& file_name) {
  auto starts = [&](const char* p) { return file_name.rfind(p, 0) == 0; };
  for (const char* vision : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                             "model.multi_modal_projector."}) {
    if (starts(vision)) return "";
  }
  if (starts("language_model.model.")) return file_name.substr(std::strlen("language_model."));
  if (file_name == "language_model.lm_head.weight") return "lm_head.weight";
  if (starts("model.language_model.")) {
    return "model." + file_name.substr(std::strlen("model.language_model."));
  }
  return file_name;
}

// Where a multimodal checkpoint keeps the tensor the loader calls `name`, for error messages.
std::string MultimodalNames(const std::string& name) {
  const std::string newer = name.rfind("model.", 0) == 0
                                ? "model.language_model." + name.substr(std::strlen("model."))
                                : name;
  return " (a Gemma3ForConditionalGeneration names it language_model." + name + " or " + newer +
         ")";
}

class FileSource : public TensorSource {
 public:
  FileSource(ModelWeightFiles* files, ModelWeights* w) : files_(files), w_(w) {
    for (const auto& n : files_->TensorNames()) {
      const std::string name = w_->config.language_model_of_multimodal ? LanguageModelName(n) : n;
      if (!name.empty()) file_name_.emplace(name, n);
    }
  }

  StatusOr<Weight> Matrix(const std::string& name, int rows, int cols,
                          const MatrixSlice& slice) override {
    LLM_ASSIGN_OR_RETURN(TensorView t, Take(name));
    if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
      return InvalidArgument(t.file + ": tensor '" + name + "' has shape " + t.ShapeString() +
                             ", expected [" + std::to_string(rows) + ", " + std::to_string(cols) +
                             "] from config.json");
    }
    return weights_internal::SliceMatrix(*w_, t.data, t.dtype, cols, slice, name);
  }

  StatusOr<std::vector<float>> Vector(const std::string& name, int size, float) override {
    LLM_ASSIGN_OR_RETURN(TensorView t, Take(name));
    if (t.shape.size() != 1 || t.shape[0] != size) {
      return InvalidArgument(t.file + ": tensor '" + name + "' has shape " + t.ShapeString() +
                             ", expected [" + std::to_string(size) + "] from config.json");
    }
    std::vector<float> out(size);
    for (int i = 0; i < size; ++i) {
      const char* p = static_cast<const char*>(t.data);
      uint16_t h = 0;
      switch (t.dtype) {
        case DType::kF32:
          std::memcpy(&out[i], p + 4 * i, 4);
          break;
        case DType::kF16:
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = F16ToF32(h);
          break;
        case DType::kBF16:
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = Bf16ToF32(h);
          break;
        default:  // safetensors has no block formats
          break;
      }
    }
    return out;
  }

  // Names present in the files that no Matrix/Vector call asked for, except those a
  // checkpoint may carry: a tied model's lm_head copy, rotary caches (derived data).
  std::vector<std::string> Unexpected() const override {
    std::vector<std::string> out;
    for (const auto& [n, file_name] : file_name_) {
      if (used_.count(n)) continue;
      if (n == "lm_head.weight" && w_->config.tie_word_embeddings) continue;
      if (n.find("rotary_emb.inv_freq") != std::string::npos) continue;
      out.push_back(n);
    }
    return out;
  }

 private:
  StatusOr<TensorView> Take(const std::string& name) {
    const auto it = file_name_.find(name);
    if (it == file_name_.end()) {
      return NotFound("missing tensor '" + name + "' in the safetensors" +
                      (w_->config.language_model_of_multimodal ? MultimodalNames(name) : ""));
    }
    used_.insert(name);
    return files_->Get(it->second);
  }
  ModelWeightFiles* files_;
  ModelWeights* w_;
  std::map<std::string, std::string> file_name_;  // loader's name -> name in the files
  std::set<std::string> used_;
};

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kChunkStride = 0x632be59bd9b4e019ull;
constexpr size_t kChunk = 65536;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element i of the random stream of a tensor: SplitMix64 restarted every kChunk elements, so
// any element (and so any shard) can be computed on its own.
float DummyValue(uint64_t base, size_t i) {
  const uint64_t state = base + static_cast<uint64_t>(i / kChunk) * kChunkStride +
                         static_cast<uint64_t>(i % kChunk + 1) * kGamma;
  const double u = static_cast<double>(Mix64(state) >> 11) * 0x1.0p-53;
  return static_cast<float>((u - 0.5) * 0.1);
}

// Random weights: uniform in [-0.05, 0.05] (std ~0.029), norms at `fill`.
// With a quantization format the linear weights are random blocks of it instead.
class DummySource : public TensorSource {
 public:
  DummySource(ModelWeights* w, uint64_t seed, std::optional<DType> quantize)
      : w_(w), seed_(seed), quantize_(quantize) {}

  StatusOr<Weight> Matrix(const std::string& name, int, int cols,
                          const MatrixSlice& slice) override {
    const int out_rows = slice.rows.size(), out_cols = slice.cols.size();
    if (const auto q = quantize_ ? weights_internal::QuantizedFormat(name, *quantize_, out_cols)
                                 : std::nullopt) {
      const int64_t blocks = static_cast<int64_t>(out_rows) * (out_cols / BlockSize(*q));
      char* dst = OwnBytes(*w_, *q, static_cast<size_t>(blocks) * BlockBytes(*q));
      kernels::FillRandomBlocks(*q,
                                Hash(name) + static_cast<uint64_t>(slice.rows.begin) * 7919 +
                                    static_cast<uint64_t>(slice.cols.begin),
                                dst, blocks);
      return Weight{dst, *q, out_rows, out_cols};
    }
    const size_t n = static_cast<size_t>(out_rows) * out_cols;
    // Output element j is element (row, col) of the full matrix.
    auto source_index = [&](size_t j) {
      const size_t r = j / out_cols, c = j % out_cols;
      return (slice.rows.begin + r) * static_cast<size_t>(cols) + slice.cols.begin + c;
    };
    const uint64_t base = Hash(name);
    const DType dt = w_->config.torch_dtype;
    if (dt == DType::kF32) {
      auto& buf = w_->owned32.emplace_back(n);
      FillParallel(n, base, source_index, [&](size_t i, float x) { buf[i] = x; });
      return Weight{buf.data(), dt, out_rows, out_cols};
    }
    auto& buf = w_->owned16.emplace_back(n);
    const bool bf16 = dt == DType::kBF16;
    FillParallel(n, base, source_index,
                 [&](size_t i, float x) { buf[i] = bf16 ? F32ToBf16(x) : F32ToF16(x); });
    return Weight{buf.data(), dt, out_rows, out_cols};
  }

  StatusOr<std::vector<float>> Vector(const std::string& name, int size, float fill) override {
    if (fill != 0.0f) return std::vector<float>(size, fill);
    std::vector<float> v(size);
    FillParallel(
        size, Hash(name), [](size_t i) { return i; }, [&](size_t i, float x) { v[i] = x; });
    return v;
  }

 private:
  uint64_t Hash(const std::string& name) const {
    uint64_t h = seed_ ^ 0xcbf29ce484222325ull;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return h;
  }
  // set(i, value of element index(i) of the tensor's stream) for i < n.
  template <typename Index, typename Set>
  static void FillParallel(size_t n, uint64_t base, Index&& index, Set&& set) {
    const long chunks = static_cast<long>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; ++c) {
      const size_t end = std::min(n, static_cast<size_t>(c + 1) * kChunk);
      for (size_t i = static_cast<size_t>(c) * kChunk; i < end; ++i) {
        set(i, DummyValue(base, index(i)));
      }
    }
  }
  ModelWeights* w_;
  uint64_t seed_;
  std::optional<DType> quantize_;
};

std::vector<float> Slice(const std::vector<float>& v, ShardRange r) {
  return std::vector<float>(v.begin() + r.begin, v.begin() + r.end);
}

// Keeps `v` alive in w.owned32 and returns an F32 vector Weight over it (moving a std::vector
// keeps its buffer, so the view stays valid as owned32 grows).
Weight Own(ModelWeights& w, std::vector<float> v) {
  auto& kept = w.owned32.emplace_back(std::move(v));
  return Weight{kept.data(), DType::kF32, 1, static_cast<int>(kept.size())};
}

// A copy of `m` with zero rows appended up to `rows` (a short vocab-parallel lm_head shard).
Weight PadRows(ModelWeights& w, const Weight& m, int rows) {
  const size_t have = RowBytes(m.format, m.cols) * m.rows, want = RowBytes(m.format, m.cols) * rows;
  char* dst = OwnBytes(w, m.format, want);  // zero-filled: zero Q8_0 blocks are zero rows too
  if (have > 0) std::memcpy(dst, m.data, have);
  return Weight{dst, m.format, rows, m.cols};
}

// An RMSNorm weight as the kernels use it (Gemma's stored w becomes 1 + w).
StatusOr<std::vector<float>> NormVector(TensorSource& src, const ModelConfig& c,
                                        const std::string& name, int size) {
  const bool add_one = c.norm_weight_plus_one && !src.norms_include_one();
  LLM_ASSIGN_OR_RETURN(auto v, src.Vector(name, size, add_one ? 0.0f : 1.0f));
  if (add_one) {
    for (float& x : v) x += 1.0f;
  }
  return v;
}

Status LoadAttention(TensorSource& src, ModelWeights& w, const std::string& p, LayerWeights* lw) {
  const ModelConfig& c = w.config;
  const int h = c.hidden_size, hd = c.head_dim;
  const ShardRange q_rows{w.shard.heads.begin * hd, w.shard.heads.end * hd};
  const ShardRange kv_rows{w.shard.kv_heads.begin * hd, w.shard.kv_heads.end * hd};
  if (c.fused_qkv) {  // rows [q; k; v] of one matrix: each shard takes its rows of each
    const std::string name = p + "self_attn.qkv_proj.weight";
    const int rows = c.q_dim() + 2 * c.kv_dim(), k0 = c.q_dim(), v0 = c.q_dim() + c.kv_dim();
    LLM_ASSIGN_OR_RETURN(lw->q, src.Matrix(name, rows, h, RowSlice(q_rows, h)));
    LLM_ASSIGN_OR_RETURN(
        lw->k, src.Matrix(name, rows, h, RowSlice({k0 + kv_rows.begin, k0 + kv_rows.end}, h)));
    LLM_ASSIGN_OR_RETURN(
        lw->v, src.Matrix(name, rows, h, RowSlice({v0 + kv_rows.begin, v0 + kv_rows.end}, h)));
  } else {
    LLM_ASSIGN_OR_RETURN(
        lw->q, src.Matrix(p + "self_attn.q_proj.weight", c.q_dim(), h, RowSlice(q_rows, h)));
    LLM_ASSIGN_OR_RETURN(
        lw->k, src.Matrix(p + "self_attn.k_proj.weight", c.kv_dim(), h, RowSlice(kv_rows, h)));
    LLM_ASSIGN_OR_RETURN(
        lw->v, src.Matrix(p + "self_attn.v_proj.weight", c.kv_dim(), h, RowSlice(kv_rows, h)));
  }
  LLM_ASSIGN_OR_RETURN(
      lw->o, src.Matrix(p + "self_attn.o_proj.weight", h, c.q_dim(), ColSlice(h, q_rows)));
  if (c.qkv_bias) {
    LLM_ASSIGN_OR_RETURN(auto qb, src.Vector(p + "self_attn.q_proj.bias", c.q_dim(), 0));
    LLM_ASSIGN_OR_RETURN(auto kb, src.Vector(p + "self_attn.k_proj.bias", c.kv_dim(), 0));
    LLM_ASSIGN_OR_RETURN(auto vb, src.Vector(p + "self_attn.v_proj.bias", c.kv_dim(), 0));
    lw->q_bias = Own(w, Slice(qb, q_rows));
    lw->k_bias = Own(w, Slice(kb, kv_rows));
    lw->v_bias = Own(w, Slice(vb, kv_rows));
  }
  if (c.o_bias) {
    LLM_ASSIGN_OR_RETURN(auto ob, src.Vector(p + "self_attn.o_proj.bias", h, 0));
    lw->o_bias = Own(w, std::move(ob));
  }
  if (c.qk_norm) {
    LLM_ASSIGN_OR_RETURN(auto qn, NormVector(src, c, p + "self_attn.q_norm.weight", hd));
    LLM_ASSIGN_OR_RETURN(auto kn, NormVector(src, c, p + "self_attn.k_norm.weight", hd));
    lw->q_norm = Own(w, std::move(qn));
    lw->k_norm = Own(w, std::move(kn));
  }
  return Status::Ok();
}

// A SwiGLU MLP's three matrices under `gate`, `up`, `down` (full names), this rank's columns.
StatusOr<ExpertWeights> LoadSwiGlu(TensorSource& src, const ModelConfig& c, const std::string& gate,
                                   const std::string& up, const std::string& down, int inter,
                                   ShardRange mine) {
  const int h = c.hidden_size;
  ExpertWeights e;
  LLM_ASSIGN_OR_RETURN(e.gate, src.Matrix(gate, inter, h, RowSlice(mine, h)));
  LLM_ASSIGN_OR_RETURN(e.up, src.Matrix(up, inter, h, RowSlice(mine, h)));
  LLM_ASSIGN_OR_RETURN(e.down, src.Matrix(down, h, inter, ColSlice(h, mine)));
  return e;
}

// Mixtral (block_sparse_moe.gate, experts.E.w1/w3/w2), Qwen2-MoE (mlp.gate,
// mlp.experts.E.gate_proj/up_proj/down_proj, mlp.shared_expert.*, mlp.shared_expert_gate) and
// Qwen3-MoE (Qwen2-MoE's names without the shared expert).
Status LoadMoe(TensorSource& src, ModelWeights& w, const std::string& p, LayerWeights* lw) {
  const ModelConfig& c = w.config;
  const int h = c.hidden_size, n = c.num_experts;
  const bool mixtral = c.arch == ModelArch::kMixtral;
  const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
  LLM_ASSIGN_OR_RETURN(lw->router, src.Matrix(moe + "gate.weight", n, h, RowSlice({0, n}, h)));
  lw->experts.resize(n);
  for (int e = 0; e < n; ++e) {
    const std::string x = moe + "experts." + std::to_string(e) + ".";
    LLM_ASSIGN_OR_RETURN(lw->experts[e],
                         mixtral
                             ? LoadSwiGlu(src, c, x + "w1.weight", x + "w3.weight", x + "w2.weight",
                                          c.moe_intermediate_size, w.shard.moe_intermediate)
                             : LoadSwiGlu(src, c, x + "gate_proj.weight", x + "up_proj.weight",
                                          x + "down_proj.weight", c.moe_intermediate_size,
                                          w.shard.moe_intermediate));
  }
  if (c.shared_expert_intermediate_size > 0) {
    const std::string x = moe + "shared_expert.";
    LLM_ASSIGN_OR_RETURN(
        lw->shared_expert,
        LoadSwiGlu(src, c, x + "gate_proj.weight", x + "up_proj.weight", x + "down_proj.weight",
                   c.shared_expert_intermediate_size, w.shard.shared_intermediate));
    LLM_ASSIGN_OR_RETURN(lw->shared_expert_gate,
                         src.Matrix(moe + "shared_expert_gate.weight", 1, h, RowSlice({0, 1}, h)));
  }
  return Status::Ok();
}

Status LoadLayer(TensorSource& src, ModelWeights& w, int l, LayerWeights* lw) {
  const ModelConfig& c = w.config;
  const std::string p = "model.layers." + std::to_string(l) + ".";
  const int h = c.hidden_size, inter = c.intermediate_size;
  const ShardRange mine = w.shard.intermediate;
  // With sandwich norms post_attention_norm is the attention output's, pre_ffw_norm the MLP
  // input's and post_ffw_norm the MLP output's: Gemma 2/3's post_attention_layernorm,
  // pre_feedforward_layernorm, post_feedforward_layernorm; GLM-4-0414's
  // post_self_attn_layernorm, post_attention_layernorm, post_mlp_layernorm.
  const bool glm4 = c.arch == ModelArch::kGlm4;
  LLM_ASSIGN_OR_RETURN(auto in_norm, NormVector(src, c, p + "input_layernorm.weight", h));
  LLM_ASSIGN_OR_RETURN(auto post_norm, NormVector(src, c,
                                                  p + (glm4 ? "post_self_attn_layernorm.weight"
                                                            : "post_attention_layernorm.weight"),
                                                  h));
  lw->input_norm = Own(w, std::move(in_norm));
  lw->post_attention_norm = Own(w, std::move(post_norm));
  if (c.sandwich_norms) {
    LLM_ASSIGN_OR_RETURN(auto pre_ffw, NormVector(src, c,
                                                  p + (glm4 ? "post_attention_layernorm.weight"
                                                            : "pre_feedforward_layernorm.weight"),
                                                  h));
    LLM_ASSIGN_OR_RETURN(auto post_ffw, NormVector(src, c,
                                                   p + (glm4 ? "post_mlp_layernorm.weight"
                                                             : "post_feedforward_layernorm.weight"),
                                                   h));
    lw->pre_ffw_norm = Own(w, std::move(pre_ffw));
    lw->post_ffw_norm = Own(w, std::move(post_ffw));
  }
  LLM_RETURN_IF_ERROR(LoadAttention(src, w, p, lw));
  if (c.layer_is_moe(l)) return LoadMoe(src, w, p, lw);
  if (c.fused_gate_up) {  // rows [gate; up]
    const std::string name = p + "mlp.gate_up_proj.weight";
    LLM_ASSIGN_OR_RETURN(lw->gate, src.Matrix(name, 2 * inter, h, RowSlice(mine, h)));
    LLM_ASSIGN_OR_RETURN(lw->up, src.Matrix(name, 2 * inter, h,
                                            RowSlice({inter + mine.begin, inter + mine.end}, h)));
  } else {
    LLM_ASSIGN_OR_RETURN(lw->gate,
                         src.Matrix(p + "mlp.gate_proj.weight", inter, h, RowSlice(mine, h)));
    LLM_ASSIGN_OR_RETURN(lw->up, src.Matrix(p + "mlp.up_proj.weight", inter, h, RowSlice(mine, h)));
  }
  LLM_ASSIGN_OR_RETURN(lw->down,
                       src.Matrix(p + "mlp.down_proj.weight", h, inter, ColSlice(h, mine)));
  if (c.mlp_bias) {
    LLM_ASSIGN_OR_RETURN(auto gb, src.Vector(p + "mlp.gate_proj.bias", inter, 0));
    LLM_ASSIGN_OR_RETURN(auto ub, src.Vector(p + "mlp.up_proj.bias", inter, 0));
    lw->gate_bias = Own(w, Slice(gb, mine));
    lw->up_bias = Own(w, Slice(ub, mine));
    LLM_ASSIGN_OR_RETURN(auto db, src.Vector(p + "mlp.down_proj.bias", h, 0));
    lw->down_bias = Own(w, std::move(db));
  }
  return Status::Ok();
}

Status LoadAll(TensorSource& src, ModelWeights* w) {
  const ModelConfig& c = w->config;
  const PipelineStage& pp = w->pipeline;
  const MatrixSlice vocab_rows = RowSlice(w->shard.vocab, c.hidden_size);
  if (pp.first() || (pp.last() && c.tie_word_embeddings)) {
    LLM_ASSIGN_OR_RETURN(
        w->embed, src.Matrix("model.embed_tokens.weight", c.vocab_size, c.hidden_size, vocab_rows));
  }
  w->layers.resize(c.num_layers);
  for (int l = pp.layers.begin; l < pp.layers.end; ++l) {
    LLM_RETURN_IF_ERROR(LoadLayer(src, *w, l, &w->layers[l]));
  }
  if (!pp.last()) return Status::Ok();
  LLM_ASSIGN_OR_RETURN(auto norm, NormVector(src, c, "model.norm.weight", c.hidden_size));
  w->final_norm = Own(*w, std::move(norm));
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed;
  } else {
    LLM_ASSIGN_OR_RETURN(w->lm_head,
                         src.Matrix("lm_head.weight", c.vocab_size, c.hidden_size, vocab_rows));
  }
  if (w->lm_head.rows < w->shard.vocab_chunk) {
    w->lm_head = PadRows(*w, w->lm_head, w->shard.vocab_chunk);
  }
  return Status::Ok();
}

// Checks that `tp` can shard `c` (read from `source`) and fills w->tp and w->shard.
Status PlanShard(const std::string& source, TensorParallel tp, ModelWeights* w) {
  const ModelConfig& c = w->config;
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size) {
    return InvalidArgument("tensor parallel rank " + std::to_string(tp.rank) + " of size " +
                           std::to_string(tp.size) + " is out of range");
  }
  if (c.num_heads % tp.size != 0) {
    return InvalidArgument("tensor parallel size " + std::to_string(tp.size) +
                           " does not divide num_attention_heads = " + std::to_string(c.num_heads) +
                           " of " + source + " (query heads are split across ranks)");
  }
  // KV heads are split when the size divides them, and replicated (each rank keeps the one KV
  // head its query heads read, as vLLM does) when they divide the size.
  if (c.num_kv_heads % tp.size != 0 && tp.size % c.num_kv_heads != 0) {
    return InvalidArgument("tensor parallel size " + std::to_string(tp.size) +
                           " and num_key_value_heads = " + std::to_string(c.num_kv_heads) + " of " +
                           source +
                           ": one must divide the other (KV heads are split "
                           "across ranks, or replicated when there are fewer than ranks)");
  }
  if (c.vocab_size < tp.size || c.intermediate_size < tp.size) {
    return InvalidArgument("tensor parallel size " + std::to_string(tp.size) +
                           " exceeds vocab_size or intermediate_size of " + source);
  }
  w->tp = tp;
  w->shard.heads = SplitRange(c.num_heads, tp.size, tp.rank);
  if (c.num_kv_heads % tp.size == 0) {
    w->shard.kv_heads = SplitRange(c.num_kv_heads, tp.size, tp.rank);
  } else {  // replicated: tp.size / num_kv_heads consecutive ranks share one KV head
    const int kv = tp.rank / (tp.size / c.num_kv_heads);
    w->shard.kv_heads = ShardRange{kv, kv + 1};
  }
  w->shard.intermediate = SplitRange(c.intermediate_size, tp.size, tp.rank);
  w->shard.moe_intermediate = SplitRange(c.moe_intermediate_size, tp.size, tp.rank);
  w->shard.shared_intermediate = SplitRange(c.shared_expert_intermediate_size, tp.size, tp.rank);
  w->shard.vocab = SplitRange(c.vocab_size, tp.size, tp.rank);
  w->shard.vocab_chunk = (c.vocab_size + tp.size - 1) / tp.size;
  return Status::Ok();
}

// A tensor of the files (Hugging Face or GGUF name) that another pipeline stage loads.
bool OtherStageTensor(const std::string& name, const ModelWeights& w) {
  const PipelineStage& pp = w.pipeline;
  for (const char* prefix : {"model.layers.", "blk."}) {
    const size_t n = std::strlen(prefix);
    if (name.compare(0, n, prefix) != 0) continue;
    const int layer = std::atoi(name.c_str() + n);
    return layer < pp.layers.begin || layer >= pp.layers.end;
  }
  const bool embed = name == "model.embed_tokens.weight" || name == "token_embd.weight";
  if (embed) return !(pp.first() || (pp.last() && w.config.tie_word_embeddings));
  const bool head = name == "lm_head.weight" || name == "output.weight" ||
                    name == "model.norm.weight" || name == "output_norm.weight";
  return head && !pp.last();
}

size_t MatrixBytes(const ModelWeights& w) {
  auto bytes = [](const Weight& m) { return RowBytes(m.format, m.cols) * m.rows; };
  size_t total = bytes(w.embed) + (w.lm_head.data == w.embed.data ? 0 : bytes(w.lm_head));
  for (const auto& l : w.layers) {
    for (const auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) total += bytes(*m);
    for (const auto* e : {&l.shared_expert}) {
      total += bytes(e->gate) + bytes(e->up) + bytes(e->down);
    }
    for (const auto& e : l.experts) total += bytes(e.gate) + bytes(e.up) + bytes(e.down);
    total += bytes(l.router) + bytes(l.shared_expert_gate);
  }
  return total;
}

}  // namespace

EngineShard EngineShardOf(const EngineSection& engine, int rank, int world_size) {
  const int stages = std::max(1, engine.pipeline_parallel_size);
  const int tp_size = std::max(1, world_size / stages);
  EngineShard s;
  s.tp = TensorParallel{rank % tp_size, tp_size};
  s.pipeline.stage = rank / tp_size;
  s.pipeline.num_stages = stages;
  s.pipeline.partition = engine.pipeline_layer_partition;
  return s;
}

ShardRange SplitRange(int n, int parts, int part) {
  const int chunk = (n + parts - 1) / parts;
  return {std::min(n, part * chunk), std::min(n, (part + 1) * chunk)};
}

namespace {

StatusOr<std::unique_ptr<ModelWeights>> Load(const std::string& path, LoadFormat format,
                                             uint64_t dummy_seed, TensorParallel tp,
                                             std::optional<DType> quantize,
                                             PipelineStage pipeline) {
  auto w = std::make_unique<ModelWeights>();
  const bool gguf = IsGgufPath(path);
  if (format == LoadFormat::kGguf && !gguf) {
    return InvalidArgument(path + ": load format 'gguf' needs a .gguf file");
  }
  std::unique_ptr<TensorSource> src;
  std::string source = path + "/config.json";
  if (gguf) {
    LLM_ASSIGN_OR_RETURN(w->gguf, GgufFile::Open(path));
    LLM_ASSIGN_OR_RETURN(w->config, ModelConfigFromGguf(*w->gguf));
    source = path;
  } else {
    LLM_ASSIGN_OR_RETURN(w->config, LoadModelConfig(path));
  }
  LLM_RETURN_IF_ERROR(PlanShard(source, tp, w.get()));
  if (pipeline.stage < 0 || pipeline.stage >= pipeline.num_stages) {
    return InvalidArgument("pipeline stage " + std::to_string(pipeline.stage) + " of " +
                           std::to_string(pipeline.num_stages) + " is out of range");
  }
  const StatusOr<std::vector<LayerRange>> ranges =
      PipelineLayerRanges(w->config.num_layers, pipeline.num_stages, pipeline.partition);
  if (!ranges.ok()) return ranges.status().WithContext(source);
  pipeline.layers = (*ranges)[static_cast<size_t>(pipeline.stage)];
  w->pipeline = std::move(pipeline);
  if (format == LoadFormat::kDummy) {
    src = std::make_unique<DummySource>(w.get(), dummy_seed, quantize);
  } else if (gguf) {
    src = weights_internal::MakeGgufSource(*w->gguf, w.get());
  } else {
    LLM_ASSIGN_OR_RETURN(w->files, ModelWeightFiles::Open(path));
    src = std::make_unique<FileSource>(w->files.get(), w.get());
  }
  if (quantize && format != LoadFormat::kDummy) {
    src = weights_internal::MakeQuantizingSource(std::move(src), *quantize, w.get());
  }
  Status s = LoadAll(*src, w.get());
  if (!s.ok()) return s.WithContext(path);
  for (const auto& name : src->Unexpected()) {
    if (OtherStageTensor(name, *w)) continue;
    return InvalidArgument(path + ": unexpected tensor '" + name + "' for " +
                           w->config.architecture + (gguf ? "" : " with this config.json"));
  }
  w->matrix_bytes = MatrixBytes(*w);
  return w;
}

}  // namespace

std::optional<DType> ModelQuantization(const ModelSection& m) {
  DType t;
  if (ParseQuantFormat(m.quantization, &t)) return t;
  return std::nullopt;
}

StatusOr<std::unique_ptr<ModelWeights>> LoadModelWeights(const std::string& dir, LoadFormat format,
                                                         uint64_t dummy_seed, TensorParallel tp,
                                                         std::optional<DType> quantize,
                                                         PipelineStage pipeline) {
  // A config.json may declare sizes this host cannot hold (dummy weights are allocated, not
  // mapped): that is an error for the operator, never a crash.
  try {
    if (quantize && !IsBlockFormat(*quantize)) {
      return InvalidArgument(std::string("model.quantization: ") + DTypeName(*quantize) +
                             " is not a block format");
    }
    return Load(dir, format, dummy_seed, tp, quantize, std::move(pipeline));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(dir + ": not enough memory for the weights config.json describes");
  } catch (const std::length_error&) {
    return ResourceExhausted(dir + ": the weights config.json describes are too large");
  }
}

void ModelWeights::ForEachWeight(const std::function<void(const std::string&, Weight&)>& fn) {
  if (!embed.empty()) fn("embed_tokens", embed);
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerWeights& lw = layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    const std::pair<const char*, Weight*> named[] = {
        {"input_layernorm", &lw.input_norm},
        {"post_attention_layernorm", &lw.post_attention_norm},
        {"pre_feedforward_layernorm", &lw.pre_ffw_norm},
        {"post_feedforward_layernorm", &lw.post_ffw_norm},
        {"q_norm", &lw.q_norm},
        {"k_norm", &lw.k_norm},
        {"q_proj", &lw.q},
        {"k_proj", &lw.k},
        {"v_proj", &lw.v},
        {"o_proj", &lw.o},
        {"gate_proj", &lw.gate},
        {"up_proj", &lw.up},
        {"down_proj", &lw.down},
        {"q_proj.bias", &lw.q_bias},
        {"k_proj.bias", &lw.k_bias},
        {"v_proj.bias", &lw.v_bias},
        {"o_proj.bias", &lw.o_bias},
        {"gate_proj.bias", &lw.gate_bias},
        {"up_proj.bias", &lw.up_bias},
        {"down_proj.bias", &lw.down_bias}};
    for (auto [name, weight] : named) {
      if (!weight->empty()) fn(p + name, *weight);
    }
    if (!lw.router.empty()) fn(p + "router", lw.router);
    for (size_t e = 0; e < lw.experts.size(); ++e) {
      const std::string x = p + "experts." + std::to_string(e) + ".";
      fn(x + "gate", lw.experts[e].gate);
      fn(x + "up", lw.experts[e].up);
      fn(x + "down", lw.experts[e].down);
    }
    if (!lw.shared_expert.gate.empty()) {
      fn(p + "shared_expert.gate", lw.shared_expert.gate);
      fn(p + "shared_expert.up", lw.shared_expert.up);
      fn(p + "shared_expert.down", lw.shared_expert.down);
      fn(p + "shared_expert_gate", lw.shared_expert_gate);
    }
  }
  if (!final_norm.empty()) fn("norm", final_norm);
  if (lm_head.data != embed.data && !lm_head.empty()) fn("lm_head", lm_head);
}

void ModelWeights::ForEachWeight(
    const std::function<void(const std::string&, const Weight&)>& fn) const {
  const_cast<ModelWeights*>(this)->ForEachWeight(
      [&](const std::string& name, Weight& t) { fn(name, t); });
}

Status CheckWeightFormats(const ModelWeights& w, const kernels::BackendCaps& caps) {
  Status status = Status::Ok();
  w.ForEachWeight([&](const std::string& name, const Weight& t) {
    if (status.ok() && t.rows > 1 && !caps.SupportsWeightFormat(t.format)) {
      status = InvalidArgument("weight '" + name + "' is " + DTypeName(t.format) + ", which the " +
                               caps.name + " backend cannot use");
    }
  });
  return status;
}

namespace {

// The backend's own layouts of the matmul weights (Backend::PrepareMatmulWeightInto) on a
// backend of host memory, or its copies of them (the CPU backend's huge pages), all in one
// allocation laid end to end: a weight too small for a huge page of its own (a tensor-parallel
// shard, an expert) and every tensor's tail share the arena's huge pages, and only the arena's
// end is in small pages. The embedding table, which Embedding reads, keeps its layout. A source
// the backend copied is given back: its pages of a mapped GGUF or safetensors file, or the owned
// copy it was.
Status PrepareMatmulWeights(ModelWeights& w, kernels::Backend& backend) {
  constexpr size_t kAlign = 64;  // every weight starts on a cache line (the SIMD loads)
  struct Prepared {
    Weight* t;
    bool embed;
    size_t offset;
  };
  std::vector<Prepared> todo;
  size_t total = 0;
  const bool tied = w.lm_head.data == w.embed.data;
  w.ForEachWeight([&](const std::string& name, Weight& t) {
    if (t.rows <= 1) return;
    // The embedding table keeps its layout (Embedding reads it) and is prepared only when tied:
    // then it is also the lm_head, streamed whole every step (the CPU backend copies it into
    // huge pages); an untied one is only looked up by row.
    const bool embed = name == "embed_tokens";
    if (embed && !tied) return;
    const size_t bytes = backend.PreparedWeightBytes(t, /*keep_layout=*/embed, /*pooled=*/true);
    if (bytes == 0) return;
    todo.push_back({&t, embed, total});
    total += (bytes + kAlign - 1) / kAlign * kAlign;
  });
  if (todo.empty()) return Status::Ok();
  StatusOr<kernels::Buffer> arena = backend.Allocate(total);
  if (!arena.ok()) {
    return arena.status().WithContext("preparing " + std::to_string(todo.size()) +
                                      " matmul weights (" + std::to_string(total >> 20) + " MiB)");
  }
  auto* base = static_cast<uint8_t*>(arena->data());
  w.placed.push_back(std::move(*arena));
  for (const Prepared& p : todo) {
    Weight& t = *p.t;
    const Weight before = t;
    backend.PrepareMatmulWeightInto(t, /*keep_layout=*/p.embed, base + p.offset);
    if (p.embed) w.lm_head = t;  // the same view, moved
    const size_t bytes = RowBytes(before.format, before.cols) * static_cast<size_t>(before.rows);
    if (w.gguf != nullptr) w.gguf->ReleasePages(before.data, bytes);
    if (w.files != nullptr) w.files->ReleaseRange(before.data, bytes);  // F16 / BF16 folders
    for (std::vector<uint8_t>& owned : w.owned8) {
      if (owned.data() == before.data && owned.size() == bytes) std::vector<uint8_t>().swap(owned);
    }
    for (std::vector<uint16_t>& owned : w.owned16) {  // F16 / BF16 (kF16Packed, kBF16Packed)
      if (owned.data() == before.data && 2 * owned.size() == bytes) {
        std::vector<uint16_t>().swap(owned);
      }
    }
    for (std::vector<float>& owned : w.owned32) {  // F32, copied into huge pages
      if (owned.data() == before.data && 4 * owned.size() == bytes)
        std::vector<float>().swap(owned);
    }
  }
  return Status::Ok();
}

}  // namespace

Status PlaceWeights(ModelWeights& w, kernels::Backend& backend) {
  const kernels::BackendCaps& caps = backend.caps();
  if (w.placed_on == &backend) return Status::Ok();
  if (w.placed_on != nullptr) {
    return FailedPrecondition("weights are already placed on another backend");
  }
  LLM_RETURN_IF_ERROR(CheckWeightFormats(w, caps));
  if (caps.host_memory) {
    LLM_RETURN_IF_ERROR(PrepareMatmulWeights(w, backend));
    w.placed_on = &backend;
    return Status::Ok();
  }
  Status status = Status::Ok();
  const bool tied = w.lm_head.data == w.embed.data;
  w.ForEachWeight([&](const std::string& name, Weight& t) {
    if (!status.ok()) return;
    const size_t bytes = RowBytes(t.format, t.cols) * t.rows;
    auto buf = backend.Allocate(bytes);
    if (!buf.ok()) {
      status = buf.status().WithContext("placing weight '" + name + "'");
      return;
    }
    backend.CopyToDevice(buf->data(), t.data, bytes);
    t.data = buf->data();
    w.placed.push_back(std::move(*buf));
  });
  LLM_RETURN_IF_ERROR(status);
  if (tied) w.lm_head = w.embed;
  LLM_RETURN_IF_ERROR(backend.Synchronize());
  w.placed_on = &backend;
  return Status::Ok();
}

}  // namespace llm
