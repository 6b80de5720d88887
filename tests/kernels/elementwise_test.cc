// RmsNorm, Rope, gated activations, Embedding, Softmax and ReshapeAndCache against references.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_ops.h"
#include "kernels/reference_ops.h"

namespace llm::kernels {
namespace {

std::vector<float> RandomVec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float rel,
                 float abs) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], abs + rel * std::fabs(want[i])) << "at " << i;
  }
}

TEST(RmsNormTest, MatchesReferenceAndInPlace) {
  const int rows = 7, dim = 4099;
  auto x = RandomVec(rows * dim, 1, -3, 3);
  auto w = RandomVec(dim, 2);
  for (float offset : {0.0f, 1.0f}) {
    std::vector<float> got(x.size()), want(x.size());
    RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, offset, got.data());
    ref::RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, offset, want.data());
    ExpectClose(got, want, 1e-6f, 1e-6f);
    std::vector<float> inplace = x;
    RmsNorm(inplace.data(), w.data(), rows, dim, 1e-6f, offset, inplace.data());
    EXPECT_EQ(0, std::memcmp(inplace.data(), got.data(), sizeof(float) * got.size()));
    std::vector<float> one(dim);  // row 5 alone, bitwise
    RmsNorm(x.data() + 5 * dim, w.data(), 1, dim, 1e-6f, offset, one.data());
    EXPECT_EQ(0, std::memcmp(one.data(), got.data() + 5 * dim, sizeof(float) * dim));
  }
}

TEST(RopeTest, MatchesReferenceBothLayouts) {
  const int tokens = 5, heads = 3, head_dim = 64;
  const int32_t positions[tokens] = {0, 1, 17, 1000, 32767};
  for (int rotary_dim : {64, 32}) {
    std::vector<float> inv_freq(rotary_dim / 2);
    for (int i = 0; i < rotary_dim / 2; ++i) {
      inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rotary_dim));
    }
    for (bool interleaved : {false, true}) {
      auto x = RandomVec(tokens * heads * head_dim, 3);
      auto got = x, want = x;
      Rope(got.data(), positions, tokens, heads, head_dim, rotary_dim, inv_freq.data(),
           interleaved);
      ref::Rope(want.data(), positions, tokens, heads, head_dim, rotary_dim, inv_freq.data(),
                interleaved);
      ExpectClose(got, want, 1e-5f, 2e-6f);
      for (int t = 0; t < tokens * heads; ++t) {  // dims past rotary_dim are untouched
        for (int d = rotary_dim; d < head_dim; ++d) {
          ASSERT_EQ(got[t * head_dim + d], x[t * head_dim + d]);
        }
      }
    }
  }
}

TEST(ActivationTest, SiluAndGeluMatchReference) {
  const int tokens = 3, inter = 1001;
  auto gu = RandomVec(tokens * 2 * inter, 4, -8, 8);
  std::vector<float> got(tokens * inter), want(tokens * inter);
  SiluAndMul(gu.data(), tokens, inter, got.data());
  ref::SiluAndMul(gu.data(), tokens, inter, want.data());
  ExpectClose(got, want, 2e-6f, 1e-6f);
  GeluTanhAndMul(gu.data(), tokens, inter, got.data());
  ref::GeluTanhAndMul(gu.data(), tokens, inter, want.data());
  ExpectClose(got, want, 2e-6f, 1e-6f);
}

TEST(EmbeddingTest, AllDtypesWithScale) {
  const int vocab = 11, dim = 37, tokens = 5;
  const int32_t ids[tokens] = {3, 0, 10, -1, 11};  // the last two are out of range: zero rows
  auto tf = RandomVec(vocab * dim, 5);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<uint8_t> table(vocab * dim * DTypeSize(t));
    for (int i = 0; i < vocab * dim; ++i) {
      if (t == DType::kF32) {
        std::memcpy(table.data() + 4 * i, &tf[i], 4);
      } else {
        uint16_t h = t == DType::kF16 ? F32ToF16(tf[i]) : F32ToBf16(tf[i]);
        std::memcpy(table.data() + 2 * i, &h, 2);
      }
    }
    std::vector<float> got(tokens * dim, 5.0f), want(tokens * dim);
    Embedding(ids, tokens, table.data(), t, vocab, dim, 7.5f, got.data());
    ref::Embedding(ids, tokens, table.data(), t, vocab, dim, 7.5f, want.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size())) << DTypeName(t);
    EXPECT_EQ(got[3 * dim + 4], 0.0f);
    EXPECT_EQ(got[4 * dim], 0.0f);
  }
}

TEST(SoftmaxTest, MatchesReferenceWithInfinities) {
  const int rows = 4, cols = 333;
  auto x = RandomVec(rows * cols, 6, -20, 20);
  const float inf = std::numeric_limits<float>::infinity();
  x[cols + 5] = -inf;                                     // masked entry
  for (int i = 0; i < cols; ++i) x[2 * cols + i] = -inf;  // fully masked row: zeros
  auto got = x, want = x;
  Softmax(got.data(), rows, cols);
  ref::Softmax(want.data(), rows, cols);
  ExpectClose(got, want, 1e-5f, 1e-7f);
  EXPECT_EQ(got[cols + 5], 0.0f);
  for (int i = 0; i < cols; ++i) EXPECT_EQ(got[2 * cols + i], 0.0f);
}

TEST(ReshapeAndCacheTest, ScattersAndSkipsNegativeSlots) {
  const int tokens = 4, kv_heads = 2, head_dim = 8, block_size = 4, blocks = 3;
  const int row = kv_heads * head_dim;
  auto k = RandomVec(tokens * row, 7);
  auto v = RandomVec(tokens * row, 8);
  const int32_t slots[tokens] = {9, -1, 0, 7};
  std::vector<float> kc(blocks * block_size * row, 3.0f), vc = kc;
  auto kc_ref = kc, vc_ref = vc;
  ReshapeAndCache(k.data(), v.data(), tokens, kv_heads, head_dim, slots, block_size, kc.data(),
                  vc.data());
  ref::ReshapeAndCache(k.data(), v.data(), tokens, kv_heads, head_dim, slots, block_size,
                       kc_ref.data(), vc_ref.data());
  EXPECT_EQ(kc, kc_ref);
  EXPECT_EQ(vc, vc_ref);
  EXPECT_EQ(0, std::memcmp(kc.data() + 9 * row, k.data(), sizeof(float) * row));
  EXPECT_EQ(0, std::memcmp(vc.data() + 7 * row, v.data() + 3 * row, sizeof(float) * row));
  int untouched = 0;
  for (float f : kc) untouched += f == 3.0f;
  EXPECT_EQ(untouched, (blocks * block_size - 3) * row);
}

}  // namespace
}  // namespace llm::kernels
