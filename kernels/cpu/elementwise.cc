#include "kernels/elementwise.h"

#include <cmath>

namespace llm::kernels {

void SiluMul(const float* gate, const float* up, long count, float* out) {
#pragma omp parallel for schedule(static) if (count > 32768)
  for (long i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, long count) {
#pragma omp parallel for schedule(static) if (count > 32768)
  for (long i = 0; i < count; ++i) x[i] += y[i];
}

}  // namespace llm::kernels
