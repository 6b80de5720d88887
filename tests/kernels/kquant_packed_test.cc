// Q3_K with its high bits in bit planes (DType::kQ3_KPacked, kernels/cpu/kquant_packed.h):
// packing is a bijection that puts each element's high bit at its own bit and each scale in its
// own 6-bit field, and leaves qs and d as they are; a matmul on packed rows gives bitwise Q3_K's
// result (the scalar reference on ggml's layout) on every kernel set (AVX-512 reads it natively,
// AVX2 and scalar unpack it), for GEMV and GEMM shapes, alone and beside another format in one
// call; the CPU backend packs Q3_K where its kernel set reads the packed layout, and not with
// LLM_PACK_WEIGHTS=0.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

using internal::BlockQ3_K;

std::vector<uint8_t> Q3KMatrix(int n, int k, uint32_t seed) {
  const auto f = testing::RandomFloats(static_cast<size_t>(n) * k, seed, -0.05f, 0.05f);
  std::vector<uint8_t> q(RowBytes(DType::kQ3_K, k) * n);
  QuantizeRows(DType::kQ3_K, f.data(), n, k, q.data());
  return q;
}

std::vector<uint8_t> Packed(const std::vector<uint8_t>& q) {
  std::vector<uint8_t> p(q.size());
  internal::PackQ3KBlocks(q.data(), static_cast<int64_t>(q.size() / sizeof(BlockQ3_K)), p.data());
  return p;
}

std::vector<const internal::MatmulKernels*> Isas() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int n = internal::AvailableMatmulKernels(avail);
  return {avail, avail + n};
}

TEST(Q3KPacked, PackingIsABijectionThatMovesTheHighBitsAndScales) {
  static_assert(sizeof(BlockQ3_K) == 110);
  EXPECT_EQ(BlockBytes(DType::kQ3_KPacked), BlockBytes(DType::kQ3_K));
  EXPECT_EQ(BlockSize(DType::kQ3_KPacked), 256);
  EXPECT_TRUE(IsKQuant(DType::kQ3_KPacked));
  EXPECT_EQ(internal::PackedLayoutOf(DType::kQ3_K), DType::kQ3_KPacked);
  EXPECT_EQ(internal::FileFormatOf(DType::kQ3_KPacked), DType::kQ3_K);
  const int blocks = 37;
  std::vector<uint8_t> q(blocks * sizeof(BlockQ3_K));
  FillRandomBlocks(DType::kQ3_K, 11, q.data(), blocks);
  const auto p = Packed(q);
  ASSERT_NE(p, q);
  const auto* a = reinterpret_cast<const BlockQ3_K*>(q.data());
  const auto* b = reinterpret_cast<const BlockQ3_K*>(p.data());
  for (int i = 0; i < blocks; ++i) {
    ASSERT_EQ(std::memcmp(a[i].qs, b[i].qs, sizeof(a[i].qs)), 0);
    for (int g = 0; g < 16; ++g) {
      // ggml: low 4 bits in byte g % 8 (nibble g / 8), high 2 at bits 2 (g / 4) of byte
      // 8 + g % 4; packed: bits 6g .. 6g + 5 of the 12 bytes
      const int want = ((a[i].scales[g % 8] >> (4 * (g / 8))) & 0xF) |
                       ((a[i].scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4;
      uint16_t two = b[i].scales[6 * g / 8];
      if (6 * g / 8 + 1 < 12) two |= static_cast<uint16_t>(b[i].scales[6 * g / 8 + 1] << 8);
      ASSERT_EQ((two >> (6 * g % 8)) & 0x3F, want) << "block " << i << " scale " << g;
    }
    ASSERT_EQ(a[i].d, b[i].d);
    for (int e = 0; e < 256; ++e) {
      // ggml: bit e / 32 of hmask[e % 32]; packed: chunk c = e / 32 in the 32-bit word
      // 2 (c % 4) + c / 4 (chunks 0 4 1 5 2 6 3 7), its elements in order, so the 64-bit word j
      // holds chunks j and j + 4.
      const int want = (a[i].hmask[e % 32] >> (e / 32)) & 1;
      const int c = e / 32, at = 2 * (c % 4) + c / 4;
      uint32_t word;
      std::memcpy(&word, b[i].hmask + 4 * at, 4);
      ASSERT_EQ(static_cast<int>((word >> (e % 32)) & 1), want) << "block " << i << " e " << e;
    }
  }
  std::vector<uint8_t> back(q.size());
  internal::UnpackQ3KBlocks(p.data(), blocks, back.data());
  EXPECT_EQ(back, q);
}

TEST(Q3KPacked, MatmulGivesTheBitsOfQ3KOnEveryKernelSet) {
  const internal::MatmulKernels& scalar = internal::ScalarMatmulKernels();
  const std::vector<const internal::MatmulKernels*> isas = Isas();
  struct Shape {
    int m, n, k;
  };
  // GEMV (the AVX-512 rows) and GEMM tiles, panels with and without a tail of rows.
  for (const Shape s : {Shape{1, 37, 2048}, Shape{1, 16, 256}, Shape{2, 24, 512}, Shape{5, 19, 768},
                        Shape{16, 33, 1024}}) {
    const auto q = Q3KMatrix(s.n, s.k, 3 + s.m);
    const auto p = Packed(q);
    const auto x = testing::RandomFloats(static_cast<size_t>(s.m) * s.k, 9 + s.n);
    const auto bias = testing::RandomFloats(s.n, 4);
    std::vector<float> ref(static_cast<size_t>(s.m) * s.n), got(ref.size());
    internal::MatmulWith(scalar, x.data(), s.m, s.k, q.data(), DType::kQ3_K, s.n, bias.data(),
                         ref.data());
    const std::vector<uint8_t> q4(RowBytes(DType::kQ4_K, s.k) * 5, 0x11);
    for (const internal::MatmulKernels* ks : isas) {
      std::fill(got.begin(), got.end(), -1.0f);
      internal::MatmulWith(*ks, x.data(), s.m, s.k, p.data(), DType::kQ3_KPacked, s.n, bias.data(),
                           got.data());
      ASSERT_EQ(std::memcmp(ref.data(), got.data(), 4 * got.size()), 0)
          << ks->isa << " m " << s.m << " n " << s.n << " k " << s.k;
      // Beside Q4_K (paired chunks at m = 1 on AVX-512) and Q3_K in one call.
      std::vector<float> y2(ref.size()), y3(ref.size()), other(static_cast<size_t>(s.m) * 5);
      const MatmulJob jobs[] = {{q4.data(), DType::kQ4_K, 5, nullptr, other.data()},
                                {p.data(), DType::kQ3_KPacked, s.n, bias.data(), y2.data()},
                                {q.data(), DType::kQ3_K, s.n, bias.data(), y3.data()}};
      internal::MatmulSameInputWith(*ks, x.data(), s.m, s.k, jobs, 3);
      ASSERT_EQ(std::memcmp(ref.data(), y2.data(), 4 * y2.size()), 0) << ks->isa << " m " << s.m;
      ASSERT_EQ(std::memcmp(ref.data(), y3.data(), 4 * y3.size()), 0) << ks->isa << " m " << s.m;
    }
  }
}

TEST(Q3KPacked, CpuBackendPacksQ3KWhereItsKernelsReadIt) {
  Backend& cpu = CpuBackend();
  const int n = 24, k = 1024;
  const auto q = Q3KMatrix(n, k, 5);
  const auto x = testing::RandomFloats(3 * k, 8);
  std::vector<float> want(3 * n), got(3 * n);
  Weight w{q.data(), DType::kQ3_K, n, k};
  cpu.Matmul(x.data(), 3, w, nullptr, want.data());
  auto buf = cpu.PrepareMatmulWeight(w);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  if (MatmulPackedFormat(DType::kQ3_K) == DType::kQ3_K) {
    EXPECT_EQ(buf->data(), nullptr);
    GTEST_SKIP() << "the kernel set in use (" << MatmulIsa() << ") reads Q3_K as it is";
  }
  ASSERT_NE(buf->data(), nullptr);
  EXPECT_EQ(w.format, DType::kQ3_KPacked);
  EXPECT_EQ(std::memcmp(w.data, Packed(q).data(), q.size()), 0);
  cpu.Matmul(x.data(), 3, w, nullptr, got.data());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * got.size()), 0);
  cpu.Matmul(x.data(), 1, w, nullptr, got.data());  // the GEMV row: the first output row's bits
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * n), 0);

  ::setenv("LLM_PACK_WEIGHTS", "0", 1);
  Weight off{q.data(), DType::kQ3_K, n, k};
  auto kept = cpu.PrepareMatmulWeight(off);
  ::unsetenv("LLM_PACK_WEIGHTS");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->data(), nullptr);
  EXPECT_EQ(off.format, DType::kQ3_K);
}

}  // namespace
}  // namespace llm::kernels
