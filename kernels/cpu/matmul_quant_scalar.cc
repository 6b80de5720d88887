// Portable micro-kernels of the block formats: every block decoded (quant_blocks.h) and the dot
// products evaluated in the order quant_blocks.h defines, in plain C++ (-ffp-contract=off, the
// fma explicit). The reference the SIMD paths must equal bitwise.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

float Reduce(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// The 8 lane accumulators of one weight block against one activation block.
void LegacyLanes(const DecodedLegacy& w, const BlockQ8_0& x, float* acc) {
  const float dx = F16ToF32(x.d);
  for (int l = 0; l < 8; ++l) {
    int32_t dot = 0, sum = 0;
    for (int e = 4 * l; e < 4 * l + 4; ++e) {
      dot += int32_t{w.u[e]} * x.qs[e];
      sum += x.qs[e];
    }
    if (w.has_min) {
      acc[l] = std::fma(w.d * dx, static_cast<float>(dot), acc[l]);
      acc[l] = std::fma(w.m * dx, static_cast<float>(sum), acc[l]);
    } else {
      acc[l] = std::fma(w.d * dx, static_cast<float>(dot - w.offset * sum), acc[l]);
    }
  }
}

void KLanes(const DecodedK& w, const BlockQ8_K& x, float* acc) {
  for (int l = 0; l < 8; ++l) {
    int32_t lsum = 0;
    for (int h = 0; h < 8; ++h) {
      int32_t s = 0;
      for (int e = 32 * h + 4 * l; e < 32 * h + 4 * l + 4; ++e) s += int32_t{w.u[e]} * x.qs[e];
      lsum += w.sc[2 * h + l / 4] * s;
    }
    const int32_t msum = w.mn[2 * l] * x.bsums[2 * l] + w.mn[2 * l + 1] * x.bsums[2 * l + 1];
    acc[l] = std::fma(w.d * x.d, static_cast<float>(lsum), acc[l]);
    acc[l] = std::fma(-(w.dmin * x.d), static_cast<float>(msum), acc[l]);
  }
}

template <DType kType, class W, class X, class Decoded>
struct ScalarMicro {
  using XBlock = X;
  using WBlock = W;
  static constexpr int kBlock = IsKQuant(kType) ? kQK_K : kQKLegacy;
  static constexpr int kMR = 2;
  static constexpr int kNR = 2;

  template <int MR, int NR>
  static void Tile(const XBlock* x, int64_t ldx, const WBlock* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    // Legacy formats: lanes 0..7 take the even blocks, 8..15 the odd ones (quant_blocks.h).
    float acc[MR][NR][16] = {};
    for (int b = 0; b < nb; ++b) {
      Decoded dw[NR];
      for (int j = 0; j < NR; ++j) {
        if constexpr (IsKQuant(kType)) {
          DecodeK(kType, &w[j * ldw + b], &dw[j]);
        } else {
          DecodeLegacy(kType, &w[j * ldw + b], &dw[j]);
        }
      }
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) {
          if constexpr (IsKQuant(kType)) {
            KLanes(dw[j], x[i * ldx + b], acc[i][j]);
          } else {
            LegacyLanes(dw[j], x[i * ldx + b], acc[i][j] + 8 * (b & 1));
          }
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        if constexpr (!IsKQuant(kType)) {
          for (int l = 0; l < 8; ++l) acc[i][j][l] = acc[i][j][l] + acc[i][j][8 + l];
        }
        const float s = Reduce(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

// Q4_0's and Q4_1's own order (quant_blocks.h): one lane and chain per block, b % 16.
template <DType kType, class W>
struct ScalarQ4 {
  using XBlock = BlockQ8_0;
  using WBlock = W;
  static constexpr int kBlock = kQKLegacy;
  static constexpr int kMR = 2;
  static constexpr int kNR = 2;

  template <int MR, int NR>
  static void Tile(const XBlock* x, int64_t ldx, const WBlock* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    float acc[MR][NR][16] = {};
    for (int b = 0; b < nb; ++b) {
      DecodedLegacy dw[NR];
      for (int j = 0; j < NR; ++j) DecodeLegacy(kType, &w[j * ldw + b], &dw[j]);
      for (int i = 0; i < MR; ++i) {
        const BlockQ8_0& xb = x[i * ldx + b];
        const float dx = F16ToF32(xb.d);
        for (int j = 0; j < NR; ++j) {
          int32_t dot = 0, sum = 0;
          for (int e = 0; e < kQKLegacy; ++e) {
            dot += int32_t{dw[j].u[e]} * xb.qs[e];
            sum += xb.qs[e];
          }
          float& a = acc[i][j][b % 16];
          if constexpr (kType == DType::kQ4_1) {
            a = std::fma(dw[j].d * dx, static_cast<float>(dot), a);
            a = std::fma(dw[j].m * dx, static_cast<float>(sum), a);
          } else {
            a = std::fma(dw[j].d * dx, static_cast<float>(dot - 8 * sum), a);
          }
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float* a = acc[i][j];
        float h8[8], h4[4];
        for (int l = 0; l < 8; ++l) h8[l] = a[l] + a[l + 8];
        for (int l = 0; l < 4; ++l) h4[l] = h8[l] + h8[l + 4];
        const float s = (h4[0] + h4[2]) + (h4[1] + h4[3]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

template <DType kType, class W>
using LegacyScalar = ScalarMicro<kType, W, BlockQ8_0, DecodedLegacy>;
template <DType kType, class W>
using KScalar = ScalarMicro<kType, W, BlockQ8_K, DecodedK>;

}  // namespace

const QuantMatmulKernels& ScalarQuantKernels() {
  static const QuantMatmulKernels kKernels = [] {
    QuantMatmulKernels k;
    k.fn[static_cast<int>(DType::kQ4_0)] = MatmulBlockPanel<ScalarQ4<DType::kQ4_0, BlockQ4_0>>;
    k.fn[static_cast<int>(DType::kQ4_1)] = MatmulBlockPanel<ScalarQ4<DType::kQ4_1, BlockQ4_1>>;
    k.fn[static_cast<int>(DType::kQ5_0)] = MatmulBlockPanel<LegacyScalar<DType::kQ5_0, BlockQ5_0>>;
    k.fn[static_cast<int>(DType::kQ5_1)] = MatmulBlockPanel<LegacyScalar<DType::kQ5_1, BlockQ5_1>>;
    k.fn[static_cast<int>(DType::kQ2_K)] = MatmulBlockPanel<KScalar<DType::kQ2_K, BlockQ2_K>>;
    k.fn[static_cast<int>(DType::kQ3_K)] = MatmulBlockPanel<KScalar<DType::kQ3_K, BlockQ3_K>>;
    k.fn[static_cast<int>(DType::kQ4_K)] = MatmulBlockPanel<KScalar<DType::kQ4_K, BlockQ4_K>>;
    k.fn[static_cast<int>(DType::kQ5_K)] = MatmulBlockPanel<KScalar<DType::kQ5_K, BlockQ5_K>>;
    k.fn[static_cast<int>(DType::kQ6_K)] = MatmulBlockPanel<KScalar<DType::kQ6_K, BlockQ6_K>>;
    return k;
  }();
  return kKernels;
}

}  // namespace llm::kernels::internal
