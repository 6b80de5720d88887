// RmsNorm and Softmax: one row at a time, each row reduced in a fixed order (so a row's result
// never depends on the other rows or on the thread count).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

constexpr int64_t kMinParallelElems = 1 << 15;

// Sum of squares in double: exact enough that the norm matches a float64 reference.
double SumSquares(const float* x, int dim) {
  double s = 0.0;
  for (int i = 0; i < dim; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void SoftmaxRow(float* v, int cols) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < cols; ++i) mx = std::max(mx, v[i]);
  if (mx == -std::numeric_limits<float>::infinity()) {  // all -inf (or empty): no mass anywhere
    for (int i = 0; i < cols; ++i) v[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int i = 0; i < cols; ++i) {
    v[i] = std::exp(v[i] - mx);
    sum += v[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < cols; ++i) v[i] *= inv;
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float weight_offset,
             float* out) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(rows) * dim >= \
                                              kMinParallelElems)
  for (int t = 0; t < rows; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * dim;
    float* o = out + static_cast<int64_t>(t) * dim;
    const float inv = static_cast<float>(1.0 / std::sqrt(SumSquares(xr, dim) / dim + eps));
    for (int i = 0; i < dim; ++i) o[i] = xr[i] * inv * (weight_offset + weight[i]);
  }
}

void Softmax(float* x, int rows, int cols) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(rows) * cols >= \
                                              kMinParallelElems)
  for (int r = 0; r < rows; ++r) SoftmaxRow(x + static_cast<int64_t>(r) * cols, cols);
}

}  // namespace llm::kernels
