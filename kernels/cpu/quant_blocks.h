// GGML's quantized block formats on the CPU: the byte layouts (ggml-common.h's block_q4_0 ...
// block_q6_K, block_q8_K), their scalar dequantizers and quantizers (llama.cpp's reference
// algorithms), the Q8_K activation quantizer, and the decoded form every matmul path computes
// its dot products on.
//
// The dot product of a weight row with an activation row quantized to Q8 (Q8_0 blocks of 32 for
// the legacy formats, Q8_K super-blocks of 256 for the K-quants, as ggml does) is defined on the
// decoded blocks below, in one float evaluation order that every ISA follows, so the scalar, AVX2
// and AVX-512 paths give bitwise the same result. Per block, 8 lanes l = 0..7:
//
//  The 32-block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (DecodedLegacy w, Q8_0 x) are the exception:
//  one lane per block, 16 chains. Block b adds to chain c = b % 16, in increasing b:
//    D_b = sum over its 32 elements of u[e] * x[e], S_b = sum x[e] (exact int32)
//    no min (Q4_0, Q5_0, Q8_0): acc_c = fma(d_w * d_x, float(D_b - offset * S_b), acc_c),
//                         offset 8 / 16 / 128 (Q8_0 decoded as u = q + 128)
//    min (Q4_1, Q5_1):    acc_c = fma(d_w * d_x, float(D_b), acc_c);
//                         acc_c = fma(m_w * d_x, float(S_b), acc_c)
//  and y = h2[0] + h2[1] with h8[l] = acc_l + acc_{l+8}, h4[l] = h8[l] + h8[l+4],
//  h2[l] = h4[l] + h4[l+2] (+ bias last). So a SIMD kernel sums a block's products in an integer
//  lane and pays one conversion, scale product and fma per 16 blocks (legacy_packed.h).
//  K-quants (DecodedK w, Q8_K x), chunk h = 0..7 covers elements 32h .. 32h + 31, lane l of a
//  chunk its elements 32h + 4l .. 32h + 4l + 3, which lie in group g = 2h + l / 4 (of 16):
//    L_l = sum over h of sc[2h + l / 4] * (sum u[e] * x[e])  (exact int32)
//    M_l = mn[2l] * bsums[2l] + mn[2l + 1] * bsums[2l + 1]  (exact int32)
//    acc_l = fma(d_w * d_x, float(L_l), acc_l); acc_l = fma(-(dmin_w * d_x), float(M_l), acc_l)
//  and at the end
//  y = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), + bias last (the tree of
//  q8_0.h). The unsigned quants u stay below 64, the activations within [-127, 127], so the
//  x86 maddubs/madd pairs never saturate.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llm::kernels::internal {

// ggml-common.h's layouts; fp16 values as their bits.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];  // element i < 16: low nibble of qs[i]; element 16 + i: high nibble
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit i (little-endian uint32) is the fifth bit of element i
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// IQ4_NL: Q4_0's layout; a nibble indexes kIQ4NLValues instead of being q - 8.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
// IQ4_NL's values (ggml's kvalues_iq4nl): denser near 0, as trained weights are.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4: an E8M0 exponent e, then Q4_0's nibble order; a nibble indexes kMXFP4Values.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};
// ggml's kvalues_mxfp4: the E2M1 values (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) doubled,
// so that the scale is half of E8M0's 2^(e - 127).
inline constexpr int8_t kMXFP4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};
// ggml_e8m0_to_fp32_half: 2^(e - 128) (e 0 and 1: subnormal; 255: 2^127, finite).
inline float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
// Q1_0: 128 sign bits (element j: bit j % 8 of qs[j / 8]), weight = bit ? d : -d.
struct BlockQ1_0 {
  uint16_t d;
  uint8_t qs[16];
};
// NVFP4: 4 UE4M3 scale bytes (d[s] for sub-block s of 16 weights), then 32 bytes of E2M1 codes:
// byte 8s + j holds element j (low nibble) and j + 8 (high) of sub-block s; a code indexes
// kMXFP4Values.
struct BlockNVFP4 {
  uint8_t d[4];
  uint8_t qs[32];
};
// ggml_ue4m3_to_fp32: half the unsigned E4M3 value (exponent bits 6..3, bias 7; mantissa bits
// 2..0), as kMXFP4Values are doubled: m 2^-10 for exponent 0, (1 + m / 8) 2^(e - 8) above, 0 for
// 0x7F (E4M3's NaN code) as for 0; bit 7 is not read, so 0xFF is 240.
inline float UE4M3Half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int e = (x >> 3) & 0xF, m = x & 7;
  const float raw = e == 0 ? __builtin_ldexpf(static_cast<float>(m), -9)
                           : __builtin_ldexpf(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return raw * 0.5f;
}
// IQ4_XS: sub-block s (32 weights) has scale ls = (scales_l[s / 2] >> 4 (s % 2)) & 15 |
// ((scales_h >> 2s) & 3) << 4 and nibbles qs[16s .. 16s + 15] in IQ4_NL's order.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
inline int IQ4XSScale(const BlockIQ4_XS& b, int s) {  // ls - 32
  return (((b.scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((b.scales_h >> (2 * s)) & 3) << 4)) - 32;
}
// Sets sub-block s's biased ls (0..63) into scales_l / scales_h, which must hold 0 there.
inline void AddIQ4XSScale(BlockIQ4_XS& b, int s, int ls) {
  b.scales_l[s / 2] = static_cast<uint8_t>(b.scales_l[s / 2] | (ls & 15) << (4 * (s % 2)));
  b.scales_h = static_cast<uint16_t>(b.scales_h | (ls >> 4) << (2 * s));
}
struct BlockQ2_K {
  uint8_t scales[16];  // per 16 weights: scale (low nibble) and min (high nibble)
  uint8_t qs[64];      // 2-bit quants
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];   // high bit of element e: bit e / 32 of hmask[e % 32]
  uint8_t qs[64];      // low 2 bits
  uint8_t scales[12];  // 16 6-bit scales, biased by 32
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 6-bit scales and 8 6-bit mins (per 32 weights)
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // fifth bit of element e: bit e / 32 of qh[e % 32]
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // per 16 weights
  uint16_t d;
};
// Activations of the K-quant dot products (never stored in a file). Unlike ggml's block (d first,
// 292 bytes), qs comes first and the block is padded to whole cache lines, so the AVX-512
// kernels' 64-byte loads of qs are aligned: at ggml's offset of 4 every one of them split a line,
// and the 512-bit K-quant panels' inner loop ran ~25% slower for it (a microbench of its
// multiplies in L1, 30 Nov 2026: 1.99 against 1.48 ns per row and block).
struct alignas(64) BlockQ8_K {
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of 16 consecutive qs
  float d;
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 &&
                  sizeof(BlockMXFP4) == 17 && sizeof(BlockQ1_0) == 18 && sizeof(BlockNVFP4) == 36 &&
                  sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24,
              "legacy blocks are unpadded");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210,
              "K-quant blocks are unpadded");
static_assert(sizeof(BlockQ8_K) == 320, "Q8_K blocks are whole cache lines");

// A legacy block for the dot product: weight e = d * (u[e] - offset) + m.
struct DecodedLegacy {
  float d = 0, m = 0;
  int offset = 0;  // 8 (Q4_0), 16 (Q5_0), 128 (Q8_0, IQ4_NL, MXFP4), 1 (Q1_0), 0 (with a min)
  bool has_min = false;
  uint8_t u[kQKLegacy];
};
// A K-quant super-block for the dot product: weight e = d * sc[g] * u[e] - dmin * mn[g],
// g = e / 16 (the formats with 32-weight sub-blocks repeat each scale twice).
struct DecodedK {
  float d = 0, dmin = 0;
  uint8_t u[kQK_K];
  int16_t sc[16], mn[16];
};

void DecodeLegacy(DType t, const void* block, DecodedLegacy* out);
// Sub-block s (0..7) of an IQ4_XS super-block as a 32-block: d * (ls - 32) (exact in float), the
// values + 128, offset 128.
void DecodeIQ4XSSub(const BlockIQ4_XS& b, int s, DecodedLegacy* out);
// Sub-block s (0..3) of a Q1_0 block as a 32-block: d, u = 2 where the bit is set and 0 where
// not, offset 1 (u - 1 = +-1).
void DecodeQ1_0Sub(const BlockQ1_0& b, int s, DecodedLegacy* out);
// NVFP4 per 32 weights: two 16-weight halves, each with its own scale.
struct DecodedNVFP4 {
  float d[2];    // UE4M3Half of the halves' scales
  int8_t v[32];  // kMXFP4Values, in element order
};
// Sub-block s (0, 1) of an NVFP4 block: its sub-blocks 2s and 2s + 1 of 16.
void DecodeNVFP4Sub(const BlockNVFP4& b, int s, DecodedNVFP4* out);
void DecodeK(DType t, const void* block, DecodedK* out);

// ggml's dequantize_row_* for a block format: k / BlockSize(t) blocks at src into k floats.
void DequantizeRow(DType t, const void* src, float* dst, int64_t k);
// llama.cpp's quantize_row_*_ref (k a multiple of BlockSize(t)); Q8_0 uses the rounding of
// QuantizeRowQ8_0 (q8_0.h), which equals ggml's for finite input.
void QuantizeRow(DType t, const float* x, void* dst, int64_t k);
// ggml's quantize_row_q8_K: d = max / -127 of the element with the largest |x|, q = round(x / d).
void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out);

// The integer scales and mins of a K-quant header, as DecodeK fills them. `static`: every ISA's
// translation unit gets its own copy (see matmul_internal.h).
static inline void ScalesQ4K(const uint8_t* s, int16_t sc[16], int16_t mn[16]) {
  for (int j = 0; j < 8; ++j) {
    int a, b;
    if (j < 4) {
      a = s[j] & 63;
      b = s[j + 4] & 63;
    } else {
      a = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
      b = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
    sc[2 * j] = sc[2 * j + 1] = static_cast<int16_t>(a);
    mn[2 * j] = mn[2 * j + 1] = static_cast<int16_t>(b);
  }
}
static inline void ScalesQ3K(const uint8_t* s, int16_t sc[16], int16_t mn[16]) {
  for (int g = 0; g < 16; ++g) {
    const int lo = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
    const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    sc[g] = static_cast<int16_t>((lo | (hi << 4)) - 32);
    mn[g] = static_cast<int16_t>(4 * sc[g]);  // u = q + 4
  }
}
static inline void ScalesQ2K(const uint8_t* s, int16_t sc[16], int16_t mn[16]) {
  for (int g = 0; g < 16; ++g) {
    sc[g] = static_cast<int16_t>(s[g] & 0xF);
    mn[g] = static_cast<int16_t>(s[g] >> 4);
  }
}
static inline void ScalesQ6K(const int8_t* s, int16_t sc[16], int16_t mn[16]) {
  for (int g = 0; g < 16; ++g) {
    sc[g] = s[g];
    mn[g] = static_cast<int16_t>(32 * s[g]);  // u = q + 32
  }
}

}  // namespace llm::kernels::internal
