// SiluAndMul and GeluTanhAndMul: the gated MLP activations. Each output element depends only on
// its own two inputs, so any row is bitwise the same whatever the batch.
#include <cmath>
#include <cstdint>

#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

// Rows are split across threads only when there is enough work to pay for the fork.
constexpr int64_t kMinParallelElems = 1 << 15;

inline float Silu(float g) {
  return g / (1.0f + std::exp(-g));
}

inline float GeluTanh(float g) {
  const float kC = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * g * (1.0f + std::tanh(kC * (g + 0.044715f * g * g * g)));
}

template <float (*Act)(float)>
void GatedActivation(const float* gate_up, int tokens, int inter, float* out) {
  const int64_t total = static_cast<int64_t>(tokens) * inter;
#pragma omp parallel for schedule(static) if (total >= kMinParallelElems)
  for (int64_t e = 0; e < total; ++e) {
    const int64_t t = e / inter;
    const int64_t i = e - t * inter;
    const float* row = gate_up + t * 2 * inter;
    out[e] = Act(row[i]) * row[inter + i];
  }
}

}  // namespace

void SiluAndMul(const float* gate_up, int tokens, int inter, float* out) {
  GatedActivation<Silu>(gate_up, tokens, inter, out);
}

void GeluTanhAndMul(const float* gate_up, int tokens, int inter, float* out) {
  GatedActivation<GeluTanh>(gate_up, tokens, inter, out);
}

}  // namespace llm::kernels
