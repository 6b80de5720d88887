// F16 / BF16 rows in panels of 16 (kernels/cpu/f16_row_panels.h, DType::kF16RowPanels,
// kBF16RowPanels): packing puts every weight where the layout says and unpacking undoes it (row
// counts with and without a partial last panel); a matmul on the panels gives bitwise a scalar
// loop's result (each output one std::fma chain over k in order from +0, then + bias) on every
// kernel set that reads them, so a row's bits do not depend on its batch, and on a set that
// unpacks them the bits of its own F16 / BF16 panel, close to the chain; with jobs of other
// layouts in one call the same bits; the CPU backend lays out F16 and BF16 matmul weights as
// panels on the AVX-512 and AVX2 sets unless LLM_F16_ROW_PANELS=0.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/cpu/f16_row_panels.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

// (the format, its panels)
constexpr DType kTypes[2][2] = {{DType::kF16, DType::kF16RowPanels},
                                {DType::kBF16, DType::kBF16RowPanels}};

std::vector<uint16_t> Random16(DType t, size_t n, uint32_t seed) {
  return testing::Random16(t, n, seed, -0.5f, 0.5f);
}

float Widen(DType t, uint16_t h) {
  return testing::Widen16(t, h);
}

std::vector<uint16_t> Panels(const std::vector<uint16_t>& w, int n, int k) {
  std::vector<uint16_t> p(w.size());
  internal::PackF16RowPanels(w.data(), n, k, p.data());
  return p;
}

// The arithmetic the layout's kernels promise, written out: y[i][j] = (sum over p in order of
// x[i][p] * w[j][p], one FMA each from +0) + bias[j].
std::vector<float> ChainReference(DType t, const std::vector<float>& x,
                                  const std::vector<uint16_t>& w, int m, int n, int k,
                                  const float* bias) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int p = 0; p < k; ++p) {
        acc = std::fma(x[static_cast<size_t>(i) * k + p],
                       Widen(t, w[static_cast<size_t>(j) * k + p]), acc);
      }
      y[static_cast<size_t>(i) * n + j] = bias != nullptr ? acc + bias[j] : acc;
    }
  }
  return y;
}

TEST(F16RowPanels, PackingPutsEveryWeightWhereTheLayoutSaysAndUnpackingUndoesIt) {
  for (int n : {1, 15, 16, 17, 33, 70}) {
    for (int k : {1, 7, 64, 67}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      std::vector<uint16_t> w(static_cast<size_t>(n) * k);
      for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(i + 1);
      const auto p = Panels(w, n, k);
      for (int row = 0; row < n; ++row) {
        const int q = row / 16, r = std::min(16, n - 16 * q), i = row % 16;
        for (int col = 0; col < k; ++col) {  // panel q at row 16q's place, column col's r rows
          const size_t at = static_cast<size_t>(16 * q) * k + static_cast<size_t>(col) * r + i;
          ASSERT_EQ(p[at], w[static_cast<size_t>(row) * k + col]) << row << "," << col;
        }
      }
      std::vector<uint16_t> back(w.size());
      internal::UnpackF16RowPanels(p.data(), n, k, back.data());
      EXPECT_EQ(back, w);
    }
  }
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

// m covers every tile height (AVX-512: 1, 2, 3, 4, 6, 8, 12, 16 rows; AVX2: a token tile as
// row tiles of 1, 2, 4 and 6) and more than one token tile; n calls of 1 to 4 full panels and a
// partial last panel of fewer and of more than 8 rows; k odd (one column left after the
// prefetching pairs) and even.
TEST(F16RowPanels, MatmulGivesOneFmaChainPerOutputOnEveryKernelSet) {
  bool native = false;
  for (const auto [type, panels_type] : kTypes) {
    for (const int k : {1, 13, 64, 267}) {
      for (const int n : {16, 29, 37, 64, 100, 130}) {
        const auto w = Random16(type, static_cast<size_t>(n) * k, 11 + n + k);
        const auto p = Panels(w, n, k);
        const auto bias = testing::RandomFloats(n, 5);
        for (const int m : {1, 2, 3, 4, 5, 7, 9, 13, 16, 17, 40}) {
          const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 3 + m, -2.0f, 2.0f);
          for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
            const auto want = ChainReference(type, x, w, m, n, k, b);
            for (const auto* ks : Isas()) {
              SCOPED_TRACE(std::string(DTypeName(type)) + " " + ks->isa +
                           " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k) + (b != nullptr ? " bias" : ""));
              std::vector<float> got(want.size(), -1.0f);
              internal::MatmulWith(*ks, x.data(), m, k, p.data(), panels_type, n, b, got.data());
              if ((type == DType::kF16 ? ks->f16_row_panels : ks->bf16_row_panels) != nullptr) {
                native = true;
                for (size_t e = 0; e < got.size(); ++e) {
                  ASSERT_EQ(std::memcmp(&got[e], &want[e], 4), 0)
                      << "output " << e << ": " << got[e] << " against " << want[e];
                }
                continue;
              }
              // unpacked for the set's own F16 / BF16 panel: its bits on the plain rows
              std::vector<float> plain(want.size());
              internal::MatmulWith(*ks, x.data(), m, k, w.data(), type, n, b, plain.data());
              ASSERT_EQ(std::memcmp(plain.data(), got.data(), 4 * got.size()), 0);
              for (size_t e = 0; e < got.size(); ++e) {
                ASSERT_NEAR(got[e], want[e], 1e-4f * (1.0f + std::fabs(want[e]))) << e;
              }
            }
          }
        }
      }
    }
  }
  if (!native)
    GTEST_SKIP() << "no kernel set here reads the row panels (the AVX-512 and AVX2 ones do)";
}

// The panels' software prefetch distances (g_prefetch: f16_packed for tiles of up to 6 rows,
// f16_panels_wide for 8 and more, f16_packed_l2) are hints: with none, 2, 4 and 8 KiB ahead,
// past the weights' end too, every tile height still gives the chain's bits.
TEST(F16RowPanels, PrefetchDistancesMoveNoBits) {
  const int k = 300, n = 80;  // 5 panels: a call of 4 and one of 1
  const auto w = Random16(DType::kF16, static_cast<size_t>(n) * k, 21);
  const auto p = Panels(w, n, k);
  const internal::PrefetchDistances saved = internal::g_prefetch;
  bool native = false;
  for (const int m : {1, 4, 8, 16, 33}) {
    const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 7 + m, -2.0f, 2.0f);
    const auto want = ChainReference(DType::kF16, x, w, m, n, k, nullptr);
    for (const uintptr_t ahead :
         {uintptr_t{0}, uintptr_t{2048}, uintptr_t{4096}, uintptr_t{8192}}) {
      internal::g_prefetch.f16_packed = ahead;
      internal::g_prefetch.f16_panels_wide = ahead;
      internal::g_prefetch.f16_packed_l2 = ahead;
      for (const auto* ks : Isas()) {
        if (ks->f16_row_panels == nullptr) continue;
        native = true;
        std::vector<float> got(want.size(), -1.0f);
        internal::MatmulWith(*ks, x.data(), m, k, p.data(), DType::kF16RowPanels, n, nullptr,
                             got.data());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * want.size()), 0)
            << ks->isa << " m=" << m << " prefetching " << ahead << " bytes ahead";
      }
    }
  }
  internal::g_prefetch = saved;
  if (!native)
    GTEST_SKIP() << "no kernel set here reads the row panels (the AVX-512 and AVX2 ones do)";
}

// In one call with jobs of other layouts (and their own input forms), each job has its own bits.
TEST(F16RowPanels, SameInputJobsKeepTheirBits) {
  const int m = 5, k = 96, n = 80, n2 = 24;
  const auto w = Random16(DType::kF16, static_cast<size_t>(n) * k, 21);
  const auto p = Panels(w, n, k);
  const auto w2 = Random16(DType::kBF16, static_cast<size_t>(n2) * k, 22);
  const auto p2 = Panels(w2, n2, k);
  const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 23);
  for (const auto* ks : Isas()) {
    SCOPED_TRACE(ks->isa);
    std::vector<float> y(static_cast<size_t>(m) * n), y2(static_cast<size_t>(m) * n2), y3(y.size());
    const MatmulJob jobs[] = {{p.data(), DType::kF16RowPanels, n, nullptr, y.data()},
                              {p2.data(), DType::kBF16RowPanels, n2, nullptr, y2.data()},
                              {w.data(), DType::kF16, n, nullptr, y3.data()}};
    internal::MatmulSameInputWith(*ks, x.data(), m, k, jobs, 3);
    std::vector<float> alone(y.size()), alone2(y2.size()), alone3(y3.size());
    internal::MatmulWith(*ks, x.data(), m, k, p.data(), DType::kF16RowPanels, n, nullptr,
                         alone.data());
    internal::MatmulWith(*ks, x.data(), m, k, p2.data(), DType::kBF16RowPanels, n2, nullptr,
                         alone2.data());
    internal::MatmulWith(*ks, x.data(), m, k, w.data(), DType::kF16, n, nullptr, alone3.data());
    EXPECT_EQ(std::memcmp(y.data(), alone.data(), 4 * y.size()), 0);
    EXPECT_EQ(std::memcmp(y2.data(), alone2.data(), 4 * y2.size()), 0);
    EXPECT_EQ(std::memcmp(y3.data(), alone3.data(), 4 * y3.size()), 0);
  }
}

TEST(F16RowPanels, CpuBackendLaysOutF16AndBf16AsPanelsOnTheAvx512AndAvx2Sets) {
  Backend& cpu = CpuBackend();
  const int n = 37, k = 520, m = 3;
  const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 4);
  struct Restore {
    ~Restore() {
      ::unsetenv("LLM_F16_ROW_PANELS");
      (void)SelectMatmulIsa("auto");
    }
  } restore;
  int ran = 0;
  for (const char* isa : {"avx512", "avx2-fma"}) {
    if (!SelectMatmulIsa(isa).ok()) continue;   // this CPU lacks the set
    if (MatmulFloatTilesMinM() != 0) continue;  // F16 on AMX tiles (LLM_AMX_F16): the groups of 4
    ++ran;
    for (const auto [type, panels_type] : kTypes) {
      SCOPED_TRACE(std::string(isa) + " " + DTypeName(type));
      const auto w = Random16(type, static_cast<size_t>(n) * k, 9);
      Weight panels{w.data(), type, n, k};
      auto buf = cpu.PrepareMatmulWeight(panels);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      EXPECT_EQ(panels.format, panels_type);
      EXPECT_EQ(std::memcmp(panels.data, Panels(w, n, k).data(), 2 * w.size()), 0);
      std::vector<float> got(static_cast<size_t>(m) * n);
      cpu.Matmul(x.data(), m, panels, nullptr, got.data());
      const auto want = ChainReference(type, x, w, m, n, k, nullptr);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * got.size()), 0);

      ::setenv("LLM_F16_ROW_PANELS", "0", 1);
      Weight groups{w.data(), type, n, k};
      auto packed = cpu.PrepareMatmulWeight(groups);
      ::unsetenv("LLM_F16_ROW_PANELS");
      ASSERT_TRUE(packed.ok());
      EXPECT_EQ(groups.format, type == DType::kF16 ? DType::kF16Packed : DType::kBF16Packed);
    }
  }
  if (ran == 0) {
    GTEST_SKIP() << "this CPU has neither an AVX-512 (F, BW, VL) nor an AVX2 kernel set, or "
                    "F16 runs on AMX tiles here (LLM_AMX_F16), which read the groups of 4";
  }
}

}  // namespace
}  // namespace llm::kernels
