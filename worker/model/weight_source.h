// Internal to worker/model: where LoadModelWeights gets its tensors from. The loader asks for
// every tensor by its Hugging Face name and full shape; a source (the safetensors of a model
// folder, a GGUF file, seeded random values) checks the shape and hands out the shard's part.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/gguf.h"
#include "common/status.h"
#include "worker/model/model_weights.h"

namespace llm::weights_internal {

// The part of a [rows, cols] matrix a shard keeps.
struct MatrixSlice {
  ShardRange rows, cols;
  bool whole_rows(int cols_total) const { return cols.begin == 0 && cols.end == cols_total; }
};

inline MatrixSlice RowSlice(ShardRange r, int cols) {
  return {r, {0, cols}};
}
inline MatrixSlice ColSlice(int rows, ShardRange c) {
  return {{0, rows}, c};
}

// Hands out tensors by Hugging Face name and records which were used, so leftovers can be
// reported. Matrix checks the full [rows, cols] shape and returns the `slice` of it.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual StatusOr<Weight> Matrix(const std::string& name, int rows, int cols,
                                  const MatrixSlice& slice) = 0;
  virtual StatusOr<std::vector<float>> Vector(const std::string& name, int size, float fill) = 0;
  // Gemma's RMSNorm weights: true when the file stores the effective 1 + w (GGUF), false when
  // it stores w (Hugging Face).
  virtual bool norms_include_one() const { return false; }
  // Tensors of the file no Matrix/Vector call asked for that the model cannot explain.
  virtual std::vector<std::string> Unexpected() const { return {}; }
};

// `bytes` of memory owned by `w` (kept as long as the weights), suitably aligned for `format`.
char* OwnBytes(ModelWeights& w, DType format, size_t bytes);

// The `slice` of the row-major [rows, cols] matrix at `base` in `format`: a view into it when
// the slice is a row range, else a copy of each row's segment (for Q8_0 the segment must be
// whole blocks: otherwise InvalidArgument naming `what`).
StatusOr<Weight> SliceMatrix(ModelWeights& w, const void* base, DType format, int cols,
                             const MatrixSlice& slice, const std::string& what);

// Tensors of a GGUF file, mapped to Hugging Face names (llama.cpp's tensor names; q/k rows of
// the llama architecture un-permuted back to the rotate-half layout). `file` must outlive it.
std::unique_ptr<TensorSource> MakeGgufSource(const GgufFile& file, ModelWeights* w);

// The block format model.quantization `target` gives the weight `name` (an HF name) with rows of
// `cols`: `target`, or llama-quantize's fallback when its blocks do not divide the rows; for
// lm_head.weight Q6_K (Q8_0 when the target is Q8_0 or 256 does not divide the rows); nullopt
// when the weight stays as it is (not a linear projection, or no block fits).
std::optional<DType> QuantizedFormat(const std::string& name, DType target, int cols);

// `inner`'s tensors with the linear weights quantized to `target` (see QuantizedFormat) into
// memory owned by `w`; prints progress and a summary on stderr.
std::unique_ptr<TensorSource> MakeQuantizingSource(std::unique_ptr<TensorSource> inner,
                                                   DType target, ModelWeights* w);

}  // namespace llm::weights_internal
