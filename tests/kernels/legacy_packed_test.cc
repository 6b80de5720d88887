// Packed Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (kernels/cpu/legacy_packed.h): packing is a bijection on
// rows of any block count and puts every quant, fifth bit and scale where the layout says; a matmul
// on the packed rows gives bitwise the format's result (the scalar reference on ggml's layout)
// on every kernel set (AVX2 and AVX-512 read it natively, scalar unpacks it) for GEMV and GEMM
// shapes with and without a tail after the last 16-block group; the CPU backend repacks these
// five formats (and not when LLM_PACK_WEIGHTS=0) and leaves the K-quants as they are.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

std::vector<float> RandomVec(size_t n, uint32_t seed, float scale = 1.0f) {
  return testing::RandomFloats(n, seed, -scale, scale);
}

constexpr DType kFormats[] = {DType::kQ4_0, DType::kQ4_1,   DType::kQ5_0,   DType::kQ5_1,
                              DType::kQ8_0, DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4,
                              DType::kQ1_0, DType::kNVFP4};

std::vector<uint8_t> QuantMatrix(DType t, int n, int k, uint32_t seed) {
  const auto f = RandomVec(static_cast<size_t>(n) * k, seed, 0.05f);
  std::vector<uint8_t> q(RowBytes(t, k) * n);
  QuantizeRows(t, f.data(), n, k, q.data());
  return q;
}

std::vector<uint8_t> Packed(DType t, const std::vector<uint8_t>& q, int n, int k) {
  std::vector<uint8_t> p(q.size());
  internal::PackLegacyRows(t, q.data(), n, k, p.data());
  return p;
}

DType PackedType(DType t) {
  return internal::PackedLayoutOf(t);
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

TEST(LegacyPacked, PackingIsABijectionThatMovesEveryQuantAndScale) {
  for (int nb : {1, 3, 15, 16, 17, 24, 32, 33, 40, 47, 176}) {
    const int k = 32 * nb, n = 3;
    for (DType t4 : kFormats) {
      if (k % BlockSize(t4) != 0) continue;  // IQ4_XS: whole super-blocks of 8 sub-blocks
      const auto q4 = QuantMatrix(t4, n, k, 7 + nb);
      const auto p4 = Packed(t4, q4, n, k);
      std::vector<uint8_t> back(q4.size());
      internal::UnpackLegacyRows(t4, p4.data(), n, k, back.data());
      ASSERT_EQ(back, q4) << DTypeName(t4) << " nb " << nb;
      if (nb >= 16) {
        ASSERT_NE(p4, q4) << DTypeName(t4) << " nb " << nb;
      }
    }
    const auto q = QuantMatrix(DType::kQ4_0, n, k, 7 + nb);
    const auto p = Packed(DType::kQ4_0, q, n, k);
    // Group 0 of row 0: byte 4b + t of run r is byte 4r + t of block b's quants (elements
    // 4r + t and 16 + 4r + t); the 16 scales follow the 256 bytes of quants.
    if (nb >= 16) {
      ASSERT_NE(p, q) << "nb " << nb << ": a whole group must be repacked";
      const auto* blocks = reinterpret_cast<const internal::BlockQ4_0*>(q.data());
      for (int r = 0; r < 4; ++r) {
        for (int b = 0; b < 16; ++b) {
          for (int t = 0; t < 4; ++t) {
            ASSERT_EQ(p[64 * r + 4 * b + t], blocks[b].qs[4 * r + t]) << r << " " << b << " " << t;
          }
        }
      }
      for (int b = 0; b < 16; ++b) {
        uint16_t d;
        std::memcpy(&d, p.data() + 256 + 2 * b, 2);
        ASSERT_EQ(d, blocks[b].d) << "scale " << b;
      }
    }
  }
}

// Q5_1's whole group: the runs as Q4's, then bit 4b + t of 64-bit mask 2r + h is the fifth bit
// of element 16h + 4r + t of block b, then the 16 scales and the 16 mins.
TEST(LegacyPacked, Q5GroupHoldsItsFifthBitsAsOneMaskPerRunAndNibble) {
  const int k = 32 * 16, n = 2;
  const auto q = QuantMatrix(DType::kQ5_1, n, k, 21);
  const auto p = Packed(DType::kQ5_1, q, n, k);
  const auto* blocks = reinterpret_cast<const internal::BlockQ5_1*>(q.data());
  int set = 0;
  for (int b = 0; b < 16; ++b) {
    uint32_t qh;
    std::memcpy(&qh, blocks[b].qh, 4);
    for (int r = 0; r < 4; ++r) {
      for (int t = 0; t < 4; ++t) {
        ASSERT_EQ(p[64 * r + 4 * b + t], blocks[b].qs[4 * r + t]) << r << " " << b << " " << t;
        for (int h = 0; h < 2; ++h) {
          uint64_t mask;
          std::memcpy(&mask, p.data() + 256 + 8 * (2 * r + h), 8);
          const bool want = (qh >> (16 * h + 4 * r + t)) & 1;
          ASSERT_EQ((mask >> (4 * b + t)) & 1, want ? 1u : 0u) << r << " " << h << " " << b;
          set += want;
        }
      }
    }
    uint16_t d, m;
    std::memcpy(&d, p.data() + 320 + 2 * b, 2);
    std::memcpy(&m, p.data() + 352 + 2 * b, 2);
    ASSERT_EQ(d, blocks[b].d) << "scale " << b;
    ASSERT_EQ(m, blocks[b].m) << "min " << b;
  }
  EXPECT_GT(set, 16) << "random weights should set some fifth bits";
  EXPECT_LT(set, 16 * 32 - 16) << "and leave some clear";
}

// Q8_0's whole group: eight runs, byte 4b + t of run r is quant 4r + t of block b; then the 16
// scales at byte 512.
TEST(LegacyPacked, Q8_0GroupHoldsEightRunsThenItsScales) {
  const int k = 32 * 16;
  const auto q = QuantMatrix(DType::kQ8_0, 1, k, 23);
  const auto p = Packed(DType::kQ8_0, q, 1, k);
  const auto* blocks = reinterpret_cast<const internal::BlockQ8_0*>(q.data());
  for (int b = 0; b < 16; ++b) {
    for (int r = 0; r < 8; ++r) {
      for (int t = 0; t < 4; ++t) {
        ASSERT_EQ(static_cast<int8_t>(p[64 * r + 4 * b + t]), blocks[b].qs[4 * r + t])
            << r << " " << b << " " << t;
      }
    }
    uint16_t d;
    std::memcpy(&d, p.data() + 512 + 2 * b, 2);
    ASSERT_EQ(d, blocks[b].d) << "scale " << b;
  }
}

// Q1_0's whole group (4 blocks of 128): bit 4b + t of 64-bit mask r is the sign bit of element
// 4r + t of 32-weight sub-block b (element 32 (b % 4) + 4r + t of block b / 4), then the 4 d; a
// short group (T = 8 sub-blocks) holds masks of 32 bits.
TEST(LegacyPacked, Q1_0GroupHoldsItsSignBitsAsOneMaskPerQuad) {
  for (const int t : {16, 8}) {
    const int k = 32 * t;
    const auto q = QuantMatrix(DType::kQ1_0, 1, k, 31 + t);
    const auto p = Packed(DType::kQ1_0, q, 1, k);
    ASSERT_EQ(p.size(), q.size());
    const auto* blocks = reinterpret_cast<const internal::BlockQ1_0*>(q.data());
    int set = 0;
    for (int b = 0; b < t; ++b) {
      for (int r = 0; r < 8; ++r) {
        uint64_t mask = 0;
        std::memcpy(&mask, p.data() + r * t / 2, t / 2);
        for (int tt = 0; tt < 4; ++tt) {
          const int e = 32 * (b % 4) + 4 * r + tt;
          const unsigned want = (blocks[b / 4].qs[e / 8] >> (e % 8)) & 1;
          ASSERT_EQ((mask >> (4 * b + tt)) & 1, want) << t << " " << r << " " << b << " " << tt;
          set += static_cast<int>(want);
        }
      }
    }
    for (int i = 0; i < t / 4; ++i) {
      uint16_t d;
      std::memcpy(&d, p.data() + 4 * t + 2 * i, 2);
      ASSERT_EQ(d, blocks[i].d) << "scale " << i;
    }
    EXPECT_GT(set, 8 * t) << "random weights should set some sign bits";
    EXPECT_LT(set, 24 * t) << "and leave some clear";
  }
}

// The last group of a row (T < 16 blocks) widened for the kernels equals the packing of those T
// blocks followed by zero blocks: the lanes past T add nothing.
TEST(LegacyPacked, WidenedTailIsTheGroupWithZeroBlocks) {
  for (DType t : kFormats) {
    for (int count = 1; count < 16; ++count) {
      if (32 * count % BlockSize(t) != 0) continue;  // IQ4_XS: a tail of 8 sub-blocks only
      const auto q = QuantMatrix(t, 1, 32 * count, 40 + count);
      const auto p = Packed(t, q, 1, 32 * count);
      uint8_t wide[internal::kPackGroupMaxBytes];
      internal::WidenLegacyGroup(t, p.data(), count, wide);
      std::vector<uint8_t> padded(RowBytes(t, 32 * 16), 0);
      std::memcpy(padded.data(), q.data(), q.size());
      const auto whole = Packed(t, padded, 1, 32 * 16);
      ASSERT_EQ(std::memcmp(wide, whole.data(), whole.size()), 0)
          << DTypeName(t) << " tail of " << count;
    }
  }
}

TEST(LegacyPacked, MatmulGivesTheFormatsBitsOnEveryKernelSet) {
  struct Shape {
    int m, k, n;
  };
  // k: groups only (512, 2048), a tail of one block (544) or of 15 (1 group + 15), no group at
  // all (96), a tail of 8 (768, and 256 alone: IQ4_XS's odd super-block; IQ4_XS takes the
  // multiples of 256 only); m: GEMV, tiles short of 4 rows, more than a 16-row chunk; n not a
  // multiple of 4, and whole 16-row panels (48, 64: the AVX-512 GEMV's 4 streams, with and
  // without a tail).
  const Shape shapes[] = {{1, 512, 37},  {1, 544, 9},   {1, 96, 5},    {1, 992, 6},    {2, 512, 7},
                          {5, 544, 18},  {3, 96, 4},    {17, 1024, 9}, {20, 2048, 13}, {4, 992, 3},
                          {7, 1056, 21}, {1, 2048, 64}, {1, 544, 48},  {1, 768, 37},   {5, 256, 18},
                          {1, 768, 48},  {9, 768, 11}};
  const auto isas = Isas();
  // Both routes of the packed Q8_0 GEMV (g_q8_0_gemv_avx2: an AVX-512 set may run the AVX2
  // panel at m = 1), the second only where the CPU has AVX2.
  const bool has_avx2 = std::any_of(isas.begin(), isas.end(), [](const auto* ks) {
    return std::strcmp(ks->isa, "avx2-fma") == 0;
  });
  const bool saved_route = internal::g_q8_0_gemv_avx2;
  const internal::PrefetchDistances saved_prefetch = internal::g_prefetch;
  for (int variant = 0; variant < 4; ++variant) {
    const bool route = variant & 1;
    if (route && !has_avx2) continue;
    internal::g_q8_0_gemv_avx2 = route;
    // and the AVX-512 GEMV's row streams (one, or a panel's quarters at once), on any CPU
    internal::g_prefetch.legacy_gemv_streams = variant & 2;
    SCOPED_TRACE(std::string(route ? "Q8_0 GEMV on the AVX2 panel" : "each set's own panels") +
                 (variant & 2 ? ", GEMV in 4 streams" : ", GEMV in 1 stream"));
    for (DType t : kFormats) {
      for (const Shape& s : shapes) {
        if (s.k % BlockSize(t) != 0) continue;
        const auto q = QuantMatrix(t, s.n, s.k, 100 + s.k + s.n);
        const auto p = Packed(t, q, s.n, s.k);
        auto x = RandomVec(static_cast<size_t>(s.m) * s.k, 3 + s.m);
        if (s.m > 1) std::fill(x.begin(), x.begin() + s.k, 0.0f);  // an all-zero row
        const auto bias = RandomVec(s.n, 9);
        std::vector<float> ref(static_cast<size_t>(s.m) * s.n);
        internal::MatmulWith(*isas.back(), x.data(), s.m, s.k, q.data(), t, s.n, bias.data(),
                             ref.data());  // the scalar reference on ggml's layout
        for (const auto* ks : isas) {
          std::vector<float> y(ref.size(), -1.0f);
          internal::MatmulWith(*ks, x.data(), s.m, s.k, p.data(), PackedType(t), s.n, bias.data(),
                               y.data());
          ASSERT_EQ(std::memcmp(ref.data(), y.data(), 4 * y.size()), 0)
              << ks->isa << " packed " << DTypeName(t) << " differs from scalar, m " << s.m << " k "
              << s.k << " n " << s.n;
          // One call with other formats of the same input (q, k, v; gate, up).
          const auto q8 = QuantMatrix(DType::kQ4_0, 5, s.k, 1);
          std::vector<float> y2(ref.size()), other(static_cast<size_t>(s.m) * 5);
          const MatmulJob jobs[] = {{q8.data(), DType::kQ4_0, 5, nullptr, other.data()},
                                    {p.data(), PackedType(t), s.n, bias.data(), y2.data()}};
          internal::MatmulSameInputWith(*ks, x.data(), s.m, s.k, jobs, 2);
          ASSERT_EQ(std::memcmp(ref.data(), y2.data(), 4 * y2.size()), 0)
              << ks->isa << " packed " << DTypeName(t) << " beside Q4_0 in one call, m " << s.m
              << " k " << s.k;
        }
      }
    }
  }
  internal::g_q8_0_gemv_avx2 = saved_route;
  internal::g_prefetch = saved_prefetch;
}

// The route's override: only "0" and "1" are taken; anything else keeps the vendor's default
// (and is reported), and without AVX2 there is no route whatever it says.
TEST(LegacyPacked, Q8_0GemvRouteOverride) {
  using internal::Q8_0GemvOnAvx2;
  EXPECT_TRUE(Q8_0GemvOnAvx2(nullptr, true, true));
  EXPECT_FALSE(Q8_0GemvOnAvx2(nullptr, true, false));
  EXPECT_FALSE(Q8_0GemvOnAvx2("0", true, true));
  EXPECT_TRUE(Q8_0GemvOnAvx2("1", true, false));
  EXPECT_FALSE(Q8_0GemvOnAvx2("1", false, true));
  for (const char* bad : {"", "false", "yes", "2", "-1", "10"}) {
    EXPECT_TRUE(Q8_0GemvOnAvx2(bad, true, true)) << bad;
    EXPECT_FALSE(Q8_0GemvOnAvx2(bad, true, false)) << bad;
  }
  const std::string huge(100000, 'x');
  EXPECT_FALSE(Q8_0GemvOnAvx2(huge.c_str(), true, false));
}

TEST(LegacyPacked, CpuBackendRepacksOnlyThe32BlockFormats) {
  Backend& cpu = CpuBackend();
  const int n = 24;
  for (DType t : kFormats) {
    // IQ4_XS: 5 super-blocks; Q1_0: 9 blocks (two groups and a tail of 4 sub-blocks)
    // NVFP4: 17 blocks (34 sub-blocks: a tail of 2)
    const int k = BlockSize(t) == kQK_K ? 1280
                  : BlockSize(t) == 128 ? 1152
                  : BlockSize(t) == 64  ? 1088
                                        : 1056;
    const auto q = QuantMatrix(t, n, k, 5);
    const auto x = RandomVec(3 * k, 8);
    std::vector<float> want(3 * n), got(3 * n);
    Weight w{q.data(), t, n, k};
    cpu.Matmul(x.data(), 3, w, nullptr, want.data());

    auto buf = cpu.PrepareMatmulWeight(w);
    ASSERT_TRUE(buf.ok()) << buf.status().ToString();
    if (MatmulPackedFormat(t) == t) {
      EXPECT_EQ(buf->data(), nullptr);
      GTEST_SKIP() << "the kernel set in use (" << MatmulIsa() << ") has no packed kernel";
    }
    ASSERT_NE(buf->data(), nullptr);
    // Q1_0: its row panels where the set has their kernels (q1_0_row_panels_test.cc)
    const bool panels = t == DType::kQ1_0 && MatmulPackedFormat(t) == DType::kQ1_0RowPanels;
    EXPECT_EQ(w.format, panels ? DType::kQ1_0RowPanels : PackedType(t));
    EXPECT_EQ(w.data, buf->data());
    cpu.Matmul(x.data(), 3, w, nullptr, got.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * got.size()), 0) << DTypeName(t);

    ::setenv("LLM_PACK_WEIGHTS", "0", 1);
    Weight off{q.data(), t, n, k};
    auto kept = cpu.PrepareMatmulWeight(off);
    ::unsetenv("LLM_PACK_WEIGHTS");
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ(kept->data(), nullptr);
    EXPECT_EQ(off.format, t);
  }
  for (DType t : {DType::kQ4_K, DType::kQ6_K}) {  // F16, BF16: f16_packed_test.cc
    const std::vector<uint8_t> bytes(RowBytes(t, 512) * 4);
    Weight other{bytes.data(), t, 4, 512};
    auto none = cpu.PrepareMatmulWeight(other);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->data(), nullptr) << DTypeName(t);
    EXPECT_EQ(other.format, t);
  }
}

}  // namespace
}  // namespace llm::kernels
