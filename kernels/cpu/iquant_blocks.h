// GGML's grid i-quants on the CPU (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and its
// ternary formats (TQ1_0, TQ2_0): their byte layouts (ggml-common.h's block_iq2_xxs ...
// block_iq1_m, block_tq1_0, block_tq2_0), the grids the i-quants' indices select
// (iquant_grids.cc), ggml's dequantization, and the decoded form every matmul path computes its
// dot products on. There is no quantizer here: these formats come from files (llama-quantize
// with an importance matrix, or of a ternary model).
//
// A super-block of 256 weights decodes exactly into integers: weight e = f * s[e / 16] * v[e] in
// real arithmetic, with v[e] the signed grid value (|v| <= 62; IQ1: 8 * (-1, 0 or 1) +- 1, its
// +-1/8 shift times 8), s[g] the odd scale of group g of 16 (2 ls + 1 <= 31, equal for the two
// groups of a 32-weight sub-block where the format has one scale per 32) and f = d times a power
// of two (d / 8: IQ2, IQ1; d / 4: IQ3_XXS; d: IQ3_S). A ternary block is the same with f = d,
// every s[g] = 1 and v the trits -1, 0, 1. So the dot product with a Q8_K activation
// block x is, in every ISA, 8 exact integers and 8 fmas per block, lane l taking the elements e
// with (e % 32) / 4 == l (an int32 lane of a SIMD register of 32 or 64 of them):
//   L_l = sum over those e of s[e / 16] * v[e] * x.qs[e]  (exact int32, exact in float:
//         |L_l| <= 32 * 62 * 127 * 31 < 2^23)
//   acc_l = fma(f_b * x_b.d, float(L_l), acc_l), blocks b in order, from 0,
// and y = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) (+ bias last). The SIMD kernels
// take |v| and move its sign onto x (|x| <= 127 in Q8_K, so -x fits): maddubs(|v|, +-x) sums
// pairs within 2 * 62 * 127, no saturation.
// The ternary formats take v + 1 (0..2, what the file holds) and subtract the activation sums
// instead: L_l = sum over lane l of (v[e] + 1) * x.qs[e], minus x.bsums[2l] + x.bsums[2l + 1] (the
// sums of sub-block l's 32 activations), so sum_l L_l is still sum v * x, and the SIMD kernels
// multiply unsigned values without moving signs (one madd a block for the offset).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/quant_blocks.h"  // BlockQ8_K

namespace llm::kernels::internal {

// ggml's grids (iquant_grids.cc): entry i holds 8 (uint64_t) or 4 (uint32_t) values, element j
// in byte j; magnitudes for IQ2 / IQ3 (none is 0), int8 -1, 0, 1 for IQ1.
extern const uint64_t kIQ2XXSGrid[256];
extern const uint64_t kIQ2XSGrid[512];
extern const uint64_t kIQ2SGrid[1024];
extern const uint32_t kIQ3XXSGrid[256];
extern const uint32_t kIQ3SGrid[512];
extern const uint64_t kIQ1SGrid[2048];

// ggml-common.h's layouts; fp16 values as their bits.
struct BlockIQ2_XXS {
  uint16_t d;
  // per 32-weight sub-block 4 uint16: bytes 0..3 index kIQ2XXSGrid for its 4 groups of 8; the
  // uint32 of the last two holds 4 7-bit sign indices (bits 7l ..) and the 4-bit scale (28..31)
  uint16_t qs[32];
};
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[32];    // per group of 8: a 9-bit index into kIQ2XSGrid, a 7-bit sign index above
  uint8_t scales[8];  // per sub-block of 32: 4-bit scales of its two groups of 16 (low first)
};
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[64];     // 32 low bytes of 10-bit indices into kIQ2SGrid, then 32 sign bytes
  uint8_t qh[8];      // per sub-block of 32: bits 2l, 2l + 1 are index l's high bits
  uint8_t scales[8];  // as IQ2_XS
};
struct BlockIQ3_XXS {
  uint16_t d;
  // 64 indices into kIQ3XXSGrid (groups of 4), then per sub-block of 32 a uint32 with 4 7-bit
  // sign indices (bits 7l ..) and the 4-bit scale (28..31)
  uint8_t qs[96];
};
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[64];     // low bytes of 9-bit indices into kIQ3SGrid (groups of 4)
  uint8_t qh[8];      // per sub-block of 32: bit j is index j's high bit
  uint8_t signs[32];  // one sign bit per weight
  uint8_t scales[4];  // 4-bit scales per sub-block of 32 (low nibble the even one)
};
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[32];  // low bytes of 11-bit indices into kIQ1SGrid (groups of 8)
  // per sub-block of 32: bits 3l .. 3l + 2 index l's high bits, 12..14 the scale, 15 the shift's
  // sign
  uint16_t qh[8];
};
struct BlockIQ1_M {
  uint8_t qs[32];  // low bytes of 11-bit indices into kIQ1SGrid (groups of 8)
  uint8_t qh[16];  // per pair of groups: the high bits (0..2, 4..6), the shifts' signs (3, 7)
  // 3-bit scales per group of 16 (4 per uint16); the top nibbles of the 4 uint16 are d's bits
  uint8_t scales[8];
};
struct BlockTQ1_0 {
  // 5 trits t + 1 a byte, as the byte ceil(256 * (base-3 number) / 243): bytes 0..31 elements
  // 32n + m (n = 0..4, m the byte), bytes 32..47 elements 160 + 16n + m; trit n of byte q is
  // ((uint8_t)(q * 3^n) * 3) >> 8
  uint8_t qs[48];
  uint8_t qh[4];  // 4 trits each likewise: elements 240 + 4n + m
  uint16_t d;
};
struct BlockTQ2_0 {
  uint8_t qs[64];  // t + 1 in bits 2n, 2n + 1 of byte 32j + m: element 128j + 32n + m
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66, "ggml's block sizes");
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82 &&
                  sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110 &&
                  sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56,
              "ggml's block sizes");

// A decoded grid i-quant super-block (see above): d the block's fp16 scale as float.
struct DecodedIQ {
  float d, f;
  int offset = 0;  // 1 for the ternary formats (IQLaneSums)
  uint8_t s[16];
  alignas(64) int8_t v[kQK_K];
};
// Decodes a block of grid i-quant or ternary format t (DecodesAsIQ).
void DecodeIQ(DType t, const void* block, DecodedIQ* out);
// ggml's dequantize_row_iq* / _tq* of one block (its float operations, in its order) into
// y[0..255].
void DequantizeIQ(DType t, const void* block, float* y);

// TQ1_0's trit n of byte q as t + 1 (0, 1, 2), ggml's way (for any byte, not only the 243 a
// quantizer writes).
inline int TritOf(uint8_t q, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto r = static_cast<uint8_t>(q * kPow3[n]);
  return (r * 3) >> 8;
}

// The 8 exact lane sums L_l of a decoded block with a Q8_K block (the scalar reference).
inline void IQLaneSums(const DecodedIQ& w, const BlockQ8_K& x, int32_t* lanes) {
  for (int l = 0; l < 8; ++l) lanes[l] = -w.offset * (x.bsums[2 * l] + x.bsums[2 * l + 1]);
  for (int e = 0; e < kQK_K; ++e) {
    lanes[(e % 32) / 4] += w.s[e / 16] * ((w.v[e] + w.offset) * int32_t{x.qs[e]});
  }
}

}  // namespace llm::kernels::internal
