// Uniform random test data, shared by the kernel tests (CPU and gpu-labelled).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "common/dtype.h"

namespace llm::kernels::testing {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// n random 16-bit weights of F16 or BF16 (t), uniform in [lo, hi) before rounding; and one back.
inline std::vector<uint16_t> Random16(DType t, size_t n, uint32_t seed, float lo, float hi) {
  const auto f = RandomFloats(n, seed, lo, hi);
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = t == DType::kF16 ? F32ToF16(f[i]) : F32ToBf16(f[i]);
  return h;
}
inline float Widen16(DType t, uint16_t h) {
  return t == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
}

}  // namespace llm::kernels::testing
