// Rotary position embedding, in place. cos/sin are computed once per token and shared by its
// heads; the angle is formed in float32 as Hugging Face does.
#include <cmath>
#include <cstdint>

#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

constexpr int kMaxHalf = kMaxHeadDim / 2;

void RotateHead(float* v, const float* cs, const float* sn, int half) {
  for (int i = 0; i < half; ++i) {
    const float x0 = v[i];
    const float x1 = v[i + half];
    v[i] = x0 * cs[i] - x1 * sn[i];
    v[i + half] = x1 * cs[i] + x0 * sn[i];
  }
}

void RotateHeadInterleaved(float* v, const float* cs, const float* sn, int half) {
  for (int i = 0; i < half; ++i) {
    const float x0 = v[2 * i];
    const float x1 = v[2 * i + 1];
    v[2 * i] = x0 * cs[i] - x1 * sn[i];
    v[2 * i + 1] = x1 * cs[i] + x0 * sn[i];
  }
}

}  // namespace

void Rope(float* x, const int32_t* positions, int tokens, int heads, const RopeLayout& layout,
          const float* inv_freq) {
  const int half = layout.rotary_dim / 2, head_dim = layout.head_dim;
  // precondition: 0 < rotary_dim <= head_dim <= kMaxHeadDim, rotary_dim even
  if (half <= 0 || layout.rotary_dim % 2 != 0 || layout.rotary_dim > head_dim ||
      head_dim > kMaxHeadDim) {
    return;
  }
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(tokens) * heads * head_dim >= \
                                              (1 << 15))
  for (int t = 0; t < tokens; ++t) {
    float cs[kMaxHalf];
    float sn[kMaxHalf];
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cs[i] = std::cos(angle) * layout.mscale;
      sn[i] = std::sin(angle) * layout.mscale;
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x + (static_cast<int64_t>(t) * heads + h) * head_dim;
      if (layout.interleaved) {
        RotateHeadInterleaved(v, cs, sn, half);
      } else {
        RotateHead(v, cs, sn, half);
      }
    }
  }
}

}  // namespace llm::kernels
