// Element-wise ops of the forward pass: the gated MLP activation, residual adds, biases and row
// gathers. Each output element depends only on its own inputs, so any row is bitwise the same
// whatever the batch and the thread count.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

// Work is split across threads only when there is enough of it to pay for the fork.
constexpr int64_t kMinParallelElems = 32768;

}  // namespace

void SiluMul(const float* gate, const float* up, int64_t count, float* out) {
#pragma omp parallel for schedule(static) if (count > kMinParallelElems)
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
#pragma omp parallel for schedule(static) if (count > kMinParallelElems)
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void Scale(float* x, float s, int64_t count) {
#pragma omp parallel for schedule(static) if (count > kMinParallelElems)
  for (int64_t i = 0; i < count; ++i) x[i] *= s;
}

void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count, int cols,
                    float* dst) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(count) * cols > \
                                              kMinParallelElems)
  for (int i = 0; i < count; ++i) {
    float* d = dst + static_cast<int64_t>(rows[i]) * cols;
    const float* s = src + static_cast<int64_t>(i) * cols;
    for (int c = 0; c < cols; ++c) d[c] += scale[i] * s[c];
  }
}

void Add(float* x, const float* y, int64_t count) {
#pragma omp parallel for schedule(static) if (count > kMinParallelElems)
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void AddBias(float* x, const float* bias, int rows, int cols) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(rows) * cols > \
                                              kMinParallelElems)
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<int64_t>(r) * cols;
    for (int i = 0; i < cols; ++i) row[i] += bias[i];
  }
}

void GatherRows(const float* src, const int32_t* rows, int count, int cols, float* dst) {
  for (int i = 0; i < count; ++i) {
    std::memcpy(dst + static_cast<int64_t>(i) * cols, src + static_cast<int64_t>(rows[i]) * cols,
                sizeof(float) * cols);
  }
}

}  // namespace llm::kernels
