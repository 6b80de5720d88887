// In-situ quantization at load (model.quantization): a TensorSource over another one that
// quantizes the 2-D linear weights (attention and MLP projections, experts) it hands out to a
// block format, and an untied lm_head to Q6_K (Q8_0 under q8_0) as llama-quantize does;
// embeddings, MoE routers, norms and biases stay as the file has them.
// A matrix whose row length is not a whole number of the format's blocks falls back as
// llama-quantize does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, IQ4_XS ->
// IQ4_NL; and Q1_0 -> Q4_0, NVFP4 -> MXFP4), or stays unquantized when not even 32 divides it.
// Progress goes to stderr.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu_ops.h"
#include "worker/model/weight_source.h"

namespace llm::weights_internal {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

DType Fallback(DType t) {
  switch (t) {
    case DType::kQ4_K:
      return DType::kQ5_0;
    case DType::kQ5_K:
      return DType::kQ5_1;
    case DType::kQ6_K:
      return DType::kQ8_0;
    case DType::kQ2_K:
    case DType::kQ3_K:
      return DType::kQ4_0;
    case DType::kIQ4_XS:
      return DType::kIQ4_NL;
    case DType::kQ1_0:
      return DType::kQ4_0;
    case DType::kNVFP4:
      return DType::kMXFP4;
    default:
      return t;
  }
}

bool IsLinear(const std::string& name);

class QuantizingSource : public TensorSource {
 public:
  QuantizingSource(std::unique_ptr<TensorSource> inner, DType target, ModelWeights* w)
      : inner_(std::move(inner)), target_(target), w_(w), tty_(isatty(2) != 0) {}

  ~QuantizingSource() override {
    if (done_ == 0) return;
    std::fprintf(stderr, "%squantized %d matrices to %s: %.1f MiB -> %.1f MiB%s\n",
                 tty_ ? "\r" : "", done_, DTypeName(target_), in_bytes_ / 1048576.0,
                 out_bytes_ / 1048576.0, (notes_ + fallbacks_).c_str());
  }

  StatusOr<Weight> Matrix(const std::string& name, int rows, int cols,
                          const MatrixSlice& slice) override {
    LLM_ASSIGN_OR_RETURN(Weight m, inner_->Matrix(name, rows, cols, slice));
    if (IsBlockFormat(m.format) || m.empty()) return m;
    const std::optional<DType> q = QuantizedFormat(name, target_, m.cols);
    if (!q) {
      if (IsLinear(name)) NoteFallback(name, m.format);
      return m;
    }
    const DType t = *q;
    if (t != target_ && IsLinear(name)) NoteFallback(name, t);
    if (!IsLinear(name)) notes_ += "\n  " + name + ": " + DTypeName(t) + " (as llama-quantize)";
    // Rows to float in slabs, then quantized (each row on its own, so slabs change nothing).
    const size_t row_bytes = RowBytes(t, m.cols);
    char* dst = OwnBytes(*w_, t, row_bytes * m.rows);
    constexpr int kSlab = 256;
    std::vector<float> f(static_cast<size_t>(kSlab) * m.cols);
    for (int r0 = 0; r0 < m.rows; r0 += kSlab) {
      const int n = m.rows - r0 < kSlab ? m.rows - r0 : kSlab;
      const char* src = static_cast<const char*>(m.data) + RowBytes(m.format, m.cols) * r0;
      for (size_t i = 0; i < static_cast<size_t>(n) * m.cols; ++i) {
        uint16_t h;
        switch (m.format) {
          case DType::kF16:
          case DType::kBF16:
            std::memcpy(&h, src + 2 * i, 2);
            f[i] = m.format == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
            break;
          default:
            std::memcpy(&f[i], src + 4 * i, 4);
            break;
        }
      }
      kernels::QuantizeRows(t, f.data(), n, m.cols, dst + row_bytes * r0);
    }
    in_bytes_ += static_cast<double>(RowBytes(m.format, m.cols)) * m.rows;
    out_bytes_ += static_cast<double>(row_bytes) * m.rows;
    ++done_;
    if (tty_) {
      std::fprintf(stderr, "\rquantizing to %s: %d matrices, layer %s", DTypeName(target_), done_,
                   name.c_str());
      std::fflush(stderr);
    }
    return Weight{dst, t, m.rows, m.cols};
  }

  StatusOr<std::vector<float>> Vector(const std::string& name, int size, float fill) override {
    return inner_->Vector(name, size, fill);
  }
  bool norms_include_one() const override { return inner_->norms_include_one(); }
  std::vector<std::string> Unexpected() const override { return inner_->Unexpected(); }

 private:
  void NoteFallback(const std::string& name, DType t) {
    if (fallbacks_.find(name) != std::string::npos || fallbacks_.size() > 2000) return;
    fallbacks_ += "\n  " + name + ": " + DTypeName(t) + " (row length not a multiple of " +
                  std::to_string(BlockSize(target_)) + ")";
  }

  std::unique_ptr<TensorSource> inner_;
  DType target_;
  ModelWeights* w_;
  bool tty_;
  int done_ = 0;
  double in_bytes_ = 0, out_bytes_ = 0;
  std::string fallbacks_;
  std::string notes_;  // lm_head's format
};

bool IsLinear(const std::string& name) {
  for (const char* s : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                        "qkv_proj.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight",
                        "gate_up_proj.weight", ".w1.weight", ".w2.weight", ".w3.weight"}) {
    if (EndsWith(name, s)) return true;
  }
  return false;
}

}  // namespace

std::optional<DType> QuantizedFormat(const std::string& name, DType target, int cols) {
  if (name == "lm_head.weight") {
    // llama-quantize's rule for the output matrix: Q8_0 under q8_0, else Q6_K (it is read every
    // step and moves the logits most), Q8_0 where 256 does not divide the rows.
    const DType head = target == DType::kQ8_0 ? DType::kQ8_0 : DType::kQ6_K;
    if (cols % BlockSize(head) == 0) return head;
    if (cols % BlockSize(DType::kQ8_0) == 0) return DType::kQ8_0;
    return std::nullopt;
  }
  if (!IsLinear(name)) return std::nullopt;
  if (cols % BlockSize(target) == 0) return target;
  if (cols % BlockSize(Fallback(target)) == 0) return Fallback(target);
  return std::nullopt;
}

std::unique_ptr<TensorSource> MakeQuantizingSource(std::unique_ptr<TensorSource> inner,
                                                   DType target, ModelWeights* w) {
  return std::make_unique<QuantizingSource>(std::move(inner), target, w);
}

}  // namespace llm::weights_internal
