#include "worker/model_weights.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace llm {

namespace {

// Hands out tensors by name and records which were used, so leftovers can be reported.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual StatusOr<WeightMatrix> Matrix(const std::string& name, int rows, int cols) = 0;
  virtual StatusOr<std::vector<float>> Vector(const std::string& name, int size, float fill) = 0;
};

class FileSource : public TensorSource {
 public:
  explicit FileSource(ModelWeightFiles* files) : files_(files) {}

  StatusOr<WeightMatrix> Matrix(const std::string& name, int rows, int cols) override {
    LLM_ASSIGN_OR_RETURN(TensorView t, Take(name));
    if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
      return InvalidArgument(t.file + ": tensor '" + name + "' has shape " + t.ShapeString() +
                             ", expected [" + std::to_string(rows) + ", " + std::to_string(cols) +
                             "] from config.json");
    }
    return WeightMatrix{t.data, t.dtype, rows, cols};
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
      }
    }
    return out;
  }

  // Names present in the files that no Matrix/Vector call asked for.
  std::vector<std::string> Unused() const {
    std::vector<std::string> out;
    for (const auto& n : files_->TensorNames()) {
      if (!used_.count(n)) out.push_back(n);
    }
    return out;
  }

 private:
  StatusOr<TensorView> Take(const std::string& name) {
    if (!files_->Has(name)) return NotFound("missing tensor '" + name + "' in the safetensors");
    used_.insert(name);
    return files_->Get(name);
  }
  ModelWeightFiles* files_;
  std::set<std::string> used_;
};

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random weights: uniform in [-0.05, 0.05] (std ~0.029), norms at `fill`.
class DummySource : public TensorSource {
 public:
  DummySource(ModelWeights* w, uint64_t seed) : w_(w), seed_(seed) {}

  StatusOr<WeightMatrix> Matrix(const std::string& name, int rows, int cols) override {
    const size_t n = static_cast<size_t>(rows) * cols;
    const uint64_t base = Hash(name);
    const DType dt = w_->config.torch_dtype;
    if (dt == DType::kF32) {
      auto& buf = w_->owned32.emplace_back(n);
      FillParallel(n, base, [&](size_t i, float x) { buf[i] = x; });
      return WeightMatrix{buf.data(), dt, rows, cols};
    }
    auto& buf = w_->owned16.emplace_back(n);
    const bool bf16 = dt == DType::kBF16;
    FillParallel(n, base, [&](size_t i, float x) { buf[i] = bf16 ? F32ToBf16(x) : F32ToF16(x); });
    return WeightMatrix{buf.data(), dt, rows, cols};
  }

  StatusOr<std::vector<float>> Vector(const std::string& name, int size, float fill) override {
    if (fill != 0.0f) return std::vector<float>(size, fill);
    std::vector<float> v(size);
    FillParallel(size, Hash(name), [&](size_t i, float x) { v[i] = x; });
    return v;
  }

 private:
  uint64_t Hash(const std::string& name) const {
    uint64_t h = seed_ ^ 0xcbf29ce484222325ull;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return h;
  }
  template <typename F>
  static void FillParallel(size_t n, uint64_t base, F&& set) {
    const long chunks = static_cast<long>((n + 65535) / 65536);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; ++c) {
      uint64_t state = base + static_cast<uint64_t>(c) * 0x632be59bd9b4e019ull;
      const size_t end = std::min(n, static_cast<size_t>(c + 1) * 65536);
      for (size_t i = static_cast<size_t>(c) * 65536; i < end; ++i) {
        const double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
        set(i, static_cast<float>((u - 0.5) * 0.1));
      }
    }
  }
  ModelWeights* w_;
  uint64_t seed_;
};

Status LoadLayer(TensorSource& src, const ModelConfig& c, int l, LayerWeights* lw) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  const int h = c.hidden_size, inter = c.intermediate_size;
  LLM_ASSIGN_OR_RETURN(lw->input_norm, src.Vector(p + "input_layernorm.weight", h, 1.0f));
  LLM_ASSIGN_OR_RETURN(lw->post_attention_norm,
                       src.Vector(p + "post_attention_layernorm.weight", h, 1.0f));
  LLM_ASSIGN_OR_RETURN(lw->q, src.Matrix(p + "self_attn.q_proj.weight", c.q_dim(), h));
  LLM_ASSIGN_OR_RETURN(lw->k, src.Matrix(p + "self_attn.k_proj.weight", c.kv_dim(), h));
  LLM_ASSIGN_OR_RETURN(lw->v, src.Matrix(p + "self_attn.v_proj.weight", c.kv_dim(), h));
  LLM_ASSIGN_OR_RETURN(lw->o, src.Matrix(p + "self_attn.o_proj.weight", h, c.q_dim()));
  if (c.qkv_bias) {
    LLM_ASSIGN_OR_RETURN(lw->q_bias, src.Vector(p + "self_attn.q_proj.bias", c.q_dim(), 0));
    LLM_ASSIGN_OR_RETURN(lw->k_bias, src.Vector(p + "self_attn.k_proj.bias", c.kv_dim(), 0));
    LLM_ASSIGN_OR_RETURN(lw->v_bias, src.Vector(p + "self_attn.v_proj.bias", c.kv_dim(), 0));
  }
  if (c.o_bias) {
    LLM_ASSIGN_OR_RETURN(lw->o_bias, src.Vector(p + "self_attn.o_proj.bias", h, 0));
  }
  if (c.qk_norm) {
    LLM_ASSIGN_OR_RETURN(lw->q_norm, src.Vector(p + "self_attn.q_norm.weight", c.head_dim, 1));
    LLM_ASSIGN_OR_RETURN(lw->k_norm, src.Vector(p + "self_attn.k_norm.weight", c.head_dim, 1));
  }
  LLM_ASSIGN_OR_RETURN(lw->gate, src.Matrix(p + "mlp.gate_proj.weight", inter, h));
  LLM_ASSIGN_OR_RETURN(lw->up, src.Matrix(p + "mlp.up_proj.weight", inter, h));
  LLM_ASSIGN_OR_RETURN(lw->down, src.Matrix(p + "mlp.down_proj.weight", h, inter));
  if (c.mlp_bias) {
    LLM_ASSIGN_OR_RETURN(lw->gate_bias, src.Vector(p + "mlp.gate_proj.bias", inter, 0));
    LLM_ASSIGN_OR_RETURN(lw->up_bias, src.Vector(p + "mlp.up_proj.bias", inter, 0));
    LLM_ASSIGN_OR_RETURN(lw->down_bias, src.Vector(p + "mlp.down_proj.bias", h, 0));
  }
  return Status::Ok();
}

Status LoadAll(TensorSource& src, ModelWeights* w) {
  const ModelConfig& c = w->config;
  LLM_ASSIGN_OR_RETURN(w->embed,
                       src.Matrix("model.embed_tokens.weight", c.vocab_size, c.hidden_size));
  w->layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) LLM_RETURN_IF_ERROR(LoadLayer(src, c, l, &w->layers[l]));
  LLM_ASSIGN_OR_RETURN(w->final_norm, src.Vector("model.norm.weight", c.hidden_size, 1.0f));
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed;
  } else {
    LLM_ASSIGN_OR_RETURN(w->lm_head, src.Matrix("lm_head.weight", c.vocab_size, c.hidden_size));
  }
  return Status::Ok();
}

size_t MatrixBytes(const ModelWeights& w) {
  auto bytes = [](const WeightMatrix& m) {
    return static_cast<size_t>(m.rows) * m.cols * DTypeSize(m.dtype);
  };
  size_t total = bytes(w.embed) + (w.config.tie_word_embeddings ? 0 : bytes(w.lm_head));
  for (const auto& l : w.layers) {
    for (const auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) total += bytes(*m);
  }
  return total;
}

}  // namespace

StatusOr<std::unique_ptr<ModelWeights>> LoadModelWeights(const std::string& dir, LoadFormat format,
                                                         uint64_t dummy_seed) {
  auto w = std::make_unique<ModelWeights>();
  LLM_ASSIGN_OR_RETURN(w->config, LoadModelConfig(dir));
  if (format == LoadFormat::kDummy) {
    DummySource src(w.get(), dummy_seed);
    LLM_RETURN_IF_ERROR(LoadAll(src, w.get()));
    w->matrix_bytes = MatrixBytes(*w);
    return w;
  }
  LLM_ASSIGN_OR_RETURN(w->files, ModelWeightFiles::Open(dir));
  FileSource src(w->files.get());
  Status s = LoadAll(src, w.get());
  if (!s.ok()) return s.WithContext(dir);
  for (const auto& name : src.Unused()) {
    // Tied checkpoints sometimes store lm_head too; rotary caches are derived data.
    if (name == "lm_head.weight" && w->config.tie_word_embeddings) continue;
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;
    return InvalidArgument(dir + ": unexpected tensor '" + name + "' for " +
                           w->config.architecture + " with this config.json");
  }
  w->matrix_bytes = MatrixBytes(*w);
  return w;
}

}  // namespace llm
