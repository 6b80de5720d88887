// Portable Matmul micro-kernel: 8 float lanes per output element, plain C++ (compiled with
// -ffp-contract=off, so the compiler may vectorise it but never changes the rounding).
#include <cmath>
#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/matmul_internal.h"

namespace llm::kernels::internal {
namespace {

constexpr int kLanes = 8;

inline float Widen(float v) {
  return v;
}
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
inline float Widen(Bf16 v) {
  return Bf16ToF32(v.bits);
}
inline float Widen(F16 v) {
  return F16ToF32(v.bits);
}

template <class WT>
struct ScalarMicro {
  using W = WT;
  static constexpr int kMR = 4;
  static constexpr int kNR = 4;

  template <int MR, int NR>
  static void Tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int k, const float* bias,
                   float* y, int64_t ldy) {
    float acc[MR][NR][kLanes] = {};
    int p = 0;
    for (; p + kLanes <= k; p += kLanes) {
      float wf[NR][kLanes];
      for (int j = 0; j < NR; ++j) {
        for (int l = 0; l < kLanes; ++l) wf[j][l] = Widen(w[j * ldw + p + l]);
      }
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) {
          for (int l = 0; l < kLanes; ++l) acc[i][j][l] += x[i * ldx + p + l] * wf[j][l];
        }
      }
    }
    if (p < k) {  // zero-padded tail, same as a full chunk with zeros beyond k
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) {
          for (int l = 0; l < kLanes; ++l) {
            const bool in = p + l < k;
            acc[i][j][l] +=
                (in ? x[i * ldx + p + l] : 0.0f) * (in ? Widen(w[j * ldw + p + l]) : 0.0f);
          }
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        float* a = acc[i][j];
        const float s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

}  // namespace

const MatmulKernels& ScalarMatmulKernels() {
  static const MatmulKernels kKernels = {"scalar",
                                         MatmulPanel<ScalarMicro<float>>,
                                         MatmulPanel<ScalarMicro<F16>>,
                                         MatmulPanel<ScalarMicro<Bf16>>,
                                         &ScalarQuantKernels(),
                                         nullptr,
                                         nullptr};
  return kKernels;
}

}  // namespace llm::kernels::internal
