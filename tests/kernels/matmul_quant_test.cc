// The block-format matmul (Q4_0 ... Q6_K weights on Q8 activations): every ISA gives the
// scalar reference's bits, GEMV and GEMM shapes are batch invariant, and the result stays within
// the activation-rounding bound of the float product with the dequantized weights; the embedding
// of a block-format table is its dequantized row. With --gtest_also_run_disabled_tests the
// Perf case prints GEMV/GEMM throughput per format.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

constexpr DType kFormats[] = {DType::kQ4_0, DType::kQ4_1,   DType::kQ5_0,   DType::kQ5_1,
                              DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,   DType::kQ5_K,
                              DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4,
                              DType::kQ1_0, DType::kNVFP4};

std::vector<float> RandomVec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

std::vector<uint8_t> QuantizeMatrix(DType t, const std::vector<float>& f, int n, int k) {
  std::vector<uint8_t> q(RowBytes(t, k) * n);
  for (int r = 0; r < n; ++r) {
    internal::QuantizeRow(t, f.data() + static_cast<size_t>(r) * k, q.data() + r * RowBytes(t, k),
                          k);
  }
  return q;
}

std::vector<float> DequantizeMatrix(DType t, const std::vector<uint8_t>& q, int n, int k) {
  std::vector<float> f(static_cast<size_t>(n) * k);
  for (int r = 0; r < n; ++r) {
    internal::DequantizeRow(t, q.data() + r * RowBytes(t, k), f.data() + static_cast<size_t>(r) * k,
                            k);
  }
  return f;
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

struct Shape {
  int m, k, n;
};
// GEMV and GEMM, n not a multiple of any tile, m across the 16-row chunks, k over several steps
// of the AVX-512 K-quant panels (KMicro512).
constexpr Shape kShapes[] = {{1, 512, 37}, {3, 256, 5}, {7, 768, 20}, {19, 512, 9}, {9, 1536, 37}};
// The legacy formats also with an odd number of 32-blocks (the even chain's last block alone) and
// with one block (the odd chain empty).
constexpr Shape kLegacyShapes[] = {{1, 96, 11}, {5, 32, 6}, {6, 160, 9}, {1, 2080, 7}};

TEST(MatmulQuant, IsasAgreeBitwiseAndStayNearTheFloatProduct) {
  for (DType t : kFormats) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    if (BlockSize(t) == kQKLegacy)
      shapes.insert(shapes.end(), std::begin(kLegacyShapes), std::end(kLegacyShapes));
    for (const Shape& s : shapes) {
      const auto wf = RandomVec(static_cast<size_t>(s.n) * s.k, 11 + s.n, 0.05f);
      auto x = RandomVec(static_cast<size_t>(s.m) * s.k, 29 + s.m);
      x[3] = 0.0f;
      if (s.m > 1) std::fill(x.begin() + s.k, x.begin() + 2 * s.k, 0.0f);  // an all-zero row
      const auto bias = RandomVec(s.n, 5);
      const auto w = QuantizeMatrix(t, wf, s.n, s.k);
      const auto wd = DequantizeMatrix(t, w, s.n, s.k);
      std::vector<float> ref;
      for (const auto* ks : Isas()) {
        std::vector<float> y(static_cast<size_t>(s.m) * s.n);
        internal::MatmulWith(*ks, x.data(), s.m, s.k, w.data(), t, s.n, bias.data(), y.data());
        if (ref.empty()) {
          ref = y;
        } else {
          ASSERT_EQ(std::memcmp(ref.data(), y.data(), 4 * y.size()), 0)
              << DTypeName(t) << " " << ks->isa << " differs from " << Isas()[0]->isa << " m "
              << s.m << " k " << s.k << " n " << s.n;
        }
      }
      // Against sum x * w_dequantized: each activation is rounded to a step of at most
      // amax / 127 of its block (half a step of error) with an fp16 scale.
      const int bs = IsKQuant(t) ? kQK_K : kQKLegacy;
      for (int i = 0; i < s.m; ++i) {
        for (int j = 0; j < s.n; ++j) {
          double exact = bias[j], bound = 1e-5;
          for (int b = 0; b < s.k / bs; ++b) {
            double amax = 0, wabs = 0;
            for (int e = b * bs; e < (b + 1) * bs; ++e) {
              const double xv = x[static_cast<size_t>(i) * s.k + e];
              const double wv = wd[static_cast<size_t>(j) * s.k + e];
              exact += xv * wv;
              amax = std::max(amax, std::fabs(xv));
              wabs += std::fabs(wv);
              bound += 1e-6 * std::fabs(xv * wv);
            }
            bound += amax * (0.5 / 127 + 1.0 / 2048) * wabs;
          }
          const float got = ref[static_cast<size_t>(i) * s.n + j];
          ASSERT_NEAR(got, exact, bound) << DTypeName(t) << " i " << i << " j " << j;
        }
      }
      // Batch invariance: each row alone (GEMV) gives the GEMM row's bits (all ISAs agree).
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

// Matmuls of one input in one call (q, k, v; gate, up), weights of mixed formats (the AVX-512
// Q4_K panels pair their activations' chunks, the Q2_K / Q3_K ones halve them, Q6_K reads them as
// they are, Q4_0 wants Q8_0, F16 floats): each output is bitwise Matmul's, at m = 1, m < 6 and
// m >= 6 (the 512-bit K-quant panels), in one group and in several (> 4 jobs).
TEST(MatmulQuant, SameInputJobsGiveMatmulsBits) {
  const int k = 512;
  const DType types[] = {DType::kQ4_K, DType::kQ2_K, DType::kQ6_K, DType::kQ4_0, DType::kF16,
                         DType::kQ8_0, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K};
  const int rows[] = {37, 16, 16, 5, 20, 33, 7, 1, 9};
  constexpr int kJobs = 9;
  std::vector<std::vector<uint8_t>> w(kJobs);
  std::vector<std::vector<float>> bias(kJobs);
  for (int j = 0; j < kJobs; ++j) {
    const auto wf = RandomVec(static_cast<size_t>(rows[j]) * k, 40 + j, 0.05f);
    if (types[j] == DType::kF16) {
      w[j].resize(wf.size() * 2);
      for (size_t i = 0; i < wf.size(); ++i) {
        const uint16_t h = F32ToF16(wf[i]);
        std::memcpy(w[j].data() + 2 * i, &h, 2);
      }
    } else {
      w[j] = QuantizeMatrix(types[j], wf, rows[j], k);
    }
    bias[j] = RandomVec(rows[j], 60 + j);
  }
  for (int m : {1, 5, 7}) {
    const auto x = RandomVec(static_cast<size_t>(m) * k, 70 + m);
    for (int count : {2, kJobs}) {
      std::vector<std::vector<float>> got(count), want(count);
      std::vector<MatmulJob> jobs;
      for (int j = 0; j < count; ++j) {
        got[j].assign(static_cast<size_t>(m) * rows[j], -1.0f);
        want[j].assign(got[j].size(), -2.0f);
        jobs.push_back(
            {w[j].data(), types[j], rows[j], j % 2 == 0 ? bias[j].data() : nullptr, got[j].data()});
        Matmul(x.data(), m, k, w[j].data(), types[j], rows[j], jobs.back().bias, want[j].data());
      }
      MatmulSameInput(x.data(), m, k, jobs.data(), count);
      for (int j = 0; j < count; ++j) {
        ASSERT_EQ(std::memcmp(got[j].data(), want[j].data(), 4 * got[j].size()), 0)
            << DTypeName(types[j]) << " job " << j << " of " << count << " m " << m;
      }
    }
  }
}

TEST(MatmulQuant, ThreadCountDoesNotChangeTheBits) {
  const int m = 4, k = 1024, n = 256;
  const auto x = RandomVec(static_cast<size_t>(m) * k, 3);
  for (DType t : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    const auto w = QuantizeMatrix(t, RandomVec(static_cast<size_t>(n) * k, 8, 0.05f), n, k);
    std::vector<float> y1(static_cast<size_t>(m) * n), y2(y1.size());
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    Matmul(x.data(), m, k, w.data(), t, n, nullptr, y1.data());
    omp_set_num_threads(3);
    Matmul(x.data(), m, k, w.data(), t, n, nullptr, y2.data());
    omp_set_num_threads(threads);
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), 4 * y1.size()), 0) << DTypeName(t);
  }
}

// The K-quant GEMV rows prefetch 6 KiB ahead on AMD Zen 5 (family 0x1A) and later, 2 KiB on
// Zen 4 and Intel, the K-quant and packed 32-block tiles of 2+ rows 8 KiB on Zen 5, and Zen 5's
// F16 panels 2 KiB (4 KiB for tiles of 8+ rows); the other distances stay the vendor's. A
// distance moves no bits: the GEMVs and the tiles of every set (K-quants, Q4_0, Q8_0) match the
// scalar reference with none, 2, 6 and 8 KiB (past the end of the weights too: a prefetch does
// not fault).
TEST(MatmulQuant, KQuantPrefetchDistanceByCpuMovesNoBits) {
  using internal::PrefetchDistancesFor;
  EXPECT_EQ(PrefetchDistancesFor(true, 0x19).kquant_l1, internal::kPrefetchBytes);
  EXPECT_EQ(PrefetchDistancesFor(true, 0x1A).kquant_l1, 6144u);
  EXPECT_EQ(PrefetchDistancesFor(true, 0x1B).kquant_l1, 6144u);
  EXPECT_EQ(PrefetchDistancesFor(false, 6).kquant_l1, internal::kPrefetchBytes);
  EXPECT_EQ(PrefetchDistancesFor(false, 0x1A).kquant_l1, internal::kPrefetchBytes);
  for (unsigned family : {0x19u, 0x1Au}) {
    EXPECT_EQ(PrefetchDistancesFor(true, family).packed_legacy, 4096u);
    EXPECT_EQ(PrefetchDistancesFor(true, family).l2_ahead, 0u);
  }
  EXPECT_EQ(PrefetchDistancesFor(false, 6).l2_ahead, 6144u);
  // and the F16 / BF16 panels' L1 prefetch: none on Zen 4, 2 KiB on Zen 5
  EXPECT_EQ(PrefetchDistancesFor(true, 0x19).f16_packed, 0u);
  EXPECT_EQ(PrefetchDistancesFor(true, 0x1A).f16_packed, 2048u);
  // and for token tiles of 8+ rows: 4 KiB on Zen 5, elsewhere as the GEMV
  EXPECT_EQ(PrefetchDistancesFor(true, 0x19).f16_panels_wide, 0u);
  EXPECT_EQ(PrefetchDistancesFor(true, 0x1A).f16_panels_wide, 4096u);
  EXPECT_EQ(PrefetchDistancesFor(false, 6).f16_panels_wide, 2048u);
  // and the K-quant tiles of 2+ rows: 8 KiB on Zen 5, elsewhere 2 KiB
  EXPECT_EQ(PrefetchDistancesFor(true, 0x19).kquant_tiles, internal::kPrefetchBytes);
  EXPECT_EQ(PrefetchDistancesFor(true, 0x1A).kquant_tiles, 8192u);
  EXPECT_EQ(PrefetchDistancesFor(false, 6).kquant_tiles, internal::kPrefetchBytes);
  // and the packed 32-block formats' tiles: 8 KiB on Zen 5, elsewhere as their GEMV
  EXPECT_EQ(PrefetchDistancesFor(true, 0x19).packed_legacy_tiles, 4096u);
  EXPECT_EQ(PrefetchDistancesFor(true, 0x1A).packed_legacy_tiles, 8192u);
  EXPECT_EQ(PrefetchDistancesFor(false, 6).packed_legacy_tiles, 2048u);

  const int k = 1024, n = 9;
  const auto isas = Isas();
  const internal::PrefetchDistances saved = internal::g_prefetch;
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                  DType::kQ4_0, DType::kQ8_0}) {
    const auto w = QuantizeMatrix(t, RandomVec(static_cast<size_t>(n) * k, 11, 0.05f), n, k);
    for (const int m : {1, 2, 5, 16}) {  // the GEMVs, then the tiles
      const auto x = RandomVec(static_cast<size_t>(m) * k, 5 + m);
      std::vector<float> ref(static_cast<size_t>(m) * n);
      internal::MatmulWith(*isas.back(), x.data(), m, k, w.data(), t, n, nullptr, ref.data());
      for (uintptr_t ahead : {uintptr_t{0}, uintptr_t{2048}, uintptr_t{6144}, uintptr_t{8192}}) {
        internal::g_prefetch.kquant_l1 = ahead;
        internal::g_prefetch.kquant_tiles = ahead;
        internal::g_prefetch.packed_legacy = ahead;
        internal::g_prefetch.packed_legacy_tiles = ahead;
        for (const auto* ks : isas) {
          std::vector<float> y(ref.size(), -1.0f);
          internal::MatmulWith(*ks, x.data(), m, k, w.data(), t, n, nullptr, y.data());
          EXPECT_EQ(std::memcmp(ref.data(), y.data(), 4 * y.size()), 0)
              << ks->isa << " " << DTypeName(t) << " m=" << m << " prefetching " << ahead
              << " bytes ahead";
        }
      }
    }
  }
  internal::g_prefetch = saved;
}

TEST(MatmulQuant, EmbeddingRowsAreDequantizedRows) {
  const int rows = 5, dim = 512;
  for (DType t : kFormats) {
    const auto w = QuantizeMatrix(t, RandomVec(static_cast<size_t>(rows) * dim, 2), rows, dim);
    const auto wd = DequantizeMatrix(t, w, rows, dim);
    const int32_t ids[] = {3, 0, 9, 4};  // 9: outside the table (a zero row)
    std::vector<float> out(4 * dim);
    Embedding(ids, 4, w.data(), t, rows, dim, 0, out.data());
    EXPECT_EQ(std::memcmp(out.data(), wd.data() + 3 * dim, 4 * dim), 0) << DTypeName(t);
    EXPECT_EQ(std::memcmp(out.data() + dim, wd.data(), 4 * dim), 0) << DTypeName(t);
    EXPECT_EQ(out[2 * dim + 7], 0.0f);
    EXPECT_EQ(std::memcmp(out.data() + 3 * dim, wd.data() + 4 * dim, 4 * dim), 0);
  }
}

// GEMV (decode) and GEMM (prefill) throughput of every ISA and format on a TinyLlama-sized
// projection (2048 x 5632); weight bytes read per GEMV.
TEST(MatmulQuant, DISABLED_Perf) {
  const int k = 2048, n = 5632;
  const auto x = RandomVec(static_cast<size_t>(64) * k, 1);
  const auto wf = RandomVec(static_cast<size_t>(n) * k, 2, 0.05f);
  for (DType t : kFormats) {
    const auto w = QuantizeMatrix(t, wf, n, k);
    std::vector<float> y(static_cast<size_t>(64) * n);
    for (const auto* ks : Isas()) {
      for (int m : {1, 64}) {
        const int reps = m == 1 ? 20 : 3;
        internal::MatmulWith(*ks, x.data(), m, k, w.data(), t, n, nullptr, y.data());
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) {
          internal::MatmulWith(*ks, x.data(), m, k, w.data(), t, n, nullptr, y.data());
        }
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("%-5s %-9s m=%-3d %8.3f ms  %7.1f GB/s weights  %7.1f GFLOP/s\n", DTypeName(t),
                    ks->isa, m, s * 1e3, w.size() / s / 1e9, 2.0 * m * n * k / s / 1e9);
      }
    }
  }
}

}  // namespace
}  // namespace llm::kernels
