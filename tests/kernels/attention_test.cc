// PagedAttention against the float64 reference (GQA, MQA, block sizes, shuffled block tables,
// sliding window) and its invariance to batch composition and chunking.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.h"
#include "kernels/cpu/attention_kernel.h"
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

struct Seq {
  int context_len;
  int q_len;
};

// A paged cache filled with random K/V, and for each sequence a shuffled list of blocks.
struct Fixture {
  AttentionParams p;
  int num_blocks = 0;
  int max_blocks = 0;
  std::vector<float> k_cache, v_cache;
  std::vector<int32_t> tables;  // [seqs, max_blocks]

  Fixture(const AttentionParams& params, int seqs, int max_ctx, uint32_t seed) : p(params) {
    max_blocks = (max_ctx + p.block_size - 1) / p.block_size;
    num_blocks = seqs * max_blocks + 3;
    size_t sz = static_cast<size_t>(num_blocks) * p.block_size * p.kv_heads * p.head_dim;
    k_cache = RandomVec(sz, seed);
    v_cache = RandomVec(sz, seed + 1);
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(seed + 2));
    tables.assign(perm.begin(), perm.begin() + seqs * max_blocks);
  }

  // Runs `seqs` (each given as its index into the tables) with fast or reference attention.
  // fn == nullptr: the public PagedAttention.
  std::vector<float> Run(const std::vector<Seq>& seqs, const std::vector<int>& table_idx,
                         const std::vector<float>& q, bool reference,
                         internal::AttendFn fn = nullptr) const {
    std::vector<int32_t> qs{0}, ctx, bt;
    for (size_t s = 0; s < seqs.size(); ++s) {
      qs.push_back(qs.back() + seqs[s].q_len);
      ctx.push_back(seqs[s].context_len);
      bt.insert(bt.end(), tables.begin() + table_idx[s] * max_blocks,
                tables.begin() + (table_idx[s] + 1) * max_blocks);
    }
    AttentionBatch b{static_cast<int>(seqs.size()), qs.data(), ctx.data(), bt.data(), max_blocks};
    std::vector<float> out(q.size(), -7.0f);
    if (reference) {
      ref::PagedAttention(q.data(), k_cache.data(), v_cache.data(), b, p, out.data());
    } else if (fn != nullptr) {
      internal::PagedAttentionWith(fn, q.data(), k_cache.data(), v_cache.data(), b, p, out.data());
    } else {
      PagedAttention(q.data(), k_cache.data(), v_cache.data(), b, p, out.data());
    }
    return out;
  }
};

void CheckCase(const AttentionParams& p, const std::vector<Seq>& seqs) {
  SCOPED_TRACE("q_heads=" + std::to_string(p.q_heads) + " kv=" + std::to_string(p.kv_heads) +
               " hd=" + std::to_string(p.head_dim) + " bs=" + std::to_string(p.block_size) +
               " window=" + std::to_string(p.sliding_window));
  int max_ctx = 0, rows = 0;
  for (const Seq& s : seqs) {
    max_ctx = std::max(max_ctx, s.context_len);
    rows += s.q_len;
  }
  Fixture f(p, static_cast<int>(seqs.size()), max_ctx, 11);
  std::vector<int> idx(seqs.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto q = RandomVec(static_cast<size_t>(rows) * p.q_heads * p.head_dim, 12, -2.0f, 2.0f);
  auto want = f.Run(seqs, idx, q, true);
  auto got = f.Run(seqs, idx, q, false);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
  // Every kernel that fuses its multiply-adds gives bitwise the same result (fixed reduction
  // order); the generic kernel built for an x86 without FMA rounds products apart and stays within
  // the reference's tolerance.
  internal::AttendKernel ks[3];
  const int n = internal::AvailableAttendKernels(ks);
  int fused = 0;
  for (int i = 0; i < n; ++i) {
    auto isa = f.Run(seqs, idx, q, false, ks[i].fn);
    if (ks[i].fused && ks[0].fused) {
      ++fused;
      ASSERT_EQ(0, std::memcmp(isa.data(), got.data(), sizeof(float) * got.size())) << ks[i].isa;
    } else {
      for (size_t j = 0; j < isa.size(); ++j) ASSERT_NEAR(isa[j], want[j], 2e-5) << ks[i].isa;
    }
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    EXPECT_GE(fused, 2) << "the AVX-512 and AVX2 kernels both fuse: their bits must be compared";
  }
#endif
}

TEST(PagedAttentionTest, MatchesReference) {
  const std::vector<Seq> mixed = {{1, 1}, {37, 37}, {50, 1}, {20, 9}, {64, 16}, {17, 1}};
  AttentionParams gqa{
      .q_heads = 8, .kv_heads = 2, .head_dim = 64, .block_size = 16, .scale = 0.125f};
  CheckCase(gqa, mixed);
  AttentionParams small_blocks = gqa;
  small_blocks.block_size = 4;
  CheckCase(small_blocks, mixed);
  AttentionParams mqa{
      .q_heads = 4, .kv_heads = 1, .head_dim = 72, .block_size = 16, .scale = 0.11f};
  CheckCase(mqa, mixed);
  AttentionParams window = gqa;
  window.sliding_window = 5;
  CheckCase(window, mixed);
  window.block_size = 4;
  window.sliding_window = 13;
  CheckCase(window, mixed);
  AttentionParams capped = gqa;  // Gemma 2: scores soft-capped, with and without a window
  capped.scale = 0.5f;           // large scores, so that the cap matters
  capped.softcap = 2.0f;
  CheckCase(capped, mixed);
  capped.sliding_window = 8;
  CheckCase(capped, mixed);
  AttentionParams big{.q_heads = 20,
                      .kv_heads = 2,
                      .head_dim = 256,
                      .block_size = 16,
                      .scale = 0.0625f,
                      .sliding_window = 0};
  CheckCase(big, {{33, 3}, {5, 1}});
  // Blocks of more than 16 keys (scores 16 keys at a time, two groups a block), the unrolled
  // head sizes 64 and 128, and a size that is neither (80: dot products with a 16-lane tail).
  for (int hd : {128, 80}) {
    AttentionParams wide{.q_heads = 16,
                         .kv_heads = 4,
                         .head_dim = hd,
                         .block_size = 32,
                         .scale = 0.088f,
                         .sliding_window = 0};
    CheckCase(wide, mixed);
    wide.sliding_window = 21;
    CheckCase(wide, mixed);
  }
  AttentionParams tiny{.q_heads = 3, .kv_heads = 3, .head_dim = 1, .block_size = 1, .scale = 1};
  CheckCase(tiny, {{6, 2}, {3, 3}});
}

// A sequence's rows must be bitwise the same alone, inside a mixed batch, split into chunks
// (7 tokens then the rest), and with 1 or 2 threads.
TEST(PagedAttentionTest, BatchAndChunkInvariantBitwise) {
  AttentionParams p{.q_heads = 8,
                    .kv_heads = 2,
                    .head_dim = 64,
                    .block_size = 16,
                    .scale = 0.125f,
                    .sliding_window = 0};
  for (int window : {0, 10}) {
    p.sliding_window = window;
    Fixture f(p, 4, 60, 21);
    const size_t row = static_cast<size_t>(p.q_heads) * p.head_dim;
    const Seq target{41, 41};  // sequence 2, prefill of its whole prompt
    auto q_target = RandomVec(target.q_len * row, 22);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    auto alone = f.Run({target}, {2}, q_target, false);

    omp_set_num_threads(2);
    // Mixed: a decode row of seq 0, the target, a prefill of seq 3, another decode (seq 1).
    auto q0 = RandomVec(row, 23), q3 = RandomVec(12 * row, 24), q1 = RandomVec(row, 25);
    std::vector<float> q_mixed = q0;
    q_mixed.insert(q_mixed.end(), q_target.begin(), q_target.end());
    q_mixed.insert(q_mixed.end(), q3.begin(), q3.end());
    q_mixed.insert(q_mixed.end(), q1.begin(), q1.end());
    auto mixed = f.Run({{30, 1}, target, {12, 12}, {59, 1}}, {0, 2, 3, 1}, q_mixed, false);
    ASSERT_EQ(0, std::memcmp(alone.data(), mixed.data() + row, sizeof(float) * alone.size()));

    // Chunked: 7 rows with context 7, then 34 rows with context 41 (behind a decode row).
    std::vector<float> q_a(q_target.begin(), q_target.begin() + 7 * row);
    auto chunk_a = f.Run({{7, 7}}, {2}, q_a, false);
    std::vector<float> q_b = q0;
    q_b.insert(q_b.end(), q_target.begin() + 7 * row, q_target.end());
    auto chunk_b = f.Run({{30, 1}, {41, 34}}, {0, 2}, q_b, false);
    ASSERT_EQ(0, std::memcmp(alone.data(), chunk_a.data(), sizeof(float) * chunk_a.size()));
    ASSERT_EQ(0,
              std::memcmp(alone.data() + 7 * row, chunk_b.data() + row, sizeof(float) * 34 * row));
    omp_set_num_threads(saved);
  }
}

// A decode row alone (tasks of one kv head) and inside a batch of many decode rows (tasks of
// several kv heads), with 1 and 2 threads; also MQA with more heads than a task holds.
TEST(PagedAttentionTest, DecodeBatchInvariantBitwise) {
  for (auto [q_heads, kv_heads] : {std::pair{8, 4}, std::pair{40, 1}, std::pair{4, 4}}) {
    AttentionParams p{.q_heads = q_heads,
                      .kv_heads = kv_heads,
                      .head_dim = 48,
                      .block_size = 4,
                      .scale = 0.15f,
                      .sliding_window = 0};
    SCOPED_TRACE(q_heads);
    const int seqs = 12;
    Fixture f(p, seqs, 40, 31);
    const size_t row = static_cast<size_t>(p.q_heads) * p.head_dim;
    auto q = RandomVec(seqs * row, 32);
    std::vector<Seq> batch;
    std::vector<int> idx;
    for (int s = 0; s < seqs; ++s) {
      batch.push_back({5 + 3 * s, 1});
      idx.push_back(s);
    }
    const int saved = omp_get_max_threads();
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      auto all = f.Run(batch, idx, q, false);
      auto want = f.Run(batch, idx, q, true);
      for (size_t i = 0; i < all.size(); ++i) ASSERT_NEAR(all[i], want[i], 2e-5) << i;
      for (int s : {0, 3, 11}) {
        std::vector<float> qs(q.begin() + s * row, q.begin() + (s + 1) * row);
        omp_set_num_threads(3 - threads);
        auto alone = f.Run({batch[s]}, {s}, qs, false);
        omp_set_num_threads(threads);
        ASSERT_EQ(0, std::memcmp(alone.data(), all.data() + s * row, sizeof(float) * row)) << s;
      }
    }
    omp_set_num_threads(saved);
  }
}

// Keys beyond kAttnSegmentKeys are taken in segments whose states are folded; a decode row with
// fewer tasks than threads has its segments computed by several threads. Its output must be
// bitwise that of the row computed whole (1 thread), of the same row at the end of a prefill
// chunk, and of every ISA's kernel; and match the float64 reference. Cases: MQA and GQA, a chunk
// whose rows straddle a segment boundary, a window that skips whole segments, and a context past
// kAttnMaxSegments * kAttnSegmentKeys, where segments grow with the position; and the long row
// in a batch of short ones, where only it is cut.
TEST(PagedAttentionTest, SegmentsSplitAcrossThreadsBitwise) {
  struct Case {
    AttentionParams p;
    int ctx;
  };
  const std::vector<Case> cases = {
      {{.q_heads = 8, .kv_heads = 1, .head_dim = 64, .block_size = 16, .scale = 0.125f}, 700},
      {{.q_heads = 8, .kv_heads = 2, .head_dim = 48, .block_size = 4, .scale = 0.15f}, 1030},
      {{.q_heads = 4,
        .kv_heads = 1,
        .head_dim = 40,
        .block_size = 8,
        .scale = 0.2f,
        .sliding_window = 300},
       1500},
      {{.q_heads = 2, .kv_heads = 1, .head_dim = 16, .block_size = 16, .scale = 0.3f}, 17000},
  };
  static_assert(internal::kAttnSegmentKeys == 256 &&
                internal::kAttnMaxSegments * internal::kAttnSegmentKeys < 17000);
  internal::AttendKernel ks[3];
  const int n = internal::AvailableAttendKernels(ks);
  const int saved = omp_get_max_threads();
  for (const Case& c : cases) {
    const AttentionParams& p = c.p;
    SCOPED_TRACE("kv=" + std::to_string(p.kv_heads) + " ctx=" + std::to_string(c.ctx));
    Fixture f(p, 3, c.ctx, 51);
    const size_t row = static_cast<size_t>(p.q_heads) * p.head_dim;
    const int chunk = 12;  // a prefill chunk ending with the decode row's position
    auto q_chunk = RandomVec(chunk * row, 52, -2.0f, 2.0f);
    const std::vector<float> q_last(q_chunk.end() - row, q_chunk.end());
    omp_set_num_threads(1);
    const auto whole = f.Run({{c.ctx, 1}}, {0}, q_last, false);
    const auto want = f.Run({{c.ctx, 1}}, {0}, q_last, true);
    for (size_t i = 0; i < row; ++i) ASSERT_NEAR(whole[i], want[i], 2e-5) << i;
    std::vector<std::vector<float>> whole_of(n);  // each kernel's row on one thread
    for (int i = 0; i < n; ++i) {
      whole_of[i] = f.Run({{c.ctx, 1}}, {0}, q_last, false, ks[i].fn);
      if (ks[i].fused && ks[0].fused) {
        ASSERT_EQ(0, std::memcmp(whole.data(), whole_of[i].data(), sizeof(float) * row))
            << ks[i].isa;
      }
    }
    for (int threads : {1, 2, 4}) {
      omp_set_num_threads(threads);
      const auto in_chunk = f.Run({{c.ctx, chunk}}, {0}, q_chunk, false);
      ASSERT_EQ(0,
                std::memcmp(whole.data(), in_chunk.data() + (chunk - 1) * row, sizeof(float) * row))
          << threads;
      for (int i = 0; i < n; ++i) {
        const auto split = f.Run({{c.ctx, 1}}, {0}, q_last, false, ks[i].fn);
        ASSERT_EQ(0, std::memcmp(whole_of[i].data(), split.data(), sizeof(float) * row))
            << ks[i].isa << " threads " << threads;
      }
    }
    // In a batch beside short sequences (a decode row, a chunk of 5), the long row has more
    // than its share of the work and is cut; every row keeps its bits from alone.
    const std::vector<Seq> mixed = {{40, 1}, {c.ctx, 1}, {30, 5}};
    auto q_short = RandomVec(6 * row, 53, -2.0f, 2.0f);
    std::vector<float> q_mixed(q_short.begin(), q_short.begin() + row);
    q_mixed.insert(q_mixed.end(), q_last.begin(), q_last.end());
    q_mixed.insert(q_mixed.end(), q_short.begin() + row, q_short.end());
    omp_set_num_threads(1);
    const auto mixed_alone = f.Run(mixed, {1, 0, 2}, q_mixed, false);
    ASSERT_EQ(0, std::memcmp(whole.data(), mixed_alone.data() + row, sizeof(float) * row));
    for (int threads : {2, 4}) {
      omp_set_num_threads(threads);
      const auto got = f.Run(mixed, {1, 0, 2}, q_mixed, false);
      ASSERT_EQ(0, std::memcmp(mixed_alone.data(), got.data(), sizeof(float) * got.size()))
          << threads;
    }
    // Rows 248..259 of a chunk straddle the boundary at 256 (rows of one task with different
    // segments so far); row 9 (position 257) against the same row decoded with 4 threads.
    omp_set_num_threads(1);
    const auto straddle = f.Run({{260, chunk}}, {0}, q_chunk, false);
    omp_set_num_threads(4);
    const std::vector<float> q9(q_chunk.begin() + 9 * row, q_chunk.begin() + 10 * row);
    const auto decode9 = f.Run({{258, 1}}, {0}, q9, false);
    ASSERT_EQ(0, std::memcmp(straddle.data() + 9 * row, decode9.data(), sizeof(float) * row));
  }
  omp_set_num_threads(saved);
}

// A half cache (engine.kv_cache_dtype float16) gives bitwise the output of a float cache holding
// its values (each K and V rounded to half), with every ISA's kernel and any thread count: the
// halves are widened exactly, then read as floats. Shapes cover the widening's vector tails
// (rows of 36 and 80 halves), blocks of 1 to 32 keys, MQA, a window, soft-capping, and values
// at the edges of half (subnormals, signed zeros, 65504, rounding to infinity).
TEST(PagedAttentionTest, HalfCacheIsTheFloatCacheOfItsRoundedValues) {
  struct Case {
    AttentionParams p;
    std::vector<Seq> seqs;
  };
  const std::vector<Seq> mixed = {{1, 1}, {37, 37}, {50, 1}, {20, 9}, {64, 16}, {17, 1}};
  std::vector<Case> cases = {
      {{.q_heads = 8, .kv_heads = 2, .head_dim = 64, .block_size = 16, .scale = 0.125f}, mixed},
      {{.q_heads = 6, .kv_heads = 1, .head_dim = 36, .block_size = 4, .scale = 0.2f}, mixed},
      {{.q_heads = 16,
        .kv_heads = 4,
        .head_dim = 80,
        .block_size = 32,
        .scale = 0.088f,
        .sliding_window = 21},
       mixed},
      {{.q_heads = 8,
        .kv_heads = 4,
        .head_dim = 128,
        .block_size = 16,
        .scale = 0.5f,
        .softcap = 2.0f},
       {{40, 1}, {9, 1}, {33, 1}}},
      {{.q_heads = 3, .kv_heads = 3, .head_dim = 2, .block_size = 1, .scale = 1}, {{6, 2}, {3, 3}}},
      // One decode row of three segments: with more threads than tasks, they are split.
      {{.q_heads = 4, .kv_heads = 1, .head_dim = 36, .block_size = 16, .scale = 0.2f}, {{700, 1}}},
  };
  internal::AttendKernel ks[3];
  const int n = internal::AvailableAttendKernels(ks);
  const int saved = omp_get_max_threads();
  for (Case& c : cases) {
    AttentionParams p = c.p;
    SCOPED_TRACE("hd=" + std::to_string(p.head_dim) + " bs=" + std::to_string(p.block_size));
    int max_ctx = 0, rows = 0;
    for (const Seq& s : c.seqs) {
      max_ctx = std::max(max_ctx, s.context_len);
      rows += s.q_len;
    }
    Fixture f(p, static_cast<int>(c.seqs.size()), max_ctx, 41);
    // Scaled so that some values round to half's subnormals, to zero, and past its range.
    const float edge[] = {0.0f, -0.0f, 3e-8f, -6e-6f, 65504.0f, -70000.0f, 1e-5f};
    for (size_t i = 0; i < f.k_cache.size(); i += 97) f.k_cache[i] = edge[(i / 97) % 7] * 1e-4f;
    for (size_t i = 0; i < f.v_cache.size(); i += 89) f.v_cache[i] = edge[(i / 89) % 7];
    std::vector<uint16_t> kh(f.k_cache.size()), vh(f.v_cache.size());
    for (size_t i = 0; i < kh.size(); ++i) {
      kh[i] = F32ToF16(f.k_cache[i]);
      f.k_cache[i] = F16ToF32(kh[i]);
    }
    for (size_t i = 0; i < vh.size(); ++i) {
      vh[i] = F32ToF16(f.v_cache[i]);
      f.v_cache[i] = F16ToF32(vh[i]);
    }
    std::vector<int> idx(c.seqs.size());
    std::iota(idx.begin(), idx.end(), 0);
    auto q = RandomVec(static_cast<size_t>(rows) * p.q_heads * p.head_dim, 42, -2.0f, 2.0f);
    const auto want = f.Run(c.seqs, idx, q, false);  // the float cache of the rounded values
    std::vector<int32_t> qs{0}, ctx, bt;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      qs.push_back(qs.back() + c.seqs[s].q_len);
      ctx.push_back(c.seqs[s].context_len);
      bt.insert(bt.end(), f.tables.begin() + idx[s] * f.max_blocks,
                f.tables.begin() + (idx[s] + 1) * f.max_blocks);
    }
    AttentionBatch b{static_cast<int>(c.seqs.size()), qs.data(), ctx.data(), bt.data(),
                     f.max_blocks};
    AttentionParams ph = p;
    ph.kv_dtype = DType::kF16;
    for (int threads : {1, 2, 4}) {
      omp_set_num_threads(threads);
      std::vector<float> got(q.size(), -7.0f);
      PagedAttention(q.data(), kh.data(), vh.data(), b, ph, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), sizeof(float) * got.size())) << threads;
      for (int i = 0; i < n; ++i) {
        std::fill(got.begin(), got.end(), -7.0f);
        internal::PagedAttentionWith(ks[i].fn, q.data(), kh.data(), vh.data(), b, ph, got.data());
        const auto want_i = f.Run(c.seqs, idx, q, false, ks[i].fn);  // this kernel, float cache
        ASSERT_EQ(0, std::memcmp(want_i.data(), got.data(), sizeof(float) * got.size()))
            << ks[i].isa << " threads " << threads;
      }
    }
    omp_set_num_threads(saved);
  }
}

// LLM_ATTENTION_ISA: a kernel this CPU has is taken by name; anything else keeps the best one.
TEST(PagedAttentionTest, KernelOverrideByName) {
  internal::AttendKernel ks[3];
  const int n = internal::AvailableAttendKernels(ks);
  ASSERT_GE(n, 1);
  EXPECT_EQ(ks[n - 1].fn, internal::PickAttendKernel(ks, n, "generic"));
  for (int i = 0; i < n; ++i) EXPECT_EQ(ks[i].fn, internal::PickAttendKernel(ks, n, ks[i].isa));
  EXPECT_EQ(ks[0].fn, internal::PickAttendKernel(ks, n, nullptr));
  const std::string long_name(100000, 'a');
  for (const char* bad : {"", "AVX2", "avx2 ", "neon", long_name.c_str()}) {
    EXPECT_EQ(ks[0].fn, internal::PickAttendKernel(ks, n, bad)) << bad;
  }
}

}  // namespace
}  // namespace llm::kernels
