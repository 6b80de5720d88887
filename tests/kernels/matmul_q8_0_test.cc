// The Q8_0 matmul (kernels/cpu/q8_0.h): against the double-precision emulation of ggml
// (ref::MatmulQ8Activations), bitwise equal on every ISA, batch invariant, GEMV and GEMM shapes;
// the activation quantizer against ggml's rule; Q8_0 embedding rows.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q8_0.h"
#include "kernels/cpu_ops.h"
#include "kernels/reference_ops.h"

namespace llm::kernels {
namespace {

using internal::BlockQ8_0;

std::vector<float> RandomVec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// [n, k] floats as Q8_0 rows (llama-quantize's rule; the same as the activation quantizer),
// plus a few extreme blocks: all zero, and one holding -128 (a valid int8 llama-quantize never
// writes, but a file may).
std::vector<BlockQ8_0> Quantize(const std::vector<float>& f, int n, int k) {
  std::vector<BlockQ8_0> q(static_cast<size_t>(n) * k / 32);
  for (int r = 0; r < n; ++r) {
    internal::QuantizeRowQ8_0(f.data() + static_cast<size_t>(r) * k, k, q.data() + r * (k / 32));
  }
  if (q.size() > 2) {
    std::memset(&q[1], 0, sizeof(BlockQ8_0));
    q[2].qs[5] = -128;
  }
  return q;
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

TEST(MatmulQ8_0, QuantizerFollowsGgml) {
  std::vector<float> x(64, 0.0f);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) / 4;  // amax 4 at i = 0
  x[40] = 127.0f;  // amax 127: one step per unit
  x[41] = -0.5f;   // half-way cases round to even: -0.5 -> 0, 1.5 -> 2, 2.5 -> 2
  x[42] = 1.5f;
  x[43] = 2.5f;
  BlockQ8_0 q[2];
  internal::QuantizeRowQ8_0(x.data(), 64, q);
  EXPECT_EQ(F16ToF32(q[0].d), F16ToF32(F32ToF16(4.0f / 127)));
  EXPECT_EQ(q[0].qs[0], -127);
  EXPECT_EQ(q[0].qs[16], 0);
  EXPECT_EQ(q[0].qs[31], static_cast<int8_t>(std::nearbyint(15.0f / 4 * (127.0f / 4))));
  EXPECT_EQ(q[1].qs[8], 127);
  EXPECT_EQ(q[1].qs[9], 0);
  EXPECT_EQ(q[1].qs[10], 2);
  EXPECT_EQ(q[1].qs[11], 2);
  EXPECT_EQ(F16ToF32(q[1].d), 1.0f);
  // All-zero and non-finite blocks give zeros, never an out-of-range conversion.
  std::vector<float> z(32, 0.0f);
  z[3] = INFINITY;
  BlockQ8_0 zq;
  internal::QuantizeRowQ8_0(z.data(), 32, &zq);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(zq.qs[i], 0);
}

// The (vectorized) quantizer against ggml's scalar quantize_row_q8_0_ref written out here: random
// rows, rows of exact half-steps (round half to even), and NaN / infinity inside a block.
TEST(MatmulQ8_0, QuantizerMatchesScalarDefinition) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int row = 0; row < 200; ++row) {
    std::vector<float> x(256);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = row % 3 == 0 ? static_cast<float>(static_cast<int>(i % 64) - 32) / 2  // halves
                          : normal(gen);
    }
    if (row % 7 == 1) x[row % 256] = NAN;
    if (row % 11 == 2) x[(row * 5) % 256] = -INFINITY;
    std::vector<BlockQ8_0> q(8);
    internal::QuantizeRowQ8_0(x.data(), 256, q.data());
    for (int b = 0; b < 8; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[32 * b + i]));
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      ASSERT_EQ(q[b].d, F32ToF16(amax / 127.0f)) << "row " << row << " block " << b;
      for (int i = 0; i < 32; ++i) {
        const float v = x[32 * b + i] * id;
        const float c = std::isnan(v) ? 0.0f : std::fmin(std::fmax(v, -127.0f), 127.0f);
        ASSERT_EQ(q[b].qs[i], static_cast<int8_t>(std::nearbyint(c)))
            << "row " << row << " element " << 32 * b + i << " x " << x[32 * b + i];
      }
    }
  }
}

TEST(MatmulQ8_0, MatchesGgmlEmulationAndIsasAgreeBitwise) {
  struct Shape {
    int m, k, n;
  };
  const Shape shapes[] = {{1, 32, 1},  {1, 64, 5},   {2, 96, 7},    {3, 128, 4},
                          {5, 32, 17}, {16, 256, 9}, {17, 192, 33}, {37, 320, 19}};
  for (const Shape& s : shapes) {
    SCOPED_TRACE("m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) +
                 " n=" + std::to_string(s.n));
    const auto x = RandomVec(static_cast<size_t>(s.m) * s.k, 1);
    const auto w = Quantize(RandomVec(static_cast<size_t>(s.n) * s.k, 2, 0.25f), s.n, s.k);
    const auto bias = RandomVec(s.n, 3);
    std::vector<float> want(static_cast<size_t>(s.m) * s.n);
    ref::MatmulQ8Activations(x.data(), s.m, s.k, w.data(), s.n, bias.data(), want.data());
    std::vector<float> first;
    for (const internal::MatmulKernels* ks : Isas()) {
      std::vector<float> y(want.size());
      internal::MatmulWith(*ks, x.data(), s.m, s.k, w.data(), DType::kQ8_0, s.n, bias.data(),
                           y.data());
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << ks->isa << " " << i;
      }
      if (first.empty()) {
        first = y;
      } else {
        ASSERT_EQ(0, std::memcmp(first.data(), y.data(), 4 * y.size())) << ks->isa;
      }
    }
  }
}

// Close to the unquantized product too: the Q8_0 error is about 1% of the terms' magnitude.
TEST(MatmulQ8_0, CloseToTheDequantizedProduct) {
  const int m = 4, k = 512, n = 16;
  const auto x = RandomVec(static_cast<size_t>(m) * k, 4);
  const auto w = Quantize(RandomVec(static_cast<size_t>(n) * k, 5, 0.25f), n, k);
  std::vector<float> got(m * n), exact(m * n);
  Matmul(x.data(), m, k, w.data(), DType::kQ8_0, n, nullptr, got.data());
  ref::Matmul(x.data(), m, k, w.data(), DType::kQ8_0, n, nullptr, exact.data());
  for (int i = 0; i < m * n; ++i) EXPECT_NEAR(got[i], exact[i], 0.1) << i;
}

TEST(MatmulQ8_0, BatchInvariantBitwise) {
  const int k = 320, n = 203, m = 29;
  const auto x = RandomVec(static_cast<size_t>(m) * k, 6);
  const auto w = Quantize(RandomVec(static_cast<size_t>(n) * k, 7, 0.25f), n, k);
  const auto bias = RandomVec(n, 8);
  const int saved = omp_get_max_threads();
  for (const internal::MatmulKernels* ks : Isas()) {
    SCOPED_TRACE(ks->isa);
    omp_set_num_threads(2);
    std::vector<float> full(static_cast<size_t>(m) * n);
    internal::MatmulWith(*ks, x.data(), m, k, w.data(), DType::kQ8_0, n, bias.data(), full.data());
    omp_set_num_threads(1);
    for (int r = 0; r < m; ++r) {
      std::vector<float> one(n);
      internal::MatmulWith(*ks, x.data() + static_cast<size_t>(r) * k, 1, k, w.data(), DType::kQ8_0,
                           n, bias.data(), one.data());
      ASSERT_EQ(0, std::memcmp(one.data(), full.data() + static_cast<size_t>(r) * n, 4 * n))
          << "row " << r;
    }
  }
  omp_set_num_threads(saved);
}

TEST(MatmulQ8_0, EmbeddingDequantizesRows) {
  const int rows = 5, dim = 64;
  const auto w = Quantize(RandomVec(static_cast<size_t>(rows) * dim, 9), rows, dim);
  const int32_t ids[] = {4, 0, 2, 7};
  std::vector<float> out(4 * dim), want(4 * dim);
  Embedding(ids, 4, w.data(), DType::kQ8_0, rows, dim, 0, out.data());
  ref::Embedding(ids, 4, w.data(), DType::kQ8_0, rows, dim, 0, want.data());
  EXPECT_EQ(out, want);
  EXPECT_EQ(out[0], static_cast<float>(w[8].qs[0]) * F16ToF32(w[8].d));  // row 4, block 0
  for (int i = 3 * dim; i < 4 * dim; ++i) EXPECT_EQ(out[i], 0.0f);       // id 7: outside
}

}  // namespace
}  // namespace llm::kernels
