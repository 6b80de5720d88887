// Q1_0 rows in panels of 16 (kernels/cpu/q1_0_row_panels.h, DType::kQ1_0RowPanels): packing puts
// every sign nibble and scale where the layout says and unpacking undoes it (row counts with and
// without a partial last panel); a matmul on the panels gives bitwise the scalar reference's
// result on ggml's layout on every kernel set, through the table GEMV (AVX-512 with VBMI) up to
// kQ1_0LutMaxRows input rows and through the unpacked rows beyond and on the other sets,
// including activations at +-127 (the tables' largest sums) and rows of 2.25 16-chain rounds;
// with a job of another format in the same call the same bits; the CPU backend lays out Q1_0
// weights as panels where the table GEMV runs, and as kQ1_0Packed with LLM_Q1_0_ROW_PANELS=0.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q1_0_row_panels.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

std::vector<uint8_t> Q1_0Matrix(int n, int k, uint32_t seed) {
  const auto f = testing::RandomFloats(static_cast<size_t>(n) * k, seed, -0.05f, 0.05f);
  std::vector<uint8_t> q(RowBytes(DType::kQ1_0, k) * n);
  QuantizeRows(DType::kQ1_0, f.data(), n, k, q.data());
  return q;
}

std::vector<uint8_t> Panels(const std::vector<uint8_t>& q, int n, int k) {
  std::vector<uint8_t> p(q.size());
  internal::PackQ1_0RowPanels(q.data(), n, k, p.data());
  return p;
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

const internal::MatmulKernels& Scalar() {
  return internal::ScalarMatmulKernels();
}

TEST(Q1_0RowPanels, PackingPutsEverySignAndScaleWhereTheLayoutSaysAndUnpackingUndoesIt) {
  for (int n : {1, 15, 16, 17, 40}) {
    for (int k : {128, 384}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      const auto q = Q1_0Matrix(n, k, 7 + n + k);
      const auto p = Panels(q, n, k);
      const size_t row = RowBytes(DType::kQ1_0, k);
      for (int j = 0; j < n; ++j) {
        const int panel = j / 16, r = std::min(16, n - 16 * panel), i = j % 16;
        const uint8_t* base = p.data() + static_cast<size_t>(16 * panel) * row;
        for (int b = 0; b < k / 128; ++b) {
          internal::BlockQ1_0 blk;
          std::memcpy(&blk, q.data() + j * row + b * sizeof(internal::BlockQ1_0), sizeof(blk));
          const uint8_t* pb = base + static_cast<size_t>(b) * 18 * r;
          uint16_t d;
          std::memcpy(&d, pb + 16 * r + 2 * i, 2);
          ASSERT_EQ(d, blk.d) << "row " << j << " block " << b;
          for (int e = 0; e < 128; ++e) {  // weight e: sub-block u, quad q, bit t
            const int u = e / 32, quad = e % 32 / 4, t = e % 4;
            const uint8_t byte = pb[4 * r * u + 4 * i + quad % 4];
            const int bit = (byte >> (4 * (quad / 4) + t)) & 1;
            ASSERT_EQ(bit, (blk.qs[e / 8] >> (e % 8)) & 1) << "row " << j << " weight " << e;
          }
        }
      }
      std::vector<uint8_t> back(q.size());
      internal::UnpackQ1_0RowPanels(p.data(), n, k, back.data());
      EXPECT_EQ(back, q);
    }
  }
}

void ExpectBitwise(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t e = 0; e < got.size(); ++e) {
    ASSERT_EQ(std::memcmp(&got[e], &want[e], 4), 0)
        << "output " << e << ": " << got[e] << " against " << want[e];
  }
}

// m: 1 to kQ1_0LutMaxRows (the tables) and beyond (the rows unpacked); n: whole panels and a
// partial last one; k: one block, 5 (a partial chain round), 18 (2.25 rounds).
TEST(Q1_0RowPanels, MatmulGivesTheScalarReferencesBitsOnEveryKernelSet) {
  bool tables = false;
  for (const int k : {128, 640, 2304}) {
    for (const int n : {16, 29, 48, 70}) {
      const auto q = Q1_0Matrix(n, k, 11 + n + k);
      const auto p = Panels(q, n, k);
      const auto bias = testing::RandomFloats(n, 5);
      for (const int m : {1, 2, 3, internal::kQ1_0LutMaxRows, internal::kQ1_0LutMaxRows + 1, 17}) {
        auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 3 + m, -2.0f, 2.0f);
        // the first row all +-1: every quant +-127, the tables' extreme sums
        for (int c = 0; c < k; ++c) x[c] = c % 3 == 0 ? -1.0f : 1.0f;
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> want(static_cast<size_t>(m) * n);
          internal::MatmulWith(Scalar(), x.data(), m, k, q.data(), DType::kQ1_0, n, b, want.data());
          for (const auto* ks : Isas()) {
            SCOPED_TRACE(std::string(ks->isa) + " m=" + std::to_string(m) +
                         " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                         (b != nullptr ? " bias" : ""));
            tables = tables || (ks->q1_0_row_panels != nullptr && m <= internal::kQ1_0LutMaxRows);
            std::vector<float> got(want.size(), -1.0f);
            internal::MatmulWith(*ks, x.data(), m, k, p.data(), DType::kQ1_0RowPanels, n, b,
                                 got.data());
            ExpectBitwise(got, want);
          }
        }
      }
    }
  }
  if (!tables) GTEST_SKIP() << "no kernel set here has the table GEMV (AVX-512 VBMI + VNNI)";
}

TEST(Q1_0RowPanels, AJobOfAnotherFormatInTheSameCallKeepsItsBits) {
  const int k = 640, n = 48;
  const auto q = Q1_0Matrix(n, k, 3);
  const auto p = Panels(q, n, k);
  const auto f = testing::RandomFloats(static_cast<size_t>(n) * k, 4, -0.05f, 0.05f);
  std::vector<uint8_t> q4(RowBytes(DType::kQ4_0, k) * n);
  QuantizeRows(DType::kQ4_0, f.data(), n, k, q4.data());
  for (const int m : {1, 4}) {
    const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 9, -2.0f, 2.0f);
    for (const auto* ks : Isas()) {
      SCOPED_TRACE(std::string(ks->isa) + " m=" + std::to_string(m));
      std::vector<float> want1(static_cast<size_t>(m) * n), want2(want1.size());
      internal::MatmulWith(Scalar(), x.data(), m, k, q.data(), DType::kQ1_0, n, nullptr,
                           want1.data());
      internal::MatmulWith(*ks, x.data(), m, k, q4.data(), DType::kQ4_0, n, nullptr, want2.data());
      std::vector<float> got1(want1.size()), got2(want2.size());
      const MatmulJob jobs[] = {{p.data(), DType::kQ1_0RowPanels, n, nullptr, got1.data()},
                                {q4.data(), DType::kQ4_0, n, nullptr, got2.data()}};
      internal::MatmulSameInputWith(*ks, x.data(), m, k, jobs, 2);
      ExpectBitwise(got1, want1);
      ExpectBitwise(got2, want2);
    }
  }
}

TEST(Q1_0RowPanels, TheCpuBackendLaysOutQ1_0AsPanelsWhereTheTableGemvRuns) {
  const bool lut = Isas().front()->q1_0_row_panels != nullptr;  // the best set: the backend's
  if (std::getenv("LLM_MATMUL_ISA") != nullptr || std::getenv("LLM_PACK_WEIGHTS") != nullptr) {
    GTEST_SKIP() << "LLM_MATMUL_ISA / LLM_PACK_WEIGHTS set: the layout follows them";
  }
  if (!lut) {
    EXPECT_NE(MatmulPackedFormat(DType::kQ1_0), DType::kQ1_0RowPanels);
    GTEST_SKIP() << "this CPU has no AVX-512 VBMI + VNNI: Q1_0 stays in its packed groups";
  }
  EXPECT_EQ(MatmulPackedFormat(DType::kQ1_0), DType::kQ1_0RowPanels);
  setenv("LLM_Q1_0_ROW_PANELS", "0", 1);
  EXPECT_EQ(MatmulPackedFormat(DType::kQ1_0), DType::kQ1_0Packed);
  unsetenv("LLM_Q1_0_ROW_PANELS");
  // PackRows writes the panels
  const int n = 40, k = 256;
  const auto q = Q1_0Matrix(n, k, 2);
  std::vector<uint8_t> got(q.size());
  PackRows(DType::kQ1_0, q.data(), n, k, got.data());
  EXPECT_EQ(got, Panels(q, n, k));
}

}  // namespace
}  // namespace llm::kernels
