// Small portable vector helpers written so the compiler can vectorise them without reassociating:
// every lane is an explicit partial sum and the final reduction is a fixed tree, so a result
// depends only on the inputs (never on the caller's batch or thread count).
#pragma once

namespace llm::kernels::simd {

inline float Dot(const float* a, const float* b, int n) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < n; ++i) acc[i & 15] += a[i] * b[i];
  for (int w = 8; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  return acc[0];
}

// y[i] *= a
inline void Scale(float* y, float a, int n) {
  for (int i = 0; i < n; ++i) y[i] *= a;
}

// y[i] += a * x[i]
inline void Axpy(float* y, float a, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace llm::kernels::simd
