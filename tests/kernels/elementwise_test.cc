// RmsNorm, Rope, the gated activation, Embedding, row ops and ReshapeAndCache against references.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.h"
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
  std::vector<float> got(x.size()), want(x.size());
  RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, got.data());
  ref::RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, want.data());
  ExpectClose(got, want, 1e-6f, 1e-6f);
  std::vector<float> inplace = x;
  RmsNorm(inplace.data(), w.data(), rows, dim, 1e-6f, inplace.data());
  EXPECT_EQ(0, std::memcmp(inplace.data(), got.data(), sizeof(float) * got.size()));
  std::vector<float> one(dim);  // row 5 alone, bitwise
  RmsNorm(x.data() + 5 * dim, w.data(), 1, dim, 1e-6f, one.data());
  EXPECT_EQ(0, std::memcmp(one.data(), got.data() + 5 * dim, sizeof(float) * dim));
}

// The fused residual add + norm gives bitwise what the two separate ops give.
TEST(RmsNormTest, FusedAddIsBitwiseAddThenNorm) {
  const int rows = 5, dim = 2053;
  auto residual = RandomVec(rows * dim, 11, -3, 3);
  auto x = RandomVec(rows * dim, 12, -3, 3);
  auto w = RandomVec(dim, 13);
  auto fused_res = residual, split_res = residual;
  std::vector<float> fused(rows * dim), split(rows * dim);
  AddRmsNorm(fused_res.data(), x.data(), w.data(), rows, dim, 1e-5f, fused.data());
  Add(split_res.data(), x.data(), static_cast<int64_t>(rows) * dim);
  RmsNorm(split_res.data(), w.data(), rows, dim, 1e-5f, split.data());
  EXPECT_EQ(0, std::memcmp(fused_res.data(), split_res.data(), sizeof(float) * split.size()));
  EXPECT_EQ(0, std::memcmp(fused.data(), split.data(), sizeof(float) * split.size()));
  for (int i = 0; i < rows * dim; ++i) ASSERT_EQ(fused_res[i], residual[i] + x[i]) << i;
}

TEST(RopeTest, MatchesReference) {
  const int tokens = 5, heads = 3;
  const int32_t positions[tokens] = {0, 1, 17, 1000, 32767};
  // Whole heads, partial rotary (GLM, Phi-4-mini) and interleaved pairs (GLM).
  const RopeLayout layouts[] = {{64, 64, false},        {128, 128, false},   {32, 32, false},
                                {128, 64, true},        {96, 64, false},     {32, 32, true},
                                {96, 64, false, 1.25f}, {64, 32, true, 0.5f}};
  for (const RopeLayout& layout : layouts) {
    const int head_dim = layout.head_dim, rot = layout.rotary_dim;
    std::vector<float> inv_freq(rot / 2);
    for (int i = 0; i < rot / 2; ++i) {
      inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rot));
    }
    auto x = RandomVec(tokens * heads * head_dim, 3);
    auto got = x, want = x;
    Rope(got.data(), positions, tokens, heads, layout, inv_freq.data());
    ref::Rope(want.data(), positions, tokens, heads, layout, inv_freq.data());
    ExpectClose(got, want, 1e-5f, 2e-6f);
    for (int d = 0; d < head_dim; ++d) {  // position 0: the rotated lanes scale by mscale
      ASSERT_EQ(got[d], d < rot ? x[d] * layout.mscale : x[d]);
    }
    for (int t = 0; t < tokens; ++t) {  // lanes past rotary_dim pass through
      for (int h = 0; h < heads; ++h) {
        for (int d = rot; d < head_dim; ++d) {
          const size_t i = (static_cast<size_t>(t) * heads + h) * head_dim + d;
          ASSERT_EQ(got[i], x[i]);
        }
      }
    }
  }
  // Interleaved by hand: lanes (0, 1) rotate by position * inv_freq[0] = 1 radian.
  std::vector<float> v = {1.0f, 0.0f, 5.0f, 7.0f};
  const int32_t one = 1;
  const float freq[] = {1.0f, 0.0f};
  Rope(v.data(), &one, 1, 1, RopeLayout{4, 4, true}, freq);
  EXPECT_NEAR(v[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(v[1], std::sin(1.0), 1e-6);
  EXPECT_EQ(v[2], 5.0f);
  EXPECT_EQ(v[3], 7.0f);
}

TEST(ActivationTest, SiluMulMatchesReference) {
  const int64_t count = 3 * 1001;
  auto gate = RandomVec(count, 4, -8, 8);
  auto up = RandomVec(count, 14, -8, 8);
  std::vector<float> got(count), want(count);
  SiluMul(gate.data(), up.data(), count, got.data());
  ref::SiluMul(gate.data(), up.data(), count, want.data());
  ExpectClose(got, want, 2e-6f, 1e-6f);
}

// The activations run vectorized (and on the team above 32768 elements): each element must still
// be its own function, the same bits whether computed in a long parallel run, in the loop's vector
// body or alone, and close to the double reference at the ends of exp's range.
TEST(ActivationTest, ElementsAreTheSameBitsAloneAndInALongRun) {
  const int64_t count = 40000 + 13;
  auto gate = RandomVec(count, 6, -12, 12);
  auto up = RandomVec(count, 16, -4, 4);
  const float edges[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 87.0f,
                         -87.0f, 88.5f, -88.5f, 100.0f,  -100.0f};
  for (size_t i = 0; i < std::size(edges); ++i) gate[i * 997] = edges[i];
  for (bool gelu : {false, true}) {
    auto act = gelu ? GeluTanhMul : SiluMul;
    auto ref_act = gelu ? ref::GeluTanhMul : ref::SiluMul;
    std::vector<float> run(count), want(count);
    act(gate.data(), up.data(), count, run.data());
    ref_act(gate.data(), up.data(), count, want.data());
    ExpectClose(run, want, 2e-6f, 1e-6f);
    for (int64_t i = 0; i < count; i += 7) {
      float alone = 0;
      act(&gate[i], &up[i], 1, &alone);
      uint32_t a, b;
      std::memcpy(&a, &alone, 4);
      std::memcpy(&b, &run[i], 4);
      ASSERT_EQ(a, b) << (gelu ? "gelu" : "silu") << " element " << i << " gate " << gate[i];
    }
  }
}

TEST(ActivationTest, GeluTanhMulMatchesReference) {
  const int64_t count = 3 * 1001;
  auto gate = RandomVec(count, 5, -8, 8);
  auto up = RandomVec(count, 15, -8, 8);
  std::vector<float> got(count), want(count);
  GeluTanhMul(gate.data(), up.data(), count, got.data());
  ref::GeluTanhMul(gate.data(), up.data(), count, want.data());
  ExpectClose(got, want, 2e-6f, 1e-6f);
  // gelu_tanh(1) = 0.8411920...
  const float one = 1.0f, unit = 1.0f;
  float y = 0;
  GeluTanhMul(&one, &unit, 1, &y);
  EXPECT_NEAR(y, 0.841192f, 1e-6f);
}

TEST(ElementwiseTest, AddBiasAndGatherRows) {
  const int rows = 6, cols = 37;
  auto x = RandomVec(rows * cols, 15);
  auto bias = RandomVec(cols, 16);
  auto got = x;
  AddBias(got.data(), bias.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) ASSERT_EQ(got[r * cols + c], x[r * cols + c] + bias[c]);
  }
  const int32_t pick[3] = {5, 0, 5};
  std::vector<float> gathered(3 * cols);
  GatherRows(x.data(), pick, 3, cols, gathered.data());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(0, std::memcmp(gathered.data() + i * cols, x.data() + pick[i] * cols,
                             sizeof(float) * cols));
  }
}

TEST(EmbeddingTest, AllDtypesAndShardOffsets) {
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
    Embedding(ids, tokens, table.data(), t, vocab, dim, 0, got.data());
    ref::Embedding(ids, tokens, table.data(), t, vocab, dim, 0, want.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size())) << DTypeName(t);
    EXPECT_EQ(got[3 * dim + 4], 0.0f);
    EXPECT_EQ(got[4 * dim], 0.0f);
    // A shard holding rows [3, 11): id 3 is its row 0, ids 0 and -1 are foreign (zero rows).
    const size_t row_bytes = static_cast<size_t>(dim) * DTypeSize(t);
    std::vector<float> shard(tokens * dim, 5.0f);
    Embedding(ids, tokens, table.data() + 3 * row_bytes, t, vocab - 3, dim, 3, shard.data());
    EXPECT_EQ(0, std::memcmp(shard.data(), got.data(), sizeof(float) * dim));  // id 3
    EXPECT_EQ(shard[dim], 0.0f);                                               // id 0
    EXPECT_EQ(0, std::memcmp(shard.data() + 2 * dim, got.data() + 2 * dim, sizeof(float) * dim));
  }
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

// A half cache (engine.kv_cache_dtype float16): the same slots, each value rounded to nearest
// even (F32ToF16), out-of-range values to infinity; a negative slot writes nothing.
TEST(ReshapeAndCacheTest, HalfCacheHoldsTheRoundedValues) {
  const int tokens = 4, kv_heads = 2, head_dim = 8, block_size = 4, blocks = 3;
  const int row = kv_heads * head_dim;
  auto k = RandomVec(tokens * row, 17);
  auto v = RandomVec(tokens * row, 18);
  k[3] = 70000.0f;            // past half's range
  v[5] = 1e-6f;               // a half subnormal
  k[0] = 1.0f + 1.0f / 2048;  // a tie between two halves: rounds to the even one, 1.0
  const int32_t slots[tokens] = {9, -1, 0, 7};
  const uint16_t fill = 0x4200;  // 3.0
  std::vector<uint16_t> kc(blocks * block_size * row, fill), vc = kc;
  ReshapeAndCacheF16(k.data(), v.data(), tokens, kv_heads, head_dim, slots, block_size, kc.data(),
                     vc.data());
  std::vector<uint16_t> kw(blocks * block_size * row, fill), vw = kw;
  for (int t = 0; t < tokens; ++t) {
    if (slots[t] < 0) continue;
    for (int i = 0; i < row; ++i) {
      kw[slots[t] * row + i] = F32ToF16(k[t * row + i]);
      vw[slots[t] * row + i] = F32ToF16(v[t * row + i]);
    }
  }
  EXPECT_EQ(kc, kw);
  EXPECT_EQ(vc, vw);
  EXPECT_EQ(kc[9 * row + 3], 0x7c00);                             // +infinity
  EXPECT_EQ(kc[9 * row], 0x3c00);                                 // 1.0
  EXPECT_EQ(F16ToF32(vc[9 * row + 5]), 1.0132789611816406e-06f);  // nearest subnormal
  int untouched = 0;
  for (uint16_t h : kc) untouched += h == fill;
  EXPECT_EQ(untouched, (blocks * block_size - 3) * row);
}

}  // namespace
}  // namespace llm::kernels
