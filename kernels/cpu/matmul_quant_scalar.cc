// Portable micro-kernels of the block formats: every block decoded (quant_blocks.h) and the dot
// products evaluated in the order quant_blocks.h defines, in plain C++ (-ffp-contract=off, the
// fma explicit). The reference the SIMD paths must equal bitwise.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/iquant_blocks.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

float Reduce(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
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

// The grid i-quants' and ternary formats' 8 lanes of a block (iquant_blocks.h).
void IQLanes(const DecodedIQ& w, const BlockQ8_K& x, float* acc) {
  int32_t lanes[8];
  IQLaneSums(w, x, lanes);
  for (int l = 0; l < 8; ++l) acc[l] = std::fma(w.f * x.d, static_cast<float>(lanes[l]), acc[l]);
}
void DecodeBlock(DType t, const void* block, DecodedK* out) {
  DecodeK(t, block, out);
}
void DecodeBlock(DType t, const void* block, DecodedIQ* out) {
  DecodeIQ(t, block, out);
}
void Lanes(const DecodedK& w, const BlockQ8_K& x, float* acc) {
  KLanes(w, x, acc);
}
void Lanes(const DecodedIQ& w, const BlockQ8_K& x, float* acc) {
  IQLanes(w, x, acc);
}

// The K-quants (Decoded: DecodedK), the grid i-quants and the ternary formats (DecodedIQ): 8 lanes
// per block on Q8_K activations (quant_blocks.h, iquant_blocks.h), summed by one tree at the end.
template <DType kType, class W, class Decoded>
struct LanesScalar {
  using XBlock = BlockQ8_K;
  using WBlock = W;
  static constexpr int kBlock = kQK_K;
  static constexpr int kMR = 2;
  static constexpr int kNR = 2;

  template <int MR, int NR>
  static void Tile(const XBlock* x, int64_t ldx, const WBlock* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    float acc[MR][NR][8] = {};
    for (int b = 0; b < nb; ++b) {
      Decoded dw[NR];
      for (int j = 0; j < NR; ++j) DecodeBlock(kType, &w[j * ldw + b], &dw[j]);
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) Lanes(dw[j], x[i * ldx + b], acc[i][j]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = Reduce(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};
template <DType kType, class W>
using KScalar = LanesScalar<kType, W, DecodedK>;
template <DType kType, class W>
using IQScalar = LanesScalar<kType, W, DecodedIQ>;

// The 32-block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4): one lane and chain per block,
// b % 16. IQ4_XS and Q1_0 likewise per 32-weight sub-block (b: the sub-block's index in the row),
// its rows read as bytes.
template <DType kType, class W>
struct LegacyScalar {
  // IQ4_XS, Q1_0 and NVFP4: blocks of 8, 4 and 2 sub-blocks
  static constexpr bool kSuper =
      kType == DType::kIQ4_XS || kType == DType::kQ1_0 || kType == DType::kNVFP4;
  static constexpr int kSubs = BlockSize(kType) / kQKLegacy;
  using XBlock = BlockQ8_0;
  using WBlock = std::conditional_t<kSuper, uint8_t, W>;
  static constexpr int kBlock = kQKLegacy;
  static constexpr int kMR = 2;
  static constexpr int kNR = 2;
  static constexpr int64_t WStride(int nb) {
    return kSuper ? static_cast<int64_t>(nb) / kSubs * static_cast<int64_t>(sizeof(W)) : nb;
  }
  static void Decode(const WBlock* row, int b, DecodedLegacy* out) {
    if constexpr (kType == DType::kQ1_0) {
      DecodeQ1_0Sub(*reinterpret_cast<const BlockQ1_0*>(row + (b / 4) * sizeof(BlockQ1_0)), b % 4,
                    out);
    } else if constexpr (kSuper) {
      DecodeIQ4XSSub(*reinterpret_cast<const BlockIQ4_XS*>(row + (b / 8) * sizeof(BlockIQ4_XS)),
                     b % 8, out);
    } else {
      DecodeLegacy(kType, &row[b], out);
    }
  }

  // NVFP4: a sub-block's two halves of 16, each its integer sum and its fma (the low half first).
  static void NVFP4Dot(const WBlock* row, int b, const BlockQ8_0& xb, float& a) {
    DecodedNVFP4 dw;
    DecodeNVFP4Sub(*reinterpret_cast<const BlockNVFP4*>(row + (b / 2) * sizeof(BlockNVFP4)), b % 2,
                   &dw);
    const float dx = F16ToF32(xb.d);
    for (int h = 0; h < 2; ++h) {
      int32_t dot = 0;
      for (int e = 16 * h; e < 16 * h + 16; ++e) dot += int32_t{dw.v[e]} * xb.qs[e];
      a = std::fma(dw.d[h] * dx, static_cast<float>(dot), a);
    }
  }

  // Block b of the MR activation rows and NR weight rows into chains b % 16.
  template <int MR, int NR>
  static void BlockDots(const XBlock* x, int64_t ldx, const WBlock* w, int64_t ldw, int b,
                        float (&acc)[MR][NR][16]) {
    if constexpr (kType == DType::kNVFP4) {
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) NVFP4Dot(w + j * ldw, b, x[i * ldx + b], acc[i][j][b % 16]);
      }
    } else {
      DecodedLegacy dw[NR];
      for (int j = 0; j < NR; ++j) Decode(w + j * ldw, b, &dw[j]);
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
          if (dw[j].has_min) {
            a = std::fma(dw[j].d * dx, static_cast<float>(dot), a);
            a = std::fma(dw[j].m * dx, static_cast<float>(sum), a);
          } else {
            a = std::fma(dw[j].d * dx, static_cast<float>(dot - dw[j].offset * sum), a);
          }
        }
      }
    }
  }

  template <int MR, int NR>
  static void Tile(const XBlock* x, int64_t ldx, const WBlock* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    float acc[MR][NR][16] = {};
    for (int b = 0; b < nb; ++b) BlockDots<MR, NR>(x, ldx, w, ldw, b, acc);
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

}  // namespace

const QuantMatmulKernels& ScalarQuantKernels() {
  static const QuantMatmulKernels kKernels = [] {
    QuantMatmulKernels k;
    k.fn[static_cast<int>(DType::kQ4_0)] = MatmulBlockPanel<LegacyScalar<DType::kQ4_0, BlockQ4_0>>;
    k.fn[static_cast<int>(DType::kQ4_1)] = MatmulBlockPanel<LegacyScalar<DType::kQ4_1, BlockQ4_1>>;
    k.fn[static_cast<int>(DType::kQ5_0)] = MatmulBlockPanel<LegacyScalar<DType::kQ5_0, BlockQ5_0>>;
    k.fn[static_cast<int>(DType::kQ5_1)] = MatmulBlockPanel<LegacyScalar<DType::kQ5_1, BlockQ5_1>>;
    k.fn[static_cast<int>(DType::kQ8_0)] = MatmulBlockPanel<LegacyScalar<DType::kQ8_0, BlockQ8_0>>;
    k.fn[static_cast<int>(DType::kIQ4_NL)] =
        MatmulBlockPanel<LegacyScalar<DType::kIQ4_NL, BlockIQ4_NL>>;
    k.fn[static_cast<int>(DType::kIQ4_XS)] =
        MatmulBlockPanel<LegacyScalar<DType::kIQ4_XS, BlockIQ4_XS>>;
    k.fn[static_cast<int>(DType::kMXFP4)] =
        MatmulBlockPanel<LegacyScalar<DType::kMXFP4, BlockMXFP4>>;
    k.fn[static_cast<int>(DType::kQ1_0)] = MatmulBlockPanel<LegacyScalar<DType::kQ1_0, BlockQ1_0>>;
    k.fn[static_cast<int>(DType::kNVFP4)] =
        MatmulBlockPanel<LegacyScalar<DType::kNVFP4, BlockNVFP4>>;
    k.fn[static_cast<int>(DType::kIQ2_XXS)] =
        MatmulBlockPanel<IQScalar<DType::kIQ2_XXS, BlockIQ2_XXS>>;
    k.fn[static_cast<int>(DType::kIQ2_XS)] =
        MatmulBlockPanel<IQScalar<DType::kIQ2_XS, BlockIQ2_XS>>;
    k.fn[static_cast<int>(DType::kIQ2_S)] = MatmulBlockPanel<IQScalar<DType::kIQ2_S, BlockIQ2_S>>;
    k.fn[static_cast<int>(DType::kIQ3_XXS)] =
        MatmulBlockPanel<IQScalar<DType::kIQ3_XXS, BlockIQ3_XXS>>;
    k.fn[static_cast<int>(DType::kIQ3_S)] = MatmulBlockPanel<IQScalar<DType::kIQ3_S, BlockIQ3_S>>;
    k.fn[static_cast<int>(DType::kIQ1_S)] = MatmulBlockPanel<IQScalar<DType::kIQ1_S, BlockIQ1_S>>;
    k.fn[static_cast<int>(DType::kIQ1_M)] = MatmulBlockPanel<IQScalar<DType::kIQ1_M, BlockIQ1_M>>;
    k.fn[static_cast<int>(DType::kTQ1_0)] = MatmulBlockPanel<IQScalar<DType::kTQ1_0, BlockTQ1_0>>;
    k.fn[static_cast<int>(DType::kTQ2_0)] = MatmulBlockPanel<IQScalar<DType::kTQ2_0, BlockTQ2_0>>;
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
