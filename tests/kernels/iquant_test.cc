// The grid i-quants (IQ2_XXS ... IQ1_M) and the ternary formats (TQ1_0, TQ2_0): dequantization
// equals ggml's (hashes of gguf-py's numpy dequantizer, an independent implementation, on fixed
// blocks), every ISA's matmul gives the scalar reference's bits and stays within the
// activation-rounding bound of the float product with the dequantized weights, GEMV rows equal GEMM
// rows, embedding rows are the dequantized rows, and no config can ask to quantize to them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

constexpr DType kIQFormats[] = {DType::kIQ2_XXS, DType::kIQ2_XS, DType::kIQ2_S,
                                DType::kIQ3_XXS, DType::kIQ3_S,  DType::kIQ1_S,
                                DType::kIQ1_M,   DType::kTQ1_0,  DType::kTQ2_0};

// `blocks` blocks of t: splitmix64 bytes (seed 0xC0FFEE, little-endian words), d = 2^-8 (fp16
// 0x1C00; first, or last for TQ1_0 / TQ2_0; IQ1_M: its nibbles atop the 4 scale words at byte
// 48). The 13 TQ1_0 byte values no quantizer writes (it writes ceil(256 n / 243), n < 243) and
// TQ2_0's 2-bit 3s (t = 2) are decoded as ggml does.
std::vector<uint8_t> FixedBlocks(DType t, int blocks) {
  const size_t bb = BlockBytes(t);
  std::vector<uint8_t> raw = testing::SplitMixBytes(blocks * bb, 0xC0FFEE);
  const uint16_t d16 = 0x1C00;
  for (int b = 0; b < blocks; ++b) {
    uint8_t* p = raw.data() + b * bb;
    if (IsTernaryQuant(t)) {
      std::memcpy(p + bb - 2, &d16, 2);
      continue;
    }
    if (t != DType::kIQ1_M) {
      std::memcpy(p, &d16, 2);
      continue;
    }
    for (int w = 0; w < 4; ++w) {
      uint16_t word;
      std::memcpy(&word, p + 48 + 2 * w, 2);
      word = static_cast<uint16_t>((word & 0x0FFF) | ((d16 >> (4 * w)) & 0xF) << 12);
      std::memcpy(p + 48 + 2 * w, &word, 2);
    }
  }
  return raw;
}

// The FNV-1a hash of 16 FixedBlocks dequantized (float32 bytes) and their sum of |y|, from
// gguf-py's dequantize (llama.cpp c392e50, numpy), bitwise ggml's dequantize_row_iq* / _tq*.
struct Golden {
  DType t;
  uint64_t fnv;
  double abs_sum;
};
constexpr Golden kGolden[] = {
    {DType::kIQ2_XXS, 0x8ef6cd0b68cd8eb6ull, 588.983398},
    {DType::kIQ2_XS, 0x00432c9af887963bull, 649.930664},
    {DType::kIQ2_S, 0x91be87fe51226cdbull, 657.807129},
    {DType::kIQ3_XXS, 0x3a43dc0683b75e17ull, 1507.45703},
    {DType::kIQ3_S, 0x4d58d03ccee191f9ull, 1442.05469},
    {DType::kIQ1_S, 0xe2f0daeebe684554ull, 79.4160156},
    {DType::kIQ1_M, 0xe2a1979db0173bf7ull, 78.6445312},
    {DType::kTQ1_0, 0x9fd629a2d7b69114ull, 10.6367188},
    {DType::kTQ2_0, 0x8ec5c549d4be9c81ull, 16.0546875},
};

TEST(IQuant, DequantizationIsGgmls) {
  for (const Golden& g : kGolden) {
    const auto q = FixedBlocks(g.t, 16);
    std::vector<float> y(16 * kQK_K);
    DequantizeRows(g.t, q.data(), 16, kQK_K, y.data());
    double abs_sum = 0;
    for (float f : y) abs_sum += std::fabs(f);
    EXPECT_NEAR(abs_sum, g.abs_sum, 1e-3) << DTypeName(g.t);
    EXPECT_EQ(testing::Fnv1a(y.data(), 4 * y.size()), g.fnv)
        << DTypeName(g.t) << ": some dequantized value differs from ggml's";
  }
}

std::vector<float> RandomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

struct Shape {
  int m, k, n;
};
// GEMV and GEMM, m across the 16-row tiles and chunks, n not a multiple of anything.
constexpr Shape kShapes[] = {{1, 512, 37}, {3, 256, 5}, {17, 768, 9}, {33, 512, 4}};

TEST(IQuant, IsasAgreeBitwiseAndStayNearTheFloatProduct) {
  const internal::MatmulKernels* isas[internal::kMaxMatmulIsas];
  const int num_isas = internal::AvailableMatmulKernels(isas);
  for (DType t : kIQFormats) {
    for (const Shape& s : kShapes) {
      std::vector<uint8_t> w(RowBytes(t, s.k) * s.n);
      FillRandomBlocks(t, 7 + s.n, w.data(), static_cast<int64_t>(s.n) * (s.k / kQK_K));
      std::vector<float> wd(static_cast<size_t>(s.n) * s.k);
      DequantizeRows(t, w.data(), s.n, s.k, wd.data());
      auto x = RandomVec(static_cast<size_t>(s.m) * s.k, 29 + s.m);
      x[3] = 0.0f;
      if (s.m > 1) std::fill(x.begin() + s.k, x.begin() + 2 * s.k, 0.0f);  // an all-zero row
      const auto bias = RandomVec(s.n, 5);
      std::vector<float> ref;
      for (int i = 0; i < num_isas; ++i) {
        std::vector<float> y(static_cast<size_t>(s.m) * s.n);
        internal::MatmulWith(*isas[i], x.data(), s.m, s.k, w.data(), t, s.n, bias.data(), y.data());
        if (ref.empty()) {
          ref = y;
        } else {
          ASSERT_EQ(std::memcmp(ref.data(), y.data(), 4 * y.size()), 0)
              << DTypeName(t) << " " << isas[i]->isa << " differs from " << isas[0]->isa << " m "
              << s.m << " k " << s.k << " n " << s.n;
        }
      }
      // Against sum x * w_dequantized: each activation rounded to a step of amax / 127 of its
      // 256-block (half a step of error).
      for (int i = 0; i < s.m; ++i) {
        for (int j = 0; j < s.n; ++j) {
          double exact = bias[j], bound = 1e-5;
          for (int b = 0; b < s.k / kQK_K; ++b) {
            double amax = 0, wabs = 0;
            for (int e = b * kQK_K; e < (b + 1) * kQK_K; ++e) {
              const double xv = x[static_cast<size_t>(i) * s.k + e];
              const double wv = wd[static_cast<size_t>(j) * s.k + e];
              exact += xv * wv;
              amax = std::max(amax, std::fabs(xv));
              wabs += std::fabs(wv);
              bound += 1e-6 * std::fabs(xv * wv);
            }
            bound += amax * (0.5 / 127) * wabs;
          }
          ASSERT_NEAR(ref[static_cast<size_t>(i) * s.n + j], exact, bound)
              << DTypeName(t) << " i " << i << " j " << j;
        }
      }
      // Batch invariance: each row alone (GEMV) gives the GEMM row's bits.
      for (int i = 0; i < s.m; ++i) {
        std::vector<float> y1(s.n);
        Matmul(x.data() + static_cast<size_t>(i) * s.k, 1, s.k, w.data(), t, s.n, bias.data(),
               y1.data());
        ASSERT_EQ(std::memcmp(y1.data(), ref.data() + static_cast<size_t>(i) * s.n, 4 * s.n), 0)
            << DTypeName(t) << " row " << i;
      }
    }
  }
}

TEST(IQuant, EmbeddingRowsAreDequantizedRows) {
  const int rows = 5, dim = 512;
  for (DType t : kIQFormats) {
    const auto w = FixedBlocks(t, rows * dim / kQK_K);
    std::vector<float> wd(static_cast<size_t>(rows) * dim);
    DequantizeRows(t, w.data(), rows, dim, wd.data());
    const int32_t ids[] = {3, 0};
    std::vector<float> out(2 * dim);
    Embedding(ids, 2, w.data(), t, rows, dim, 0, out.data());
    EXPECT_EQ(std::memcmp(out.data(), wd.data() + 3 * dim, 4 * dim), 0) << DTypeName(t);
    EXPECT_EQ(std::memcmp(out.data() + dim, wd.data(), 4 * dim), 0) << DTypeName(t);
  }
}

// Files only: model.quantization cannot name them (no quantizer here).
TEST(IQuant, AreNotQuantizationTargets) {
  for (DType t : kIQFormats) {
    EXPECT_TRUE(DecodesAsIQ(t) && IsBlockFormat(t) && BlockSize(t) == kQK_K) << DTypeName(t);
    DType parsed;
    EXPECT_FALSE(ParseQuantFormat(DTypeName(t), &parsed)) << DTypeName(t);
  }
}

}  // namespace
}  // namespace llm::kernels
