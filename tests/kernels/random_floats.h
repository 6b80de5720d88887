// Uniform random test data, shared by the kernel tests (CPU and gpu-labelled).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
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

// n bytes of splitmix64 words (little-endian) from `seed`: the generator the format goldens
// (hashes of reference dequantizers' output) were computed on, written out so they can be redone.
inline std::vector<uint8_t> SplitMixBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n + 8);
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 8) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, 8);
  }
  out.resize(n);
  return out;
}
// FNV-1a (64-bit) of n bytes.
inline uint64_t Fnv1a(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace llm::kernels::testing
