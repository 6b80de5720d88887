// RmsNorm (alone or after the residual add): one row at a time, each row reduced in a fixed order
// (so a row's result never depends on the other rows or on the thread count).
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

void NormRow(const float* x, const float* weight, int dim, float eps, float* out) {
  const float inv = static_cast<float>(1.0 / std::sqrt(SumSquares(x, dim) / dim + eps));
  for (int i = 0; i < dim; ++i) out[i] = x[i] * inv * weight[i];
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(rows) * dim >= \
                                              kMinParallelElems)
  for (int t = 0; t < rows; ++t) {
    NormRow(x + static_cast<int64_t>(t) * dim, weight, dim, eps,
            out + static_cast<int64_t>(t) * dim);
  }
}

void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim, float eps,
                float* out) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(rows) * dim >= \
                                              kMinParallelElems)
  for (int t = 0; t < rows; ++t) {
    float* r = residual + static_cast<int64_t>(t) * dim;
    const float* xr = x + static_cast<int64_t>(t) * dim;
    for (int i = 0; i < dim; ++i) r[i] += xr[i];
    NormRow(r, weight, dim, eps, out + static_cast<int64_t>(t) * dim);
  }
}

}  // namespace llm::kernels
