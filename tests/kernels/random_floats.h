// Uniform random test data, shared by the kernel tests (CPU and gpu-labelled).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace llm::kernels::testing {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

}  // namespace llm::kernels::testing
