// Matmul against the float64 reference, for every weight dtype, and its batch invariance.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/matmul_blocked.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu_ops.h"
#include "kernels/reference_ops.h"

namespace llm::kernels {
namespace {

std::vector<float> RandomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// Weights stored as `type`, built from float values (rounded when 16-bit).
std::vector<uint8_t> MakeWeights(const std::vector<float>& f, DType type) {
  std::vector<uint8_t> bytes(f.size() * DTypeSize(type));
  for (size_t i = 0; i < f.size(); ++i) {
    if (type == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f[i], 4);
    } else {
      uint16_t h = type == DType::kF16 ? F32ToF16(f[i]) : F32ToBf16(f[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

// Every kernel set this CPU can run (the fast ones and the scalar fallback).
std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

struct Shape {
  int m, k, n;
};

void CheckAgainstReference(const internal::MatmulKernels& ks, const Shape& s, DType type,
                           bool with_bias) {
  SCOPED_TRACE(std::string(ks.isa) + " m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) +
               " n=" + std::to_string(s.n) + " dtype=" + DTypeName(type) +
               " bias=" + std::to_string(with_bias));
  auto x = RandomVec(static_cast<size_t>(s.m) * s.k, 1);
  auto wf = RandomVec(static_cast<size_t>(s.n) * s.k, 2);
  auto bias = RandomVec(s.n, 3);
  auto w = MakeWeights(wf, type);
  const float* b = with_bias ? bias.data() : nullptr;
  std::vector<float> y(static_cast<size_t>(s.m) * s.n), want(y.size());
  internal::MatmulWith(ks, x.data(), s.m, s.k, w.data(), type, s.n, b, y.data());
  ref::Matmul(x.data(), s.m, s.k, w.data(), type, s.n, b, want.data());
  for (int i = 0; i < s.m; ++i) {
    for (int j = 0; j < s.n; ++j) {
      double mag = with_bias ? std::fabs(bias[j]) : 0.0;
      for (int p = 0; p < s.k; ++p) {
        mag += std::fabs(x[i * s.k + p] * ref::LoadAsF32(w.data(), type, int64_t{j} * s.k + p));
      }
      ASSERT_NEAR(y[i * s.n + j], want[i * s.n + j], 1e-5 * mag + 1e-30) << i << "," << j;
    }
  }
}

TEST(MatmulTest, MatchesReferenceAllDtypes) {
  const Shape shapes[] = {{1, 1, 1},    {1, 16, 4},    {3, 17, 5},    {5, 33, 7},
                          {4, 64, 8},   {16, 31, 9},   {37, 100, 19}, {2, 257, 65},
                          {1, 1000, 3}, {20, 129, 33}, {6, 600, 11},  {17, 520, 5}};
  for (const internal::MatmulKernels* ks : Isas()) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (const Shape& s : shapes) {
        CheckAgainstReference(*ks, s, t, false);
        CheckAgainstReference(*ks, s, t, true);
      }
    }
  }
}

// Each output row must be bitwise the same whatever m, the row's index and the thread count.
// k = 301: 19 chunks of 16 lanes with the zero-padded tail on an even chunk, in one block of
// the AVX-512 wide tiles; k = 1051: 66 chunks, the tail on an odd one, over three blocks;
// k = 1024: F16 on the AMX set's tiles (k a multiple of 16).
class MatmulBatchInvariance : public ::testing::TestWithParam<int> {};

TEST_P(MatmulBatchInvariance, BatchInvariantBitwise) {
  const int k = GetParam(), n = 1003, m = 37;
  auto x = RandomVec(static_cast<size_t>(m) * k, 4);
  auto wf = RandomVec(static_cast<size_t>(n) * k, 5);
  auto bias = RandomVec(n, 6);
  const int saved = omp_get_max_threads();
  for (const internal::MatmulKernels* ks : Isas()) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(ks->isa) + " " + DTypeName(t) + " k=" + std::to_string(k));
      auto w = MakeWeights(wf, t);
      omp_set_num_threads(2);
      std::vector<float> full(static_cast<size_t>(m) * n);
      internal::MatmulWith(*ks, x.data(), m, k, w.data(), t, n, bias.data(), full.data());
      omp_set_num_threads(1);
      for (int r = 0; r < m; ++r) {
        std::vector<float> one(n);
        internal::MatmulWith(*ks, x.data() + static_cast<size_t>(r) * k, 1, k, w.data(), t, n,
                             bias.data(), one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), full.data() + static_cast<size_t>(r) * n, 4 * n))
            << "row " << r;
      }
      // A sub-batch starting at an odd row, with 2 threads.
      omp_set_num_threads(2);
      std::vector<float> part(static_cast<size_t>(5) * n);
      internal::MatmulWith(*ks, x.data() + 7 * k, 5, k, w.data(), t, n, bias.data(), part.data());
      ASSERT_EQ(0, std::memcmp(part.data(), full.data() + 7 * n, sizeof(float) * part.size()));
    }
  }
  omp_set_num_threads(saved);
}

INSTANTIATE_TEST_SUITE_P(MatmulTest, MatmulBatchInvariance, ::testing::Values(301, 1051, 1024));

// The float blocks the k-blocked panels read (matmul_internal.h): every element of x where the
// layout says, zero past k. k = one block and a 37-weight tail, m = one chunk and 2 rows more.
TEST(MatmulTest, FloatBlocksHoldEachRowWhereTheLayoutSays) {
  constexpr int kR = internal::kFloatBlockRows, kK = internal::kFloatBlockK;
  const int m = kR + 2, k = kK + 37, blocks = 2;
  const auto x = RandomVec(static_cast<size_t>(m) * k, 9);
  std::vector<float> out(internal::FloatBlocksSize(m, k), -1.0f);
  ASSERT_EQ(out.size(), static_cast<size_t>(2 * blocks * kR * kK));
  internal::MakeFloatBlocks(x.data(), m, k, out.data());
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < blocks * kK; ++p) {
      const float got =
          out[((static_cast<size_t>(i / kR) * blocks + p / kK) * kR + i % kR) * kK + p % kK];
      ASSERT_EQ(got, p < k ? x[static_cast<size_t>(i) * k + p] : 0.0f) << i << "," << p;
    }
  }
}

// The blocked tiles' prefetch of the next block (matmul_blocked.h): however a chunk's tiles share
// it, spread (AVX-512 where g_prefetch.blocked_spread) or in runs (AVX2, and AVX-512 on AMD),
// each of the block's steps is fetched exactly once, by a step of some tile, as PrefetchSteps
// says (a step missed is streamed from DRAM by the widening tile; one fetched twice costs a fill
// buffer).
template <bool kSpread>
struct FakeBlk {
  static constexpr int kLanes = 16;
  static constexpr bool kSpreadPrefetch = kSpread;
};
template <bool kSpread>
void ExpectEveryStepFetchedOnce() {
  constexpr int kLanes = FakeBlk<kSpread>::kLanes;
  for (int tiles = 1; tiles <= internal::kFloatBlockRows / 6; ++tiles) {
    for (int steps : {1, 2, 5, 31, internal::kFloatBlockK / kLanes}) {
      std::vector<int> fetched(steps, 0);
      for (int t = 0; t < tiles; ++t) {
        const internal::PrefetchSteps pf =
            internal::PrefetchShare<FakeBlk<kSpread>>(t, tiles, steps);
        int at = pf.at, q = pf.q;
        for (int p = 0; p < steps * kLanes; p += kLanes) {
          int what = -1;
          if (pf.spread && p == at) {
            what = q;
            at += pf.stride;
            q += kLanes;
          } else if (!pf.spread && p >= pf.at && p < pf.end) {
            what = pf.q + p;
          }
          if (what < 0) continue;
          ASSERT_EQ(what % kLanes, 0);
          ASSERT_LT(what / kLanes, steps) << "tiles " << tiles << " steps " << steps;
          ++fetched[what / kLanes];
        }
      }
      for (int s = 0; s < steps; ++s) {
        EXPECT_EQ(fetched[s], 1) << "spread " << kSpread << " tiles " << tiles << " steps " << steps
                                 << " step " << s;
      }
    }
  }
  const internal::PrefetchSteps none = internal::PrefetchShare<FakeBlk<kSpread>>(0, 0, 32);
  EXPECT_EQ(none.at, -1);  // the tiles of later chunks fetch nothing
}
TEST(MatmulTest, BlockedPrefetchFetchesEachStepOnce) {
  const internal::PrefetchDistances saved = internal::g_prefetch;
  for (bool spread : {true, false}) {
    internal::g_prefetch.blocked_spread = spread;
    ExpectEveryStepFetchedOnce<true>();
    EXPECT_EQ(internal::PrefetchShare<FakeBlk<true>>(0, 3, 32).spread, spread);
  }
  internal::g_prefetch = saved;
  ExpectEveryStepFetchedOnce<false>();
  EXPECT_FALSE(internal::PrefetchShare<FakeBlk<false>>(0, 3, 32).spread);  // AVX2: runs always
}

TEST(MatmulTest, PublicEntryUsesBestIsa) {
  std::string isa = MatmulIsa();
  EXPECT_TRUE(isa == "avx512-amx" || isa == "avx512-vnni" || isa == "avx512" || isa == "avx2-fma" ||
              isa == "scalar")
      << isa;
  if (std::getenv("LLM_MATMUL_ISA") == nullptr) {
    EXPECT_EQ(isa, Isas()[0]->isa);
  }
  const int m = 3, k = 70, n = 21;
  auto x = RandomVec(m * k, 7);
  auto w = RandomVec(n * k, 8);
  std::vector<float> got(m * n), want(m * n);
  Matmul(x.data(), m, k, w.data(), DType::kF32, n, nullptr, got.data());
  ref::Matmul(x.data(), m, k, w.data(), DType::kF32, n, nullptr, want.data());
  for (int i = 0; i < m * n; ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
}

}  // namespace
}  // namespace llm::kernels

namespace llm::kernels {
namespace {

// engine.matmul_isa: a path the CPU has is taken, one it lacks is an error naming the key.
TEST(MatmulIsaTest, SelectByNameAndAuto) {
  ASSERT_TRUE(SelectMatmulIsa("scalar").ok());
  EXPECT_STREQ(MatmulIsa(), "scalar");
  const Status bad = SelectMatmulIsa("sse9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("engine.matmul_isa"), std::string::npos) << bad.ToString();
  EXPECT_STREQ(MatmulIsa(), "scalar");  // unchanged
  ASSERT_TRUE(SelectMatmulIsa("auto").ok());
  EXPECT_STRNE(MatmulIsa(), "");
}

}  // namespace
}  // namespace llm::kernels
