// The block formats of kernels/cpu/quant_blocks.h: the bit layout of every format against values
// worked out by hand from ggml's layout (hand-built blocks, independent of the decoders), the
// quantizers' round-trip error against llama.cpp's test-quantize-fns bounds, and the Q8_K
// activation quantizer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/quant_blocks.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

using namespace internal;  // NOLINT: the block structs
using testing::Fnv1a;
using testing::SplitMixBytes;

constexpr uint16_t kHalf = 0x3800, kOne = 0x3C00, kTwo = 0x4000, kMinusOne = 0xBC00;

// Word i of SplitMixBytes(8 n, seed) as the float of its top 24 bits minus 2^23: exact, in
// [-2^23, 2^23) (the quantizer goldens' input, before each block's power-of-two scale).
std::vector<float> SplitMixInts24(int n, uint64_t seed) {
  const auto words = SplitMixBytes(8 * static_cast<size_t>(n), seed);
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) {
    uint64_t z;
    std::memcpy(&z, words.data() + 8 * static_cast<size_t>(i), 8);
    out[i] = static_cast<float>(static_cast<int64_t>((z >> 40) & 0xFFFFFF) - (1 << 23));
  }
  return out;
}

template <class B>
std::vector<float> Dequant(DType t, const B& b) {
  std::vector<float> out(BlockSize(t));
  DequantizeRow(t, &b, out.data(), BlockSize(t));
  return out;
}

TEST(QuantLayout, Q4_0AndQ4_1) {
  BlockQ4_0 a{};
  a.d = kHalf;
  for (int i = 0; i < 16; ++i) a.qs[i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  const auto fa = Dequant(DType::kQ4_0, a);
  // element i < 16: low nibble i; element 16 + i: high nibble 15 - i; weight 0.5 * (q - 8)
  EXPECT_EQ(fa[0], -4.0f);
  EXPECT_EQ(fa[15], 3.5f);
  EXPECT_EQ(fa[16], 3.5f);
  EXPECT_EQ(fa[31], -4.0f);
  EXPECT_EQ(fa[9], 0.5f);
  BlockQ4_1 b{};
  b.d = kTwo;
  b.m = kMinusOne;
  b.qs[3] = 0x5A;  // element 3: 10, element 19: 5
  const auto fb = Dequant(DType::kQ4_1, b);
  EXPECT_EQ(fb[3], 19.0f);  // 2 * 10 - 1
  EXPECT_EQ(fb[19], 9.0f);  // 2 * 5 - 1
  EXPECT_EQ(fb[0], -1.0f);  // q = 0: the min
}

TEST(QuantLayout, Q5_0AndQ5_1) {
  BlockQ5_0 a{};
  a.d = kOne;
  a.qs[0] = 0x31;                                           // element 0: low 1, element 16: low 3
  a.qs[5] = 0xF0;                                           // element 5: low 0, element 21: low 15
  const uint32_t qh = (1u << 0) | (1u << 21) | (1u << 30);  // fifth bits of 0, 21, 30
  std::memcpy(a.qh, &qh, 4);
  const auto fa = Dequant(DType::kQ5_0, a);
  EXPECT_EQ(fa[0], 1.0f);     // 17 - 16
  EXPECT_EQ(fa[16], -13.0f);  // 3 - 16
  EXPECT_EQ(fa[5], -16.0f);   // 0 - 16
  EXPECT_EQ(fa[21], 15.0f);   // 31 - 16
  EXPECT_EQ(fa[30], 0.0f);    // 16 - 16
  EXPECT_EQ(fa[14], -16.0f);
  BlockQ5_1 b{};
  b.d = kHalf;
  b.m = kOne;
  b.qs[15] = 0x0F;  // element 15: 15, element 31: 0 + 16 (fifth bit)
  const uint32_t qh1 = 1u << 31;
  std::memcpy(b.qh, &qh1, 4);
  const auto fb = Dequant(DType::kQ5_1, b);
  EXPECT_EQ(fb[15], 8.5f);  // 0.5 * 15 + 1
  EXPECT_EQ(fb[31], 9.0f);  // 0.5 * 16 + 1
}

// IQ4_NL: Q4_0's nibble layout; nibble q is d times entry q of ggml's kvalues_iq4nl (written out
// here from ggml-common.h, not taken from the implementation's table).
TEST(QuantLayout, IQ4_NL) {
  constexpr float kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
  BlockIQ4_NL b{};
  b.d = kHalf;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const auto f = Dequant(DType::kIQ4_NL, b);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(f[i], 0.5f * kValues[i]) << i;
    EXPECT_EQ(f[16 + i], 0.5f * kValues[15 - i]) << i;
  }
}

// IQ4_XS: sub-block s has ls = its nibble of scales_l[s / 2] (low for even s) | 2 bits of
// scales_h (bits 2s, 2s + 1) << 4, and weight d * (ls - 32) * value (ggml's dequantize_row_iq4_xs).
TEST(QuantLayout, IQ4_XS) {
  constexpr float kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
  BlockIQ4_XS b{};
  b.d = kHalf;
  const int ls[8] = {0, 31, 32, 33, 63, 17, 40, 1};
  for (int s = 0; s < 8; ++s) {
    b.scales_l[s / 2] = static_cast<uint8_t>(b.scales_l[s / 2] | (ls[s] & 15) << (4 * (s % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | (ls[s] >> 4) << (2 * s));
    for (int i = 0; i < 16; ++i) b.qs[16 * s + i] = static_cast<uint8_t>((i + s) % 16 | i << 4);
  }
  const auto f = Dequant(DType::kIQ4_XS, b);
  ASSERT_EQ(f.size(), 256u);
  for (int s = 0; s < 8; ++s) {
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(f[32 * s + i], 0.5f * (ls[s] - 32) * kValues[(i + s) % 16]) << s << " " << i;
      EXPECT_EQ(f[32 * s + 16 + i], 0.5f * (ls[s] - 32) * kValues[i]) << s << " " << i;
    }
  }
}

TEST(QuantLayout, Q2_K) {
  BlockQ2_K b{};
  b.d = kOne;
  b.dmin = kHalf;
  b.scales[0] = 0x23;   // group 0 (elements 0..15): scale 3, min 2
  b.scales[2] = 0x05;   // group 2 (elements 32..47): scale 5, min 0
  b.scales[15] = 0x17;  // group 15 (elements 240..255): scale 7, min 1
  // qs[l] holds elements l, l + 32, l + 64, l + 96 in bits 0-1, 2-3, 4-5, 6-7 (first 128);
  // qs[32 + l] the same for elements 128 + ...
  b.qs[1] = 0x09;        // element 1: 1, element 33: 2
  b.qs[32 + 31] = 0xC0;  // element 128 + 96 + 31 = 255: 3
  const auto f = Dequant(DType::kQ2_K, b);
  EXPECT_EQ(f[1], 2.0f);     // 1 * 3 * 1 - 0.5 * 2
  EXPECT_EQ(f[0], -1.0f);    // 0 - 0.5 * 2
  EXPECT_EQ(f[33], 10.0f);   // 5 * 2
  EXPECT_EQ(f[255], 20.5f);  // 7 * 3 - 0.5 * 1
}

TEST(QuantLayout, Q3_K) {
  BlockQ3_K b{};
  b.d = kOne;
  // 6-bit scale s of group g (value s - 32): low 4 bits in scales[g] (g < 8) or the high nibble
  // of scales[g - 8]; high 2 bits in scales[8 + g % 4] at bit 2 * (g / 4).
  b.scales[0] = 0x01;  // group 0 low 1, group 8 low 0
  b.scales[8] = 0x02;  // group 0 high 2 -> 33 (scale 1); group 4 high 0; group 8: bits 4-5 = 0
  b.scales[1] = 0xF0;  // group 9 low 15
  b.scales[9] = 0x20;  // group 9 (g % 4 = 1, g / 4 = 2): bits 4-5 = 2 -> 32 + 15 = 47 (15)
  // group 3: scales[3] = 0 low, scales[11] bits 0-1 = 0 -> 0 - 32 = -32
  // element e: low 2 bits in qs[32 * (e / 128) + e % 32] at 2 * ((e / 32) % 4); high bit e / 32
  // of hmask[e % 32]; q = low + 4 * high - 4
  b.qs[0] = 0x03;     // element 0 low 3
  b.hmask[0] = 0x01;  // element 0 high 1 -> q = 3
  // qs[48] holds elements 144 (bits 0-1), 176 (2-3), 208 (4-5), 240 (6-7)
  b.qs[48] = 0x01 | 0x0C | 0x30;  // lows: 144 -> 1, 176 -> 3, 208 -> 3
  b.hmask[16] = 0x40;             // element 6 * 32 + 16 = 208: high bit
  const auto f = Dequant(DType::kQ3_K, b);
  EXPECT_EQ(f[0], 3.0f);           // scale 1 * 3
  EXPECT_EQ(f[1], -4.0f);          // scale 1 * (0 - 4)
  EXPECT_EQ(f[48], 128.0f);        // group 3: -32 * (0 - 4)
  EXPECT_EQ(f[144], -45.0f);       // 15 * -3
  EXPECT_EQ(f[208], -32.0f * 3);   // group 13: s = 0 -> -32, q = 3
  EXPECT_EQ(f[176], -32.0f * -1);  // group 11: -32, q = 3 - 4
}

TEST(QuantLayout, Q4_KAndQ5_K) {
  BlockQ4_K b{};
  b.d = kOne;
  b.dmin = kTwo;
  // sub-block j < 4: scale scales[j] & 63, min scales[j + 4] & 63; j >= 4: scale
  // (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4, min (scales[j + 4] >> 4) | (scales[j] >> 6)
  // << 4
  b.scales[0] = 3 | 0x40;  // sub-block 0 scale 3; sub-block 4 scale high bits 1
  b.scales[4] = 1;         // sub-block 0 min 1
  b.scales[1] = 5;         // sub-block 1 scale 5, min scales[5] = 0
  b.scales[8] = 0x21;      // sub-block 4 scale low 1 (-> 17), min low 2 (-> 2)
  // 64 weights per 32 bytes: low nibbles are sub-block 2i, high nibbles 2i + 1
  b.qs[0] = 0x21;   // element 0: 1, element 32: 2
  b.qs[64] = 0x07;  // element 128 (sub-block 4): 7
  const auto f = Dequant(DType::kQ4_K, b);
  EXPECT_EQ(f[0], 1.0f);      // 3 * 1 - 2 * 1
  EXPECT_EQ(f[1], -2.0f);     // 0 - 2
  EXPECT_EQ(f[32], 10.0f);    // 5 * 2
  EXPECT_EQ(f[128], 115.0f);  // 17 * 7 - 2 * 2
  EXPECT_EQ(f[160], 0.0f);
  BlockQ5_K c{};
  c.d = kOne;
  c.dmin = kTwo;
  std::memcpy(c.scales, b.scales, 12);
  c.qs[0] = 0x21;
  c.qh[0] = 0x03;  // fifth bits: element 0 (bit 0) and element 32 (bit 1)
  c.qh[5] = 0x10;  // element 4 * 32 + 5 = 133 (sub-block 4)
  const auto g = Dequant(DType::kQ5_K, c);
  EXPECT_EQ(g[0], 49.0f);     // 3 * 17 - 2
  EXPECT_EQ(g[32], 90.0f);    // 5 * 18
  EXPECT_EQ(g[133], 268.0f);  // 17 * 16 - 4
}

TEST(QuantLayout, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalf;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g - 8);
  // per 128 weights: ql[l] low nibble -> l, ql[l + 32] low -> l + 32, ql[l] high -> l + 64,
  // ql[l + 32] high -> l + 96; qh[l] bits 0-1, 2-3, 4-5, 6-7 are their high 2 bits; q - 32
  b.ql[0] = 0x5F;        // element 0 low 15, element 64 low 5
  b.qh[0] = 0x13;        // element 0 high 3 -> 63; element 64 (bits 4-5) high 1 -> 21
  b.ql[64 + 33] = 0xA0;  // second half: element 128 + 33 low 0, element 128 + 97 low 10
  b.qh[32 + 1] = 0xC4;   // element 161 (bits 2-3) high 1 -> 16; element 225 high 3 -> 58
  const auto f = Dequant(DType::kQ6_K, b);
  EXPECT_EQ(f[0], 0.5f * -8 * 31);    // group 0 scale -8, q 63 - 32
  EXPECT_EQ(f[64], 0.5f * -4 * -11);  // group 4 scale -4, q 21 - 32
  EXPECT_EQ(f[161], 0.5f * 2 * -16);  // group 10 scale 2, q 16 - 32
  EXPECT_EQ(f[225], 0.5f * 6 * 26);   // group 14 scale 6, q 58 - 32
  EXPECT_EQ(f[1], 0.5f * -8 * -32);
}

// llama.cpp's test-quantize-fns data, metric and bounds: its "total error" of a round trip of
// 0.1 + 2 cos(i) is sqrt(sum of squared differences) / n.
TEST(QuantRoundTrip, WithinLlamaCppBounds) {
  constexpr int kN = 4096;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = 0.1f + 2 * std::cos(static_cast<float>(i));
  struct Case {
    DType t;
    double bound;
  };
  const Case cases[] = {
      {DType::kQ8_0, 0.002},   {DType::kQ4_0, 0.002},   {DType::kQ4_1, 0.002},
      {DType::kQ5_0, 0.002},   {DType::kQ5_1, 0.002},   {DType::kQ2_K, 0.0075},
      {DType::kQ3_K, 0.0040},  {DType::kQ4_K, 0.002},   {DType::kQ5_K, 0.002},
      {DType::kQ6_K, 0.002},   {DType::kIQ4_NL, 0.002}, {DType::kIQ4_XS, 0.002},
      {DType::kMXFP4, 0.0025},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> q(RowBytes(c.t, kN));
    std::vector<float> back(kN);
    QuantizeRow(c.t, x.data(), q.data(), kN);
    DequantizeRow(c.t, q.data(), back.data(), kN);
    double sum = 0;
    for (int i = 0; i < kN; ++i) sum += (back[i] - x[i]) * (back[i] - x[i]);
    const double total = std::sqrt(sum) / kN;
    std::printf("[ %s ] round-trip total error %.3g (bound %.3g)\n", DTypeName(c.t), total,
                c.bound);
    EXPECT_LT(total, c.bound) << DTypeName(c.t);
  }
}

// More bits, less error: on Gaussian weights every format's relative RMS error sits in a band.
TEST(QuantRoundTrip, ErrorFollowsTheBits) {
  constexpr int kN = 1 << 14;
  std::vector<float> x(kN);
  uint64_t s = 12345;
  for (int i = 0; i < kN; i += 2) {  // Box-Muller on a 64-bit LCG
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u1 = ((s >> 11) + 1.0) * 0x1.0p-53;
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u2 = (s >> 11) * 0x1.0p-53;
    x[i] = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
    x[i + 1] = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::sin(2 * M_PI * u2));
  }
  // (Q1_0 keeps only signs: its error is sqrt(1 - 2 / pi) = 0.603 of a Gaussian's RMS.)
  const std::pair<DType, double> bands[] = {
      {DType::kQ8_0, 0.006}, {DType::kQ6_K, 0.02},   {DType::kQ5_K, 0.04},   {DType::kQ5_1, 0.045},
      {DType::kQ5_0, 0.05},  {DType::kQ4_K, 0.08},   {DType::kQ4_1, 0.09},   {DType::kQ4_0, 0.10},
      {DType::kQ3_K, 0.18},  {DType::kQ2_K, 0.38},   {DType::kIQ4_NL, 0.09}, {DType::kIQ4_XS, 0.09},
      {DType::kMXFP4, 0.13}, {DType::kNVFP4, 0.105}, {DType::kQ1_0, 0.61}};
  for (const auto& [t, bound] : bands) {
    std::vector<uint8_t> q(RowBytes(t, kN));
    std::vector<float> back(kN);
    QuantizeRow(t, x.data(), q.data(), kN);
    DequantizeRow(t, q.data(), back.data(), kN);
    double err = 0, ref = 0;
    for (int i = 0; i < kN; ++i) {
      err += (back[i] - x[i]) * (back[i] - x[i]);
      ref += x[i] * x[i];
    }
    const double rel = std::sqrt(err / ref);
    std::printf("[ %s ] relative RMS error on N(0, 1): %.4f (bound %.3g)\n", DTypeName(t), rel,
                bound);
    EXPECT_LT(rel, bound) << DTypeName(t);
  }
}

// MXFP4 against gguf-py's numpy MXFP4 (ggml-org/llama.cpp's gguf-py/gguf/quants.py, the
// reference for ggml's dequantize_row_mxfp4 / quantize_row_mxfp4_ref; llama.cpp c392e50, the peer
// built here, predates the format): FNV-1a hashes of its output on fixed input (SplitMixBytes,
// tests/kernels/random_floats.h).
// 16 blocks of splitmix bytes (seed 0xC0FFEE) with these exponents: subnormal scales (0, 1),
// the smallest normal ones, the middle, and 255 (2^127: values of 8 and 12 overflow to inf).
TEST(MXFP4, DequantizationIsGgmls) {
  constexpr uint8_t kE[16] = {0,   1,   2,   3,   100, 119, 126, 127,
                              128, 129, 150, 200, 253, 254, 255, 120};
  auto raw = SplitMixBytes(16 * 17, 0xC0FFEE);
  for (int b = 0; b < 16; ++b) raw[17 * b] = kE[b];
  std::vector<float> y(16 * 32);
  DequantizeRow(DType::kMXFP4, raw.data(), y.data(), 16 * 32);
  EXPECT_EQ(Fnv1a(y.data(), 4 * y.size()), 0x870ce6134718cbf6ull);
  EXPECT_EQ(E8M0Half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(E8M0Half(128), 1.0f);
  EXPECT_EQ(E8M0Half(255), std::ldexp(1.0f, 127));
}

// Block b < 15: (24 bits of splitmix word 32 b + i, seed 0xBEEF, minus 2^23) * 2^(b - 30): exact
// floats over 15 binades; block 15 zeros; an E2M1 value at a power-of-two scale and a tie of
// signs (the first index wins, as in ggml's search).
TEST(MXFP4, QuantizationIsGgmls) {
  const auto ints = SplitMixInts24(16 * 32, 0xBEEF);
  std::vector<float> x(16 * 32, 0.0f);
  for (int e = 0; e < 15 * 32; ++e) x[e] = ints[e] * std::ldexp(1.0f, e / 32 - 30);
  x[32 * 3 + 5] = 6 * std::ldexp(1.0f, -10);
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * 4 + i]));
  x[32 * 4] = -amax;
  std::vector<uint8_t> q(16 * 17);
  QuantizeRow(DType::kMXFP4, x.data(), q.data(), 16 * 32);
  EXPECT_EQ(q[17 * 0], 117);
  EXPECT_EQ(q[17 * 14], 131);
  EXPECT_EQ(q[17 * 15], 0);
  EXPECT_EQ(Fnv1a(q.data(), q.size()), 0x660667e886be5302ull);
}

// Q1_0 against ggml's dequantize_row_q1_0 and quantize_row_q1_0_ref (ggml-quants.c since the
// type, GGUF 41; llama.cpp c392e50, the peer built here, predates it): element j is bit j % 8 of
// qs[j / 8] (LSB first), +d where set and -d where clear.
TEST(Q1_0, DequantizationIsGgmls) {
  BlockQ1_0 b{};
  b.d = 0xB600;  // -0.375
  b.qs[0] = 0x05;
  b.qs[15] = 0x80;
  const auto f = Dequant(DType::kQ1_0, b);
  EXPECT_EQ(f[0], -0.375f);  // bit 0 set: d itself, negative here
  EXPECT_EQ(f[1], 0.375f);   // clear: -d
  EXPECT_EQ(f[2], -0.375f);
  EXPECT_EQ(f[126], 0.375f);
  EXPECT_EQ(f[127], -0.375f);
  // Random bytes over three blocks (d 2^-24, a subnormal fp16, and 65504): d or -d by the bit.
  auto raw = SplitMixBytes(3 * 18, 0x51);
  const uint16_t ds[3] = {0x0001, 0x3C00, 0x7BFF};
  for (int i = 0; i < 3; ++i) std::memcpy(raw.data() + 18 * i, &ds[i], 2);
  std::vector<float> y(3 * 128);
  DequantizeRow(DType::kQ1_0, raw.data(), y.data(), 3 * 128);
  const float dv[3] = {std::ldexp(1.0f, -24), 1.0f, 65504.0f};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 128; ++j) {
      const bool bit = (raw[18 * i + 2 + j / 8] >> (j % 8)) & 1;
      ASSERT_EQ(y[128 * i + j], bit ? dv[i] : -dv[i]) << i << " " << j;
    }
  }
}

// ggml's quantizer: d = fp16(sum of |x| in element order / 128), a bit set where x >= 0 (so for -0
// too, and never for NaN).
TEST(Q1_0, QuantizationIsGgmls) {
  std::vector<float> x(2 * 128);
  for (int j = 0; j < 128; ++j) x[j] = static_cast<float>(j - 64);  // j = 64 (+0): bit set
  x[5] = -0.0f;  // bit set too; sum |x| = 4096 - 59 = 4037, / 128 = 31.5390625 -> fp16 31.53125
  for (int j = 0; j < 128; ++j) x[128 + j] = -std::ldexp(1.0f + j / 128.0f, -20);
  x[128 + 7] = std::numeric_limits<float>::quiet_NaN();  // no bit; NaN sums to a NaN d
  std::vector<uint8_t> q(2 * 18);
  QuantizeRow(DType::kQ1_0, x.data(), q.data(), 2 * 128);
  EXPECT_EQ(q[0] | q[1] << 8, 0x4FE2);  // 31.5390625 = 2018.5 steps of 2^-6: the even 2018
  EXPECT_EQ(q[2], 0x20);                // elements 0..7: only -0 (element 5)
  for (int i = 3; i < 10; ++i) EXPECT_EQ(q[i], 0) << i;
  for (int i = 10; i < 18; ++i) EXPECT_EQ(q[i], 0xFF) << i;
  uint16_t d1;
  std::memcpy(&d1, q.data() + 18, 2);
  EXPECT_EQ(d1 & 0x7C00, 0x7C00);  // NaN
  EXPECT_NE(d1 & 0x03FF, 0);
  for (int i = 20; i < 36; ++i) EXPECT_EQ(q[i], 0) << i;
  // Without the NaN: the mean of |x| summed in element order, then rounded to fp16 (nearest even).
  x[128 + 7] = -std::ldexp(1.0f + 7 / 128.0f, -20);
  QuantizeRow(DType::kQ1_0, x.data(), q.data(), 2 * 128);
  float sum = 0;
  for (int j = 0; j < 128; ++j) sum += std::fabs(x[128 + j]);
  std::memcpy(&d1, q.data() + 18, 2);
  EXPECT_EQ(d1, F32ToF16(sum / 128));
  EXPECT_EQ(d1, 0x0018);  // 1.49609375 * 2^-20 = 23.94 fp16 subnormal steps of 2^-24: 24
}

// NVFP4 against gguf-py's numpy NVFP4 (ggml-org/llama.cpp's gguf-py/gguf/quants.py, which mirrors
// ggml's dequantize_row_nvfp4, quantize_row_nvfp4_ref and its UE4M3 conversions; llama.cpp
// c392e50, the peer built here, predates the format): FNV-1a hashes of its output on fixed input.
// 8 blocks of splitmix bytes (seed 0xC0FFEE), the first scale byte of each an edge code.
TEST(NVFP4, DequantizationIsGgmls) {
  constexpr uint8_t kEdge[8] = {0x00, 0x01, 0x07, 0x08, 0x7E, 0x7F, 0x80, 0xFF};
  auto raw = SplitMixBytes(8 * 36, 0xC0FFEE);
  for (int b = 0; b < 8; ++b) raw[36 * b] = kEdge[b];
  std::vector<float> y(8 * 64);
  DequantizeRow(DType::kNVFP4, raw.data(), y.data(), 8 * 64);
  EXPECT_EQ(Fnv1a(y.data(), 4 * y.size()), 0xe06d0e5e90954909ull);
  // half the UE4M3 value: 0; 2^-10 (exponent 0, mantissa 1); 7 2^-10; 2^-7 (1 * 2^(1 - 7) / 2);
  // 448 / 2; 0x7F (NaN's code) 0; bit 7 alone 0; 0xFF read as 0x7F's bits but not zeroed: 240
  const float want[8] = {0.0f, 0x1p-10f, 7 * 0x1p-10f, 0x1p-7f, 224.0f, 0.0f, 0.0f, 240.0f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(UE4M3Half(kEdge[i]), want[i]) << i;
  // Layout by hand: sub-block 1, byte j = 2: element 16 + 2 in the low nibble, 16 + 10 high.
  BlockNVFP4 b{};
  b.d[1] = 0x38;  // 2^(7 - 7) / 2 = 0.5
  b.qs[8 + 2] = 0xF3;
  const auto f = Dequant(DType::kNVFP4, b);
  EXPECT_EQ(f[18], 0.5f * 3);    // code 3: value 3 (1.5 doubled)
  EXPECT_EQ(f[26], 0.5f * -12);  // code 15: -12
  EXPECT_EQ(f[2], 0.0f);         // scale 0
}

// Block b < 7: (24 bits of splitmix word 64 b + i, seed 0xBEEF, minus 2^23) * 2^(3b - 33): scales
// from 0 through the subnormal codes to the normal ones; block 7 the same * 2^-8, past 448 * 6
// (the scale clamps to 0x7E); elements 32..47 of block 6 zeros (scale 0).
TEST(NVFP4, QuantizationIsGgmls) {
  std::vector<float> x = SplitMixInts24(8 * 64, 0xBEEF);
  for (int e = 0; e < 8 * 64; ++e) x[e] *= std::ldexp(1.0f, e / 64 < 7 ? 3 * (e / 64) - 33 : -8);
  for (int i = 32; i < 48; ++i) x[64 * 6 + i] = 0.0f;
  std::vector<uint8_t> q(8 * 36);
  QuantizeRow(DType::kNVFP4, x.data(), q.data(), 8 * 64);
  EXPECT_EQ(q[36 * 1], 1);      // a subnormal scale
  EXPECT_EQ(q[36 * 3], 26);     // a normal one
  EXPECT_EQ(q[36 * 6 + 2], 0);  // the zero sub-block
  EXPECT_EQ(q[36 * 7], 0x7E);   // clamped at 448
  EXPECT_EQ(Fnv1a(q.data(), q.size()), 0x5a9264cf0887a28aull);
}

TEST(QuantRoundTrip, ZeroAndConstantBlocks) {
  for (int ti = static_cast<int>(DType::kQ8_0); ti < kNumQuantizable; ++ti) {
    const DType t = static_cast<DType>(ti);
    for (const float v : {0.0f, 0.25f, -3.0f}) {
      std::vector<float> x(kQK_K, v), back(kQK_K);
      std::vector<uint8_t> q(RowBytes(t, kQK_K));
      QuantizeRow(t, x.data(), q.data(), kQK_K);
      DequantizeRow(t, q.data(), back.data(), kQK_K);
      for (int i = 0; i < kQK_K; ++i) {
        ASSERT_NEAR(back[i], v, std::fabs(v) * 0.07 + 1e-6) << DTypeName(t) << " " << v;
      }
    }
  }
}

TEST(QuantQ8K, FollowsGgml) {
  std::vector<float> x(kQK_K);
  for (int i = 0; i < kQK_K; ++i) x[i] = static_cast<float>(i % 17) - 5.0f;
  x[77] = -25.4f;  // the largest magnitude: d = -25.4 / -127 = 0.2, q = -127 there
  BlockQ8_K q;
  QuantizeRowQ8_K(x.data(), kQK_K, &q);
  EXPECT_FLOAT_EQ(q.d, -25.4f / -127.0f);
  EXPECT_EQ(q.qs[77], -127);
  EXPECT_EQ(q.qs[0], -25);  // -5 / 0.2
  for (int g = 0; g < 16; ++g) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += q.qs[16 * g + i];
    EXPECT_EQ(q.bsums[g], s);
  }
  std::vector<float> z(kQK_K, 0.0f);
  QuantizeRowQ8_K(z.data(), kQK_K, &q);
  EXPECT_EQ(q.d, 0.0f);
  EXPECT_EQ(q.qs[3], 0);
}

// ggml's quantize_row_q8_K_ref, written out here (lrintf-style rounding: nearest, ties to even).
void GgmlQuantizeQ8K(const float* x, BlockQ8_K* y) {
  float max = 0, amax = 0;
  for (int j = 0; j < kQK_K; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  const float iscale = -127.f / max;
  for (int j = 0; j < kQK_K; ++j) {
    const int v = static_cast<int>(std::nearbyint(iscale * x[j]));
    y->qs[j] = static_cast<int8_t>(std::min(127, v));
  }
  for (int j = 0; j < kQK_K / 16; ++j) {
    int sum = 0;
    for (int ii = 0; ii < 16; ++ii) sum += y->qs[j * 16 + ii];
    y->bsums[j] = static_cast<int16_t>(sum);
  }
  y->d = 1 / iscale;
}

// The (vectorized) quantizer gives ggml's bytes on random rows of every scale and sign, rows with
// exact half-way products (ties to even), and rows whose largest magnitude appears with both signs.
TEST(QuantQ8K, MatchesGgmlBitwise) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int row = 0; row < 300; ++row) {
    std::vector<float> x(2 * kQK_K);
    const float scale = std::ldexp(1.0f, row % 40 - 20);
    for (float& v : x) v = normal(rng) * scale;
    if (row % 3 == 1) {  // multiples of 0.5 / 127 * 127: many products land on .5
      for (int i = 0; i < 2 * kQK_K; ++i)
        x[i] = 0.5f * static_cast<float>((i * 37 + row) % 255 - 127);
    }
    if (row % 5 == 2) {  // the largest magnitude first negative, then positive
      x[10] = -1000.0f * scale;
      x[20] = 1000.0f * scale;
    }
    BlockQ8_K got[2], want[2];
    QuantizeRowQ8_K(x.data(), 2 * kQK_K, got);
    for (int b = 0; b < 2; ++b) {
      GgmlQuantizeQ8K(x.data() + b * kQK_K, &want[b]);
      ASSERT_EQ(std::memcmp(got[b].qs, want[b].qs, kQK_K), 0) << "row " << row << " block " << b;
      ASSERT_EQ(std::memcmp(got[b].bsums, want[b].bsums, sizeof(want[b].bsums)), 0) << row;
      ASSERT_EQ(got[b].d, want[b].d) << row;
    }
  }
}

// The largest magnitude is found as ggml's scan finds it: NaN elements are skipped (and
// quantize to 0), the first of equal magnitudes gives the sign, and a row whose largest finite
// magnitude is in its last element, or that has an infinity, is handled too.
TEST(QuantQ8K, LargestMagnitudeSkipsNanAndTakesTheFirstOfEqualOnes) {
  std::vector<float> x(kQK_K);
  for (int i = 0; i < kQK_K; ++i) x[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  x[3] = std::nanf("");
  x[200] = 2.0f;
  x[201] = -2.0f;
  x[255] = std::nanf("");
  BlockQ8_K q;
  QuantizeRowQ8_K(x.data(), kQK_K, &q);
  EXPECT_EQ(q.d, 1.0f / (-127.0f / 2.0f));  // from +2 (the first), not -2
  EXPECT_EQ(q.qs[200], -127);
  EXPECT_EQ(q.qs[201], 127);
  EXPECT_EQ(q.qs[3], 0);
  EXPECT_EQ(q.qs[255], 0);

  x[200] = x[201] = 0.0f;
  x[254] = -3.0f;  // the largest magnitude last but one, a NaN after it
  QuantizeRowQ8_K(x.data(), kQK_K, &q);
  EXPECT_EQ(q.d, 1.0f / (-127.0f / -3.0f));
  EXPECT_EQ(q.qs[254], -127);

  x[17] = -std::numeric_limits<float>::infinity();  // non-finite rows give zeros
  QuantizeRowQ8_K(x.data(), kQK_K, &q);
  EXPECT_EQ(q.d, 0.0f);
  EXPECT_EQ(q.qs[254], 0);

  std::vector<float> nans(kQK_K, std::nanf(""));  // no finite magnitude at all: zeros
  QuantizeRowQ8_K(nans.data(), kQK_K, &q);
  EXPECT_EQ(q.d, 0.0f);
  EXPECT_EQ(q.qs[0], 0);
}

}  // namespace
}  // namespace llm::kernels
