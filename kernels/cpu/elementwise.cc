// Element-wise ops of the forward pass: the gated MLP activation, residual adds, biases and row
// gathers. Each output element depends only on its own inputs, so any row is bitwise the same
// whatever the batch and the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

// Work is split across threads only when there is enough of it to pay for the fork.
constexpr int64_t kMinParallelElems = 32768;

#include "kernels/cpu/cephes_exp.h"  // NOLINT: into this TU's anonymous namespace

// out = gate * sigmoid(a) * up over [0, count), with a = gate (SiLU) or a = 2y for the
// tanh-GELU: gelu_tanh(g) = 0.5 g (1 + tanh(y)) = g / (1 + exp(-2y)), y = sqrt(2/pi) (g +
// 0.044715 g^3), with no cancellation near 0. exp is cephes_exp.h's, on GCC vectors of 16
// floats (one zmm on x86-64-v4, two ymm on v3, four xmm below), then one float at a time for
// the last count % 16: the same operations per lane, so the same bits at any width.
// Why: libm's expf does not vectorize (no -ffast-math here); called on every element of a
// prefill's MLP it took 8.1 ms per 512 x 5632 layer against 2.0 ms (Xeon with AVX-512, 30 Nov
// 2026, 1 thread). Explicit vectors, not `omp simd`: GCC 12 left the simd loop scalar ("control
// flow in loop") once CephesExp became CephesExpN's case N = 1 (f0f4e0a), and nothing failed
// but the speed (TinyLlama F16 decode batch 16 spent 3.4% of its samples here).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LLM_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LLM_VECTOR_CLONES
#endif

using Floats16 = float __attribute__((vector_size(64)));
using Ints16 = int32_t __attribute__((vector_size(64)));

// The outputs of one V (a float, or a vector of floats; I its int32 counterpart) from `at` on.
// Vectors pass through memory and CephesExpN's array: a 64-byte vector argument is an ABI
// change in the clones without AVX-512 (-Wpsabi).
template <bool kGelu, class V, class I>
[[gnu::always_inline]] inline void GatedSigmoidAt(const float* gate, const float* up, float* out) {
  constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;  // 2 sqrt(2 / pi)
  V g, u;
  std::memcpy(&g, gate, sizeof(V));
  std::memcpy(&u, up, sizeof(V));
  V e[1] = {-(kGelu ? kTwoSqrt2OverPi * (g + 0.044715f * g * g * g) : g)};
  CephesExpN<V, I, 1>(e);
  const V r = g / (1.0f + e[0]) * u;
  std::memcpy(out, &r, sizeof(V));
}

template <bool kGelu>
[[gnu::always_inline]] inline void GatedSigmoid(const float* gate, const float* up, int64_t count,
                                                float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    GatedSigmoidAt<kGelu, Floats16, Ints16>(gate + i, up + i, out + i);
  for (; i < count; ++i) GatedSigmoidAt<kGelu, float, int32_t>(gate + i, up + i, out + i);
}

LLM_VECTOR_CLONES void SiluMulRange(const float* gate, const float* up, int64_t count, float* out) {
  GatedSigmoid<false>(gate, up, count, out);
}

LLM_VECTOR_CLONES void GeluTanhMulRange(const float* gate, const float* up, int64_t count,
                                        float* out) {
  GatedSigmoid<true>(gate, up, count, out);
}

// Splits [0, count) over the team in whole 64-element pieces when there is enough work.
template <class Fn>
void ParallelRanges(int64_t count, Fn fn) {
  if (count <= kMinParallelElems) {
    fn(0, count);
    return;
  }
#pragma omp parallel
  {
    const int64_t pieces = (count + 63) / 64, t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t lo = std::min(count, pieces * t / n * 64);
    const int64_t hi = std::min(count, pieces * (t + 1) / n * 64);
    fn(lo, hi - lo);
  }
}

}  // namespace

void SiluMul(const float* gate, const float* up, int64_t count, float* out) {
  ParallelRanges(count,
                 [&](int64_t lo, int64_t n) { SiluMulRange(gate + lo, up + lo, n, out + lo); });
}

void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) {
  ParallelRanges(count,
                 [&](int64_t lo, int64_t n) { GeluTanhMulRange(gate + lo, up + lo, n, out + lo); });
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
