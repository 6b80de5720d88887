// The AMX kernel set (kernels/cpu/matmul_amx.cc): from tiles_min_m input rows on, the K-quants
// and the 32-block formats (in ggml's layout and in their packed one) are multiplied on AMX tiles
// and must give bitwise the scalar reference's results (the lane and chain order of
// quant_blocks.h) for every format, for token counts that fill the tiles or leave
// them partly empty, panels with a tail of rows, one or several blocks, with a bias and beside
// jobs of other formats in one call; below tiles_min_m rows the set's AVX-512 panels run, with
// the same bits. Skips where the CPU (or the kernel) gives no AMX.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/f16_packed.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

std::vector<uint8_t> RandomRows(DType t, int n, int k, uint64_t seed) {
  std::vector<uint8_t> q(RowBytes(t, k) * n);
  FillRandomBlocks(t, seed, q.data(), static_cast<int64_t>(n) * (k / BlockSize(t)));
  return q;
}

struct Shape {
  int m, n, k;
};

// The AMX set's y for weights w (format t, or a layout of it) against the scalar reference's
// y_ref on the same input: the same bits.
void ExpectReferenceBits(const std::vector<float>& x, const Shape& s, const void* w, DType t,
                         const float* bias, const std::vector<float>& y_ref, const char* what) {
  std::vector<float> got(y_ref.size(), -1.0f);
  internal::MatmulWith(internal::AmxMatmulKernels(), x.data(), s.m, s.k, w, t, s.n, bias,
                       got.data());
  ASSERT_EQ(std::memcmp(y_ref.data(), got.data(), 4 * got.size()), 0)
      << DTypeName(t) << " " << what << ", m " << s.m << " n " << s.n << " k " << s.k;
}

TEST(AmxTiles, KQuantsGiveTheScalarBitsOnTiles) {
  if (!internal::AmxUsable()) GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-INT8 tiles";
  const internal::MatmulKernels& amx = internal::AmxMatmulKernels();
  const internal::MatmulKernels& scalar = internal::ScalarMatmulKernels();
  ASSERT_STREQ(amx.isa, "avx512-amx");
  const int min_m = amx.quant->tiles_min_m;
  ASSERT_GT(min_m, 1);
  // Token counts: below the tiles, exactly two tiles' worth and more, a tail tile (odd count of
  // tiles), one token past a tile; rows: a whole panel, tails; blocks: 1 and several.
  const Shape shapes[] = {{min_m - 1, 20, 512},
                          {min_m, 16, 256},
                          {min_m + 1, 23, 768},
                          {min_m + 37, 40, 256},
                          {2 * min_m + 5, 9, 1280}};
  for (const DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (const Shape s : shapes) {
      const auto q = RandomRows(t, s.n, s.k, 17 + s.m + static_cast<int>(t));
      const auto x = testing::RandomFloats(static_cast<size_t>(s.m) * s.k, 5 + s.n, -3.0f, 3.0f);
      const auto bias = testing::RandomFloats(s.n, 7);
      std::vector<float> ref(static_cast<size_t>(s.m) * s.n);
      internal::MatmulWith(scalar, x.data(), s.m, s.k, q.data(), t, s.n, bias.data(), ref.data());
      ASSERT_NO_FATAL_FAILURE(ExpectReferenceBits(x, s, q.data(), t, bias.data(), ref, "bias"));
      internal::MatmulWith(scalar, x.data(), s.m, s.k, q.data(), t, s.n, nullptr, ref.data());
      ASSERT_NO_FATAL_FAILURE(ExpectReferenceBits(x, s, q.data(), t, nullptr, ref, "no bias"));
    }
  }
}

TEST(AmxTiles, BlockFormatsOf32GiveTheScalarBitsOnTilesInFileAndPackedLayouts) {
  if (!internal::AmxUsable()) GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-INT8 tiles";
  const internal::MatmulKernels& amx = internal::AmxMatmulKernels();
  const internal::MatmulKernels& scalar = internal::ScalarMatmulKernels();
  const int min_m = amx.quant->tiles_min_m;
  // Blocks: one, a whole group of 16 and a tail (the packed layouts' groups), 17 chains' worth.
  const Shape shapes[] = {{min_m, 16, 32}, {min_m + 3, 23, 512}, {2 * min_m + 9, 40, 608}};
  for (const DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    for (const Shape s : shapes) {
      const auto q = RandomRows(t, s.n, s.k, 3 + s.m + static_cast<int>(t));
      std::vector<uint8_t> packed(q.size());
      internal::PackLegacyRows(t, q.data(), s.n, s.k, packed.data());
      const auto x = testing::RandomFloats(static_cast<size_t>(s.m) * s.k, 11 + s.n, -2.0f, 2.0f);
      const auto bias = testing::RandomFloats(s.n, 13);
      std::vector<float> ref(static_cast<size_t>(s.m) * s.n);
      internal::MatmulWith(scalar, x.data(), s.m, s.k, q.data(), t, s.n, bias.data(), ref.data());
      ASSERT_NO_FATAL_FAILURE(
          ExpectReferenceBits(x, s, q.data(), t, bias.data(), ref, "ggml's layout"));
      ASSERT_NO_FATAL_FAILURE(ExpectReferenceBits(x, s, packed.data(), internal::PackedLayoutOf(t),
                                                  bias.data(), ref, "packed"));
    }
  }
}

TEST(AmxTiles, PackedQ3KAndOtherFormatsInOneCall) {
  if (!internal::AmxUsable()) GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-INT8 tiles";
  const internal::MatmulKernels& amx = internal::AmxMatmulKernels();
  const internal::MatmulKernels& scalar = internal::ScalarMatmulKernels();
  const int m = amx.quant->tiles_min_m + 21, k = 1024;
  const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 3);
  const auto q3 = RandomRows(DType::kQ3_K, 24, k, 1);
  std::vector<uint8_t> q3p(q3.size());
  internal::PackQ3KBlocks(q3.data(), static_cast<int64_t>(q3.size() / BlockBytes(DType::kQ3_K)),
                          q3p.data());
  const auto q4 = RandomRows(DType::kQ4_K, 33, k, 2);
  const auto q8 = RandomRows(DType::kQ8_0, 17, k, 3);
  std::vector<float> want3(static_cast<size_t>(m) * 24), want4(static_cast<size_t>(m) * 33),
      want8(static_cast<size_t>(m) * 17);
  internal::MatmulWith(scalar, x.data(), m, k, q3.data(), DType::kQ3_K, 24, nullptr, want3.data());
  internal::MatmulWith(scalar, x.data(), m, k, q4.data(), DType::kQ4_K, 33, nullptr, want4.data());
  internal::MatmulWith(scalar, x.data(), m, k, q8.data(), DType::kQ8_0, 17, nullptr, want8.data());
  std::vector<float> y3(want3.size()), y4(want4.size()), y8(want8.size());
  const MatmulJob jobs[] = {{q3p.data(), DType::kQ3_KPacked, 24, nullptr, y3.data()},
                            {q8.data(), DType::kQ8_0, 17, nullptr, y8.data()},
                            {q4.data(), DType::kQ4_K, 33, nullptr, y4.data()}};
  internal::MatmulSameInputWith(amx, x.data(), m, k, jobs, 3);
  EXPECT_EQ(std::memcmp(want3.data(), y3.data(), 4 * y3.size()), 0) << "Q3_K (packed)";
  EXPECT_EQ(std::memcmp(want4.data(), y4.data(), 4 * y4.size()), 0) << "Q4_K";
  EXPECT_EQ(std::memcmp(want8.data(), y8.data(), 4 * y8.size()), 0) << "Q8_0";
}

TEST(AmxTiles, TokenTilesHoldEachLaneOfEachToken) {
  const int m = 19, nb = 2;
  std::vector<internal::BlockQ8_K> x(static_cast<size_t>(m) * nb);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i].d = 0.5f + static_cast<float>(i);
    for (int e = 0; e < 256; ++e) x[i].qs[e] = static_cast<int8_t>((i * 31 + e * 7) % 251 - 125);
    for (int g = 0; g < 16; ++g) x[i].bsums[g] = static_cast<int16_t>(i * 100 + g - 800);
  }
  ASSERT_EQ(internal::Q8KTokenTileCount(m), 2);
  ASSERT_EQ(internal::Q8KTokenTileCount(33), 4);  // an even count: two per pass
  std::vector<internal::Q8KTokenTile> tiles(2 * nb);
  internal::MakeQ8KTokenTiles(x.data(), m, nb, tiles.data());
  for (int t = 0; t < 2; ++t) {
    for (int b = 0; b < nb; ++b) {
      const internal::Q8KTokenTile& o = tiles[t * nb + b];
      for (int e = 0; e < 16; ++e) {
        const int i = 16 * t + e;
        for (int l = 0; l < 8; ++l) {
          for (int h = 0; h < 8; ++h) {
            for (int j = 0; j < 4; ++j) {
              const int want = i < m ? x[i * nb + b].qs[32 * h + 4 * l + j] : 0;
              ASSERT_EQ(o.q[l][h][e][j], want) << "token " << i << " lane " << l << " chunk " << h;
            }
          }
          int16_t pair[2];
          std::memcpy(pair, &o.bsum_pairs[l][e], 4);
          EXPECT_EQ(pair[0], i < m ? x[i * nb + b].bsums[2 * l] : 0);
          EXPECT_EQ(pair[1], i < m ? x[i * nb + b].bsums[2 * l + 1] : 0);
        }
        EXPECT_EQ(o.d[e], i < m ? x[i * nb + b].d : 0.0f);
      }
    }
  }
}

bool HasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

// y = x w^T (F16 or BF16 rows, plain or packed) for a matmul on Bf16 token tiles.
using FloatMatmul = void (*)(const float* x, int m, int k, const void* w, DType t, int n,
                             const float* bias, float* y);

// Row i of y (n outputs) within 2^-16 of the float64 sum of x_i w_j (+ bias), relative to the
// sum of the terms' magnitudes: x kept to ~16 bits on the tiles, where bf16 alone would be off by
// ~2^-9, and so would F16 weights cut to bf16.
void ExpectRowCloseToFloat64(const float* xi, const std::vector<uint16_t>& w, bool f16, int n,
                             int k, const float* bias, const float* yi, int i) {
  for (int j = 0; j < n; ++j) {
    double ref = bias != nullptr ? bias[j] : 0.0, mag = std::fabs(ref);
    for (int p = 0; p < k; ++p) {
      const uint16_t wb = w[static_cast<size_t>(j) * k + p];
      const double t = static_cast<double>(xi[p]) * (f16 ? F16ToF32(wb) : Bf16ToF32(wb));
      ref += t;
      mag += std::fabs(t);
    }
    ASSERT_NEAR(yi[j], ref, mag * 0x1p-16) << i << "," << j;
  }
}

// F16 or BF16 (`type`) on tiles: within 2^-16 of the float64 sum of |x w| (x kept to ~16 bits:
// bf16 alone would be off by ~2^-9, and so would F16 weights cut to bf16), plain and packed rows
// with the same bits, each row's bits those of the row alone (m = 1) whatever its batch, with
// and without a bias, on panels with a tail of rows (also a partial group of 4) and one or
// several chunks (16 k for F16, 32 for BF16), 1 to 5 token tiles.
void ExpectFloatTiles(DType type, FloatMatmul matmul) {
  const bool f16 = type == DType::kF16;
  const DType packed_type = f16 ? DType::kF16Packed : DType::kBF16Packed;
  const Shape shapes[] = {
      {1, 16, 32}, {17, 37, f16 ? 48 : 96}, {70, 20, 544}, {65, 50, 1024}, {16, 3, 64}};
  for (const Shape s : shapes) {
    SCOPED_TRACE(std::string(DTypeName(type)) + " m " + std::to_string(s.m) + " n " +
                 std::to_string(s.n) + " k " + std::to_string(s.k));
    const auto wf = testing::RandomFloats(static_cast<size_t>(s.n) * s.k, 3 + s.k, -0.5f, 0.5f);
    std::vector<uint16_t> w(wf.size()), packed(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f16 ? F32ToF16(wf[i]) : F32ToBf16(wf[i]);
    internal::PackF16Rows(w.data(), s.n, s.k, packed.data());
    const auto x = testing::RandomFloats(static_cast<size_t>(s.m) * s.k, 5 + s.m, -2.0f, 2.0f);
    const auto bias = testing::RandomFloats(s.n, 7);
    for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
      std::vector<float> y(static_cast<size_t>(s.m) * s.n), yp(y.size()), one(s.n);
      matmul(x.data(), s.m, s.k, w.data(), type, s.n, b, y.data());
      matmul(x.data(), s.m, s.k, packed.data(), packed_type, s.n, b, yp.data());
      ASSERT_EQ(std::memcmp(y.data(), yp.data(), 4 * y.size()), 0) << "plain against packed";
      for (int i = 0; i < s.m; ++i) {
        const float* xi = x.data() + static_cast<size_t>(i) * s.k;
        matmul(xi, 1, s.k, packed.data(), packed_type, s.n, b, one.data());
        ASSERT_EQ(std::memcmp(one.data(), y.data() + static_cast<size_t>(i) * s.n, 4 * s.n), 0)
            << "row " << i << " alone";
        ExpectRowCloseToFloat64(xi, w, f16, s.n, s.k, b, y.data() + static_cast<size_t>(i) * s.n,
                                i);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(AmxTiles, F16AndBf16OnBf16TilesAreCloseToFloat64AndBatchInvariant) {
  if (!internal::AmxBf16Usable()) {
    GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-BF16 tiles";
  }
  if (internal::AmxMatmulKernels().f16_tiles == nullptr ||
      internal::AmxMatmulKernels().float_tiles_min_m != 1) {
    GTEST_SKIP() << "F16 on AMX tiles at every m is opt-in: LLM_AMX_F16=1 (ctest: "
                    "kernels_test.AmxF16OptIn)";
  }
  for (const DType t : {DType::kF16, DType::kBF16}) {
    ExpectFloatTiles(t, [](const float* x, int m, int k, const void* w, DType type, int n,
                           const float* bias, float* y) {
      internal::MatmulWith(internal::AmxMatmulKernels(), x, m, k, w, type, n, bias, y);
    });
  }
}

// kernel_bench amx's probe: without AMX-BF16 it says so (no tile instruction runs: that would
// fault); with it, both loops ran, each a positive and bounded time per chunk (how long is
// kernel_bench's to say, not a test's).
TEST(AmxTiles, TileWorkProbeTimesTheProductsAndTheLoads) {
  EXPECT_FALSE(internal::TimeAmxF16Chunks(0).usable);
  const internal::AmxChunkTimes t = internal::TimeAmxF16Chunks(1 << 12);
  if (!internal::AmxBf16Usable()) {
    EXPECT_FALSE(t.usable);
    EXPECT_EQ(t.products_ns, 0.0);
    GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-BF16 tiles";
  }
  ASSERT_TRUE(t.usable);
  EXPECT_GT(t.products_ns, 0.0);
  EXPECT_LT(t.products_ns, 1e6);  // ns per chunk: a broken loop, not a slow one
  EXPECT_GT(t.with_loads_ns, 0.0);
  EXPECT_LT(t.with_loads_ns, 1e6);
}

TEST(AmxTiles, AmxF16EnvironmentVariableSaysFromWhichRowsTheTilesRun) {
  using internal::AmxF16TilesMinM;
  EXPECT_EQ(AmxF16TilesMinM(nullptr), 0);
  EXPECT_EQ(AmxF16TilesMinM("0"), 0);
  EXPECT_EQ(AmxF16TilesMinM("1"), 1);
  EXPECT_EQ(AmxF16TilesMinM("batched"), internal::kAmxF16BatchedMinM);
  for (const char* bad : {"", "2", "yes", "Batched", "batched ", "1 "}) {
    EXPECT_EQ(AmxF16TilesMinM(bad), 0) << bad;
  }
  const std::string huge(1 << 16, 'b');
  EXPECT_EQ(AmxF16TilesMinM(huge.c_str()), 0);
}

// LLM_AMX_F16=batched: the tiles from kAmxF16BatchedMinM rows on, the AVX-512 VNNI set's panels
// below. A row of a batch that large has the same bits in every such batch (whatever its place)
// and is within 2^-16 of float64 (as in ExpectFloatTiles); a row of a smaller batch has the bits
// of the set below; the two differ (x kept to ~16 bits on the tiles), so the tiles did run.
TEST(AmxTiles, BatchedModeRunsTheTilesFromSixteenRows) {
  if (!internal::AmxBf16Usable()) {
    GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-BF16 tiles";
  }
  const internal::MatmulKernels& amx = internal::AmxMatmulKernels();
  if (amx.f16_tiles == nullptr || amx.float_tiles_min_m != internal::kAmxF16BatchedMinM) {
    GTEST_SKIP() << "F16 on AMX tiles from 16 rows is opt-in: LLM_AMX_F16=batched (ctest: "
                    "kernels_test.AmxF16Batched)";
  }
  const int big = 40, small = internal::kAmxF16BatchedMinM;
  for (const DType type : {DType::kF16Packed, DType::kBF16Packed}) {
    const bool f16 = type == DType::kF16Packed;
    const int n = 37, k = 544;
    SCOPED_TRACE(DTypeName(type));
    const auto wf = testing::RandomFloats(static_cast<size_t>(n) * k, 11, -0.5f, 0.5f);
    std::vector<uint16_t> w(wf.size()), packed(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f16 ? F32ToF16(wf[i]) : F32ToBf16(wf[i]);
    internal::PackF16Rows(w.data(), n, k, packed.data());
    const auto x = testing::RandomFloats(static_cast<size_t>(big) * k, 13, -2.0f, 2.0f);
    auto run = [&](const internal::MatmulKernels& ks, int first, int m) {
      std::vector<float> y(static_cast<size_t>(m) * n);
      internal::MatmulWith(ks, x.data() + static_cast<size_t>(first) * k, m, k, packed.data(), type,
                           n, nullptr, y.data());
      return y;
    };
    const std::vector<float> y = run(amx, 0, big);
    const std::vector<float> tail = run(amx, big - small, small);  // rows 24..39 on their own
    ASSERT_EQ(
        std::memcmp(tail.data(), y.data() + static_cast<size_t>(big - small) * n, 4 * tail.size()),
        0)
        << "a row's bits in a batch of " << small << " against " << big;
    for (const int m : {1, small - 1}) {
      const std::vector<float> below = run(amx, 0, m);
      const std::vector<float> vnni = run(internal::Avx512VnniMatmulKernels(), 0, m);
      ASSERT_EQ(std::memcmp(below.data(), vnni.data(), 4 * below.size()), 0) << "m " << m;
    }
    const std::vector<float> vnni = run(internal::Avx512VnniMatmulKernels(), 0, big);
    EXPECT_NE(std::memcmp(y.data(), vnni.data(), 4 * y.size()), 0) << "the tiles did not run";
    for (int i = 0; i < big; ++i) {
      ExpectRowCloseToFloat64(x.data() + static_cast<size_t>(i) * k, w, f16, n, k, nullptr,
                              y.data() + static_cast<size_t>(i) * n, i);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The same panels with the tile operations in software: the layouts of A (weights from plain
// and packed rows) and B (MakeBf16TokenTiles, MakeBf16PairTokenTiles) and the walk over
// panels, chunks and token tiles, on any CPU with AVX-512.
TEST(AmxTiles, FloatPanelsOnSoftwareTilesAreCloseToFloat64AndBatchInvariant) {
  if (!HasAvx512()) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, VL)";
  for (const DType t : {DType::kF16, DType::kBF16}) {
    ExpectFloatTiles(t, [](const float* x, int m, int k, const void* w, DType type, int n,
                           const float* bias, float* y) {
      const bool f16 = type == DType::kF16 || type == DType::kF16Packed;
      const int chunk = f16 ? 16 : 32, token_tiles = (m + 15) / 16;
      std::vector<internal::Bf16TokenTile> tiles(static_cast<size_t>(token_tiles) * (k / chunk));
      if (f16) {
        internal::MakeBf16TokenTiles(x, m, k, tiles.data());
      } else {
        internal::MakeBf16PairTokenTiles(x, m, k, tiles.data());
      }
      const auto panel = internal::SoftFloatTilesPanel(type);
      for (int n0 = 0; n0 < n; n0 += 16) {
        panel(tiles.data(), m, k, w, n0, std::min(n, n0 + 16), bias, y, n);
      }
    });
  }
}

// The software tiles' arithmetic (SoftTiles: per output two F32 chains, of the pairs' low and
// high products, then C + (e + o)) is the hardware's: on AMX-BF16 the hardware panels and the
// software ones give the same bits for F16 and BF16, plain and packed rows, with a bias, on
// values over a wide range of exponents (where any other order of the roundings shows: the
// sequential reading of the instruction's pseudo-code differed in ~94% of these outputs).
TEST(AmxTiles, HardwareTilesGiveTheSoftwareTilesBits) {
  if (!internal::AmxBf16Usable()) {
    GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-BF16 tiles";
  }
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-10, 10);
  const Shape shapes[] = {{1, 16, 32}, {17, 37, 96}, {40, 20, 544}};
  for (const DType type : {DType::kF16, DType::kF16Packed, DType::kBF16, DType::kBF16Packed}) {
    const bool f16 = type == DType::kF16 || type == DType::kF16Packed;
    const bool packed = type == DType::kF16Packed || type == DType::kBF16Packed;
    for (const Shape s : shapes) {
      SCOPED_TRACE(std::string(DTypeName(type)) + " m " + std::to_string(s.m) + " n " +
                   std::to_string(s.n) + " k " + std::to_string(s.k));
      std::vector<uint16_t> w(static_cast<size_t>(s.n) * s.k), wp(w.size());
      for (uint16_t& v : w) {
        const float f = std::ldexp(unit(rng), exponent(rng));
        v = f16 ? F32ToF16(f) : F32ToBf16(f);
      }
      internal::PackF16Rows(w.data(), s.n, s.k, wp.data());
      std::vector<float> x(static_cast<size_t>(s.m) * s.k), bias(s.n);
      for (float& v : x) v = std::ldexp(unit(rng), 2 * exponent(rng));
      for (float& v : bias) v = std::ldexp(unit(rng), exponent(rng));
      const int chunk = f16 ? 16 : 32;
      std::vector<internal::Bf16TokenTile> tiles(static_cast<size_t>((s.m + 15) / 16) *
                                                 (s.k / chunk));
      if (f16) {
        internal::MakeBf16TokenTiles(x.data(), s.m, s.k, tiles.data());
      } else {
        internal::MakeBf16PairTokenTiles(x.data(), s.m, s.k, tiles.data());
      }
      std::vector<float> hw(static_cast<size_t>(s.m) * s.n, -1.0f), soft(hw.size(), -2.0f);
      const auto hw_panel = internal::AmxFloatTilesPanel(type);
      const auto soft_panel = internal::SoftFloatTilesPanel(type);
      ASSERT_NE(hw_panel, nullptr);
      ASSERT_NE(soft_panel, nullptr);
      for (int n0 = 0; n0 < s.n; n0 += 16) {
        const int n1 = std::min(s.n, n0 + 16);
        hw_panel(tiles.data(), s.m, s.k, packed ? wp.data() : w.data(), n0, n1, bias.data(),
                 hw.data(), s.n);
        soft_panel(tiles.data(), s.m, s.k, packed ? wp.data() : w.data(), n0, n1, bias.data(),
                   soft.data(), s.n);
      }
      for (size_t i = 0; i < hw.size(); ++i) {
        ASSERT_EQ(std::memcmp(&hw[i], &soft[i], 4), 0)
            << "output " << i << ": hardware " << hw[i] << ", software " << soft[i];
      }
    }
  }
}

// k not a multiple of 16: the AVX-512 F16 panels, with their bits, at every m.
TEST(AmxTiles, F16WithKNotAMultipleOf16RunsTheAvx512Panels) {
  if (!internal::AmxUsable()) GTEST_SKIP() << "this CPU (or its kernel) gives no AMX-INT8 tiles";
  const int m = 20, n = 24, k = 40;
  const auto wf = testing::RandomFloats(static_cast<size_t>(n) * k, 1);
  std::vector<uint16_t> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = F32ToF16(wf[i]);
  const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 2);
  std::vector<float> want(static_cast<size_t>(m) * n), got(want.size());
  internal::MatmulWith(internal::Avx512VnniMatmulKernels(), x.data(), m, k, w.data(), DType::kF16,
                       n, nullptr, want.data());
  internal::MatmulWith(internal::AmxMatmulKernels(), x.data(), m, k, w.data(), DType::kF16, n,
                       nullptr, got.data());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * got.size()), 0);
}

// Token i's xh and xl (bf16 bits) of weight p as read from a tile: x's high 16 bits and x - xh
// rounded to nearest even; zeros for a token past m.
void ExpectSplitOf(const std::vector<float>& x, int m, int k, int i, int p, uint32_t xh,
                   uint32_t xl) {
  SCOPED_TRACE("token " + std::to_string(i) + " k " + std::to_string(p));
  if (i >= m) {
    EXPECT_EQ(xh, 0u);
    EXPECT_EQ(xl, 0u);
    return;
  }
  const float v = x[static_cast<size_t>(i) * k + p];
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  EXPECT_EQ(xh, bits >> 16);
  const uint32_t head_bits = bits & 0xFFFF0000u;
  float head;
  std::memcpy(&head, &head_bits, 4);
  EXPECT_EQ(xl, F32ToBf16(v - head));
}

// Every token's column of the tiles as ExpectSplitOf reads it.
void ExpectTokenTiles(const std::vector<float>& x, int m, int k, int tiles,
                      const std::vector<internal::Bf16TokenTile>& t,
                      const std::vector<internal::Bf16TokenTile>& pairs) {
  for (int i = 0; i < 16 * tiles; ++i) {
    for (int p = 0; p < k; ++p) {
      const internal::Bf16TokenTile& o = t[(i / 16) * (k / 16) + p / 16];
      const uint32_t hi = o.hi[p % 16][i % 16], lo = o.lo[p % 16][i % 16];
      ASSERT_EQ(hi >> 16, hi & 0xFFFF) << "token " << i << " k " << p;
      ASSERT_EQ(lo >> 16, lo & 0xFFFF) << "token " << i << " k " << p;
      ExpectSplitOf(x, m, k, i, p, hi >> 16, lo >> 16);
      const internal::Bf16TokenTile& q = pairs[(i / 16) * (k / 32) + p / 32];
      const int shift = 16 * (p % 2);
      ExpectSplitOf(x, m, k, i, p, (q.hi[(p % 32) / 2][i % 16] >> shift) & 0xFFFF,
                    (q.lo[(p % 32) / 2][i % 16] >> shift) & 0xFFFF);
    }
  }
}

// Token i's column of its tiles (F16 and pair tiles) holds its split of every weight's
// activation; the columns past m are zero: one token, one whole tile, and three tiles (the last
// partly filled) made in parallel (m * k past the threads' threshold).
TEST(AmxTiles, Bf16TokenTilesSplitEachActivation) {
  if (!HasAvx512()) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, VL)";
  for (const int m : {1, 16, 35}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const int k = m == 35 ? 2048 : 128, tiles = (m + 15) / 16;
    const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 9, -100.0f, 100.0f);
    // F16 weights: each value twice in its dword. BF16 weights (pair tiles): dword p of a 32-k
    // chunk holds the splits of k = 2p (low word) and 2p + 1 (high word).
    std::vector<internal::Bf16TokenTile> t(static_cast<size_t>(tiles) * (k / 16)),
        pairs(static_cast<size_t>(tiles) * (k / 32));
    std::memset(t.data(), 0xFF, sizeof(t[0]) * t.size());
    std::memset(pairs.data(), 0xFF, sizeof(pairs[0]) * pairs.size());
    internal::MakeBf16TokenTiles(x.data(), m, k, t.data());
    internal::MakeBf16PairTokenTiles(x.data(), m, k, pairs.data());
    ExpectTokenTiles(x, m, k, tiles, t, pairs);
  }
}

}  // namespace
}  // namespace llm::kernels
