// F16 / BF16 rows interleaved in groups of 4 (kernels/cpu/f16_packed.h, DType::kF16Packed,
// kBF16Packed): packing puts
// every weight where the layout says and is undone by unpacking, for row counts with and without
// a partial last group and column counts with and without a tail after the last 8-weight chunk;
// a matmul on the packed rows gives bitwise the F16 / BF16 result of the same kernel set (the AVX2
// and AVX-512 sets read them natively, the scalar one unpacks per panel) for GEMV and GEMM
// shapes, close to a float64 reference; the CPU backend packs F16 and BF16 matmul weights when
// the AVX2 or AVX-512 set is in use with LLM_F16_ROW_PANELS=0, and not when
// LLM_PACK_WEIGHTS=0 or on the scalar set.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/cpu/f16_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

constexpr DType kTypes[2][2] = {{DType::kF16, DType::kF16Packed},
                                {DType::kBF16, DType::kBF16Packed}};

std::vector<uint16_t> Random16(DType t, size_t n, uint32_t seed) {
  return testing::Random16(t, n, seed, -0.1f, 0.1f);
}

float Widen(DType t, uint16_t h) {
  return testing::Widen16(t, h);
}

std::vector<uint16_t> Pack(const std::vector<uint16_t>& w, int n, int k) {
  std::vector<uint16_t> p(w.size());
  internal::PackF16Rows(w.data(), n, k, p.data());
  return p;
}

// Where the header says weight (row, col) goes, written out from its text.
size_t PackedIndex(int n, int k, int row, int col) {
  const int g = row / 4 * 4, r = std::min(4, n - g), i = row - g;
  const int k8 = k / 8 * 8, t = k - k8;
  const size_t base = static_cast<size_t>(g) * k;
  if (col < k8) return base + static_cast<size_t>(col / 8) * 8 * r + 8 * i + col % 8;
  return base + static_cast<size_t>(k8) * r + static_cast<size_t>(i) * t + (col - k8);
}

TEST(F16Packed, PackingPutsEveryWeightWhereTheLayoutSaysAndUnpackingUndoesIt) {
  for (int n : {1, 3, 4, 5, 8, 9, 18}) {
    for (int k : {1, 7, 8, 13, 64, 67}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      std::vector<uint16_t> w(static_cast<size_t>(n) * k);
      for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(i + 1);
      const auto p = Pack(w, n, k);
      std::vector<bool> hit(p.size(), false);
      for (int row = 0; row < n; ++row) {
        for (int col = 0; col < k; ++col) {
          const size_t at = PackedIndex(n, k, row, col);
          ASSERT_LT(at, p.size());
          EXPECT_FALSE(hit[at]);
          hit[at] = true;
          EXPECT_EQ(p[at], w[static_cast<size_t>(row) * k + col]) << row << "," << col;
        }
      }
      std::vector<uint16_t> back(w.size());
      internal::UnpackF16Rows(p.data(), n, k, back.data());
      EXPECT_EQ(back, w);
    }
  }
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

TEST(F16Packed, MatmulGivesTheBitsOfF16AndBf16OnEveryKernelSet) {
  bool native = false;
  for (const auto [type, packed_type] : kTypes) {
    for (const int k : {8, 13, 64, 67, 264}) {
      for (const int n : {1, 4, 7, 16, 18, 33, 70}) {
        const auto w = Random16(type, static_cast<size_t>(n) * k, 11 + n + k);
        const auto p = Pack(w, n, k);
        const auto bias = testing::RandomFloats(n, 5);
        for (const int m : {1, 2, 3, 17, 40}) {  // 40: tiles of 6 over chunks of 18, then 4
          const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 3 + m);
          for (const auto* ks : Isas()) {
            SCOPED_TRACE(std::string(DTypeName(type)) + " " + ks->isa + " m=" + std::to_string(m) +
                         " n=" + std::to_string(n) + " k=" + std::to_string(k));
            native = native || ks->f16_packed != nullptr;
            for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
              std::vector<float> want(static_cast<size_t>(m) * n), got(want.size(), -1.0f);
              internal::MatmulWith(*ks, x.data(), m, k, w.data(), type, n, b, want.data());
              internal::MatmulWith(*ks, x.data(), m, k, p.data(), packed_type, n, b, got.data());
              ASSERT_EQ(std::memcmp(want.data(), got.data(), 4 * want.size()), 0);
              for (int i = 0; i < m; ++i) {
                for (int j = 0; j < n; ++j) {
                  double ref = b != nullptr ? b[j] : 0.0;
                  for (int c = 0; c < k; ++c) {
                    ref += static_cast<double>(x[static_cast<size_t>(i) * k + c]) *
                           Widen(type, w[static_cast<size_t>(j) * k + c]);
                  }
                  ASSERT_NEAR(got[static_cast<size_t>(i) * n + j], ref, 1e-5) << i << "," << j;
                }
              }
            }
          }
        }
      }
    }
  }
  if (!native) GTEST_SKIP() << "no kernel set here reads the packed rows natively (AVX2 does)";
}

TEST(F16Packed, CpuBackendPacksF16AndBf16OnTheSimdSets) {
  Backend& cpu = CpuBackend();
  const int n = 37, k = 520, m = 3;
  const auto x = testing::RandomFloats(static_cast<size_t>(m) * k, 4);
  struct Restore {
    ~Restore() { (void)SelectMatmulIsa("auto"); }
  } restore;
  // (F16 on the AVX-512 and AVX2 sets goes into panels of 16 unless LLM_F16_ROW_PANELS=0: see
  // f16_row_panels_test.cc)
  ::setenv("LLM_F16_ROW_PANELS", "0", 1);
  struct NoPanels {
    ~NoPanels() { ::unsetenv("LLM_F16_ROW_PANELS"); }
  } no_panels;
  int sets = 0;
  for (const char* isa : {"avx2-fma", "avx512"}) {
    if (!SelectMatmulIsa(isa).ok()) continue;  // this CPU lacks it
    ++sets;
    for (const auto [type, packed_type] : kTypes) {
      SCOPED_TRACE(std::string(isa) + " " + DTypeName(type));
      ASSERT_TRUE(SelectMatmulIsa(isa).ok());
      const auto w = Random16(type, static_cast<size_t>(n) * k, 9);
      std::vector<float> want(static_cast<size_t>(m) * n), got(want.size());
      Weight plain{w.data(), type, n, k};
      cpu.Matmul(x.data(), m, plain, nullptr, want.data());
      Weight packed{w.data(), type, n, k};
      auto buf = cpu.PrepareMatmulWeight(packed);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      ASSERT_NE(buf->data(), nullptr);
      EXPECT_EQ(packed.format, packed_type);
      EXPECT_EQ(packed.data, buf->data());
      EXPECT_EQ(std::memcmp(packed.data, Pack(w, n, k).data(), 2 * w.size()), 0);
      cpu.Matmul(x.data(), m, packed, nullptr, got.data());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * got.size()), 0);

      ::setenv("LLM_PACK_WEIGHTS", "0", 1);
      Weight off{w.data(), type, n, k};
      auto kept = cpu.PrepareMatmulWeight(off);
      ::unsetenv("LLM_PACK_WEIGHTS");
      ASSERT_TRUE(kept.ok());
      EXPECT_EQ(kept->data(), nullptr);
      EXPECT_EQ(off.format, type);

      ASSERT_TRUE(SelectMatmulIsa("scalar").ok());  // a set without the packed panels
      Weight scalar{w.data(), type, n, k};
      auto none = cpu.PrepareMatmulWeight(scalar);
      ASSERT_TRUE(none.ok());
      EXPECT_EQ(none->data(), nullptr);
      EXPECT_EQ(scalar.format, type);
    }
  }
  if (sets == 0) GTEST_SKIP() << "this CPU has neither the AVX2 nor the AVX-512 kernel set";
}

}  // namespace
}  // namespace llm::kernels
