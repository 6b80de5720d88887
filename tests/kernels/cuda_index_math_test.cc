// The CUDA kernels' index math and softmax steps (kernels/cuda/index_math.h) on the CPU: each
// helper against its definition, and the kernels' loops (paged attention with its warps and
// split-K partitions, RoPE, the cache write, the embedding) composed from the helpers exactly as
// the .cu files compose them, against the CPU references. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu_ops.h"
#include "kernels/cuda/index_math.h"
#include "kernels/reference_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels::cuda {
namespace {

using testing::RandomFloats;

TEST(CudaIndexMath, GridAndSlot) {
  EXPECT_EQ(GridFor(1, 256), 1);
  EXPECT_EQ(GridFor(256, 256), 1);
  EXPECT_EQ(GridFor(257, 256), 2);
  EXPECT_EQ(GridFor(int64_t{1} << 40, 256), int64_t{1} << 32);
  const int32_t table[] = {7, 3, 9};
  EXPECT_EQ(SlotOf(table, 0, 16), 7 * 16);
  EXPECT_EQ(SlotOf(table, 17, 16), 3 * 16 + 1);
  EXPECT_EQ(SlotOf(table, 47, 16), 9 * 16 + 15);
  // Slot rows of kv_heads * head_dim floats, a head's lanes inside its row.
  EXPECT_EQ(CacheOffset(0, 4, 64, 0), 0);
  EXPECT_EQ(CacheOffset(5, 4, 64, 3), (5 * 4 + 3) * 64);
  EXPECT_EQ(CacheOffset(int64_t{1} << 28, 8, 128, 1), ((int64_t{1} << 28) * 8 + 1) * 128);
}

TEST(CudaIndexMath, SequenceOfRowSkipsEmptySequences) {
  // Sequences of 3, 0, 1, 0, 0 and 2 rows.
  const int32_t qs[] = {0, 3, 3, 4, 4, 4, 6};
  const int want[] = {0, 0, 0, 2, 5, 5};
  for (int row = 0; row < 6; ++row) EXPECT_EQ(SequenceOfRow(qs, 6, row), want[row]) << row;
  const int32_t one[] = {0, 5};
  for (int row = 0; row < 5; ++row) EXPECT_EQ(SequenceOfRow(one, 1, row), 0);
}

TEST(CudaIndexMath, QueryPositionIsTheTailOfTheContext) {
  const int32_t qs[] = {0, 1, 5};
  const int32_t ctx[] = {10, 4};  // a decode row at position 9, a 4-token prefill 0..3
  EXPECT_EQ(QueryPosition(qs, ctx, 0, 0), 9);
  for (int r = 1; r < 5; ++r) EXPECT_EQ(QueryPosition(qs, ctx, 1, r), r - 1);
}

TEST(CudaIndexMath, VisibleKeysAndPartitions) {
  KeyRange r = VisibleKeys(9, 0);
  EXPECT_EQ(r.begin, 0);
  EXPECT_EQ(r.end, 10);
  r = VisibleKeys(9, 4);  // 9 - 4 < j <= 9
  EXPECT_EQ(r.begin, 6);
  EXPECT_EQ(r.end, 10);
  r = VisibleKeys(2, 4);
  EXPECT_EQ(r.begin, 0);
  // Equal shares of the keys the query sees, at least min_keys each.
  KeyRange p = PartitionKeys(VisibleKeys(999, 0), 1, 4, 64);  // 1000 keys: 250 each
  EXPECT_EQ(p.begin, 250);
  EXPECT_EQ(p.end, 500);
  p = PartitionKeys(VisibleKeys(1000, 0), 3, 4, 64);  // 1001 keys: 251, the last one 248
  EXPECT_EQ(p.begin, 753);
  EXPECT_EQ(p.end, 1001);
  p = PartitionKeys(VisibleKeys(99, 0), 1, 16, 64);  // 100 keys: two partitions of 64 and 36
  EXPECT_EQ(p.begin, 64);
  EXPECT_EQ(p.end, 100);
  EXPECT_TRUE(PartitionKeys(VisibleKeys(99, 0), 2, 16, 64).empty());
  p = PartitionKeys(VisibleKeys(1000, 10), 0, 4, 64);  // a window: its 10 keys
  EXPECT_EQ(p.begin, 991);
  EXPECT_EQ(p.end, 1001);
  EXPECT_TRUE(PartitionKeys(VisibleKeys(1000, 10), 1, 4, 64).empty());
  p = PartitionKeys(VisibleKeys(1000, 0), 0, 1, 64);  // one partition: every key
  EXPECT_EQ(p.begin, 0);
  EXPECT_EQ(p.end, 1001);
  // The shares cover every visible key exactly once, whatever the counts.
  for (int pos : {0, 5, 63, 64, 65, 200, 1000, 8191}) {
    for (int parts : {1, 2, 3, 7, 16, 64}) {
      const KeyRange v = VisibleKeys(pos, pos % 3 == 0 ? 100 : 0);
      int next = v.begin;
      for (int i = 0; i < parts; ++i) {
        const KeyRange share = PartitionKeys(v, i, parts, 64);
        if (share.empty()) continue;
        EXPECT_EQ(share.begin, next) << pos << " " << parts << " " << i;
        next = share.end;
      }
      EXPECT_EQ(next, v.end) << pos << " " << parts;
      // The used shares are the first ones, each non-empty; the rest are empty.
      const int used = UsedPartitions(v, parts, 64);
      for (int i = 0; i < parts; ++i) {
        EXPECT_EQ(PartitionKeys(v, i, parts, 64).empty(), i >= used) << pos << " " << parts;
      }
    }
  }
  EXPECT_EQ(NumPartitions(0, 64), 1);
  EXPECT_EQ(NumPartitions(64, 64), 1);
  EXPECT_EQ(NumPartitions(65, 64), 2);
}

TEST(CudaIndexMath, ChoosePartitions) {
  // Decode of one sequence (32 heads) on 132 SMs, graph padded to 8k: 64 partitions at most.
  EXPECT_EQ(ChoosePartitions(1, 32, 128, 8192, 132, 64, 1 << 24), 64);
  // 16 sequences: 512 pairs, split until 16 blocks per SM (2112): 5.
  EXPECT_EQ(ChoosePartitions(16, 32, 128, 8192, 132, 64, 1 << 24), 5);
  // A prefill chunk fills the GPU with (row, head) pairs alone: no split.
  EXPECT_EQ(ChoosePartitions(512, 32, 128, 8192, 132, 64, 1 << 24), 1);
  EXPECT_EQ(ChoosePartitions(66, 32, 128, 8192, 132, 64, 1 << 24), 1);
  // Short contexts: no more partitions than 64-key shares fill.
  EXPECT_EQ(ChoosePartitions(1, 32, 128, 300, 132, 64, 1 << 24), 5);
  EXPECT_EQ(ChoosePartitions(1, 32, 128, 64, 132, 64, 1 << 24), 1);
  // The partials must fit the workspace: as many as fit, or none.
  EXPECT_EQ(ChoosePartitions(16, 32, 128, 1 << 20, 132, 64, 512 * 130 * 2), 2);
  EXPECT_EQ(ChoosePartitions(16, 32, 128, 1 << 20, 132, 64, 512 * 130), 1);
  EXPECT_EQ(AttentionWorkspaceFloats(2, 4, 64, 3), 2 * 4 * 3 * 66);
  EXPECT_EQ(AttentionWorkspaceFloats(2, 4, 64, 1), 0);
}

TEST(CudaIndexMath, RopeLanesMatchTheCpuKernel) {
  for (bool interleaved : {false, true}) {
    for (int rotary_dim : {64, 32}) {  // full, and partial rotary (Phi-3 GGUF, GLM)
      const int head_dim = 64, tokens = 3, heads = 2, half = rotary_dim / 2;
      auto x = RandomFloats(static_cast<size_t>(tokens) * heads * head_dim, 1);
      auto inv = RandomFloats(half, 2, 0.001f, 1.0f);
      const std::vector<int32_t> pos = {0, 7, 1000};
      std::vector<float> want = x, got = x;
      kernels::Rope(want.data(), pos.data(), tokens, heads,
                    RopeLayout{head_dim, rotary_dim, interleaved}, inv.data());
      // RopeKernel: one thread per (token, head, pair).
      for (int64_t id = 0; id < int64_t{tokens} * heads * half; ++id) {
        const int i = static_cast<int>(id % half);
        const int64_t th = id / half;
        const int t = static_cast<int>(th / heads);
        const float angle = static_cast<float>(pos[t]) * inv[i];
        const float cs = std::cos(angle), sn = std::sin(angle);
        const LanePair p = RopeLanes(i, rotary_dim, interleaved);
        float* v = got.data() + th * head_dim;
        const float x0 = v[p.a], x1 = v[p.b];
        v[p.a] = x0 * cs - x1 * sn;
        v[p.b] = x1 * cs + x0 * sn;
      }
      EXPECT_EQ(got, want) << "interleaved=" << interleaved << " rotary_dim=" << rotary_dim;
    }
  }
}

TEST(CudaIndexMath, CacheWriteAndEmbeddingMatchTheReferences) {
  const int tokens = 5, kv_heads = 2, head_dim = 8, block_size = 4, blocks = 6;
  auto k = RandomFloats(static_cast<size_t>(tokens) * kv_heads * head_dim, 3);
  auto v = RandomFloats(k.size(), 4);
  const std::vector<int32_t> slots = {9, -1, 0, 23, 4};  // -1: padding, not written
  const size_t cache = static_cast<size_t>(blocks) * block_size * kv_heads * head_dim;
  std::vector<float> kw(cache, 0.5f), vw(cache, 0.5f), kg = kw, vg = vw;
  ref::ReshapeAndCache(k.data(), v.data(), tokens, kv_heads, head_dim, slots.data(), block_size,
                       kw.data(), vw.data());
  for (int t = 0; t < tokens; ++t) {  // ReshapeAndCacheKernel: one block per (token, head)
    for (int h = 0; h < kv_heads; ++h) {
      if (slots[t] < 0) continue;
      const int64_t src = (int64_t{t} * kv_heads + h) * head_dim;
      const int64_t dst = CacheOffset(slots[t], kv_heads, head_dim, h);
      for (int d = 0; d < head_dim; ++d) {
        kg[dst + d] = k[src + d];
        vg[dst + d] = v[src + d];
      }
    }
  }
  EXPECT_EQ(kg, kw);
  EXPECT_EQ(vg, vw);

  // A vocab shard of rows [10, 14): other ids give zero rows.
  const int rows = 4, cols = 3, first = 10;
  auto table = RandomFloats(rows * cols, 5);
  const std::vector<int32_t> ids = {10, 13, 9, 14, -1, 12};
  std::vector<float> want(ids.size() * cols), got(want.size());
  ref::Embedding(ids.data(), static_cast<int>(ids.size()), table.data(), DType::kF32, rows, cols,
                 first, want.data());
  for (size_t t = 0; t < ids.size(); ++t) {
    const int64_t row = EmbeddingRow(ids[t], first, rows);
    for (int c = 0; c < cols; ++c) got[t * cols + c] = row < 0 ? 0.0f : table[row * cols + c];
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(EmbeddingRow(INT32_MIN, 0, 10), -1);
  EXPECT_EQ(EmbeddingRow(INT32_MAX, 0, 10), -1);
}

TEST(CudaIndexMath, SoftmaxStepsMatchATwoPassSoftmax) {
  auto scores = RandomFloats(50, 6, -20.0f, 20.0f);
  auto values = RandomFloats(50, 7);
  double mx = -INFINITY, sum = 0, acc_ref = 0;
  for (float s : scores) mx = std::max<double>(mx, s);
  for (size_t i = 0; i < scores.size(); ++i) {
    const double e = std::exp(scores[i] - mx);
    sum += e;
    acc_ref += e * values[i];
  }
  // One stream, then the same scores in three partitions merged.
  SoftmaxState st;
  float acc = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    float w;
    const float r = SoftmaxAdd(st, scores[i], &w);
    acc = acc * r + w * values[i];
  }
  EXPECT_NEAR(SoftmaxOutput(st, acc), acc_ref / sum, 1e-5);
  SoftmaxState merged;  // starts empty, as the merge kernel's
  float macc = 0;
  for (int p = 0; p < 3; ++p) {
    SoftmaxState part;
    float pacc = 0;
    for (size_t i = p * 20; i < std::min<size_t>(scores.size(), (p + 1) * 20); ++i) {
      float w;
      const float r = SoftmaxAdd(part, scores[i], &w);
      pacc = pacc * r + w * values[i];
    }
    float fa, fb;
    SoftmaxMerge(merged, part, &fa, &fb);
    macc = macc * fa + pacc * fb;
  }
  EXPECT_NEAR(SoftmaxOutput(merged, macc), acc_ref / sum, 1e-5);
  // Empty partitions weigh nothing; a query with no key gives 0.
  SoftmaxState empty;
  float fa, fb;
  SoftmaxMerge(merged, empty, &fa, &fb);
  EXPECT_EQ(fb, 0.0f);
  EXPECT_EQ(SoftmaxOutput(SoftmaxState{}, 0.0f), 0.0f);
  EXPECT_FLOAT_EQ(AttentionScore(2.0f, 0.5f, 0.0f), 1.0f);
  EXPECT_NEAR(AttentionScore(100.0f, 1.0f, 30.0f), std::tanh(100.0f / 30.0f) * 30.0f, 1e-4);
}

// PagedAttentionKernel + MergePartitionsKernel, composed on the CPU as the GPU runs them: blocks
// over (row, head, partition), 4 warps taking kKeysPerWarpStep keys at a time round-robin, warps
// merged in order, then the partitions in order.
void EmulatePagedAttention(const float* q, const float* k_cache, const float* v_cache,
                           const AttentionBatch& b, const AttentionParams& p, int partitions,
                           int min_partition_keys, float* out) {
  constexpr int kWarps = 4, kStep = kKeysPerWarpStep;
  const int d_model = p.head_dim;
  // NaN: a partial the merge reads but no block wrote spoils the output.
  std::vector<float> ws(static_cast<size_t>(b.num_tokens) * p.q_heads * partitions * (d_model + 2),
                        std::numeric_limits<float>::quiet_NaN());
  for (int row = 0; row < b.num_tokens; ++row) {
    for (int h = 0; h < p.q_heads; ++h) {
      for (int part = 0; part < partitions; ++part) {
        const int s = SequenceOfRow(b.query_start, b.num_seqs, row);
        const int pos = QueryPosition(b.query_start, b.context_len, s, row);
        const KeyRange visible = VisibleKeys(pos, p.sliding_window);
        if (part >= UsedPartitions(visible, partitions, min_partition_keys)) continue;
        const KeyRange keys = PartitionKeys(visible, part, partitions, min_partition_keys);
        const int kvh = h / (p.q_heads / p.kv_heads);
        const int32_t* table = b.block_tables + static_cast<int64_t>(s) * b.max_blocks_per_seq;
        const float* qrow = q + (static_cast<int64_t>(row) * p.q_heads + h) * d_model;
        SoftmaxState st[kWarps];
        std::vector<float> acc(static_cast<size_t>(kWarps) * d_model, 0.0f);
        for (int w = 0; w < kWarps; ++w) {
          for (int j0 = keys.begin + w * kStep; j0 < keys.end; j0 += kWarps * kStep) {
            for (int j = j0; j < std::min(j0 + kStep, keys.end); ++j) {
              const int64_t off =
                  CacheOffset(SlotOf(table, j, p.block_size), p.kv_heads, d_model, kvh);
              float dot = 0;
              for (int d = 0; d < d_model; ++d) dot += qrow[d] * k_cache[off + d];
              float weight;
              const float r = SoftmaxAdd(st[w], AttentionScore(dot, p.scale, p.softcap), &weight);
              for (int d = 0; d < d_model; ++d) {
                acc[w * d_model + d] = acc[w * d_model + d] * r + weight * v_cache[off + d];
              }
            }
          }
        }
        for (int w = 1; w < kWarps; ++w) {
          float fa, fb;
          SoftmaxMerge(st[0], st[w], &fa, &fb);
          for (int d = 0; d < d_model; ++d) acc[d] = acc[d] * fa + acc[w * d_model + d] * fb;
        }
        const int64_t pair = static_cast<int64_t>(row) * p.q_heads + h;
        float* partial = ws.data() + (pair * partitions + part) * (d_model + 2);
        for (int d = 0; d < d_model; ++d) partial[d] = acc[d];
        partial[d_model] = st[0].max;
        partial[d_model + 1] = st[0].sum;
      }
      const int64_t pair = static_cast<int64_t>(row) * p.q_heads + h;
      const int s = SequenceOfRow(b.query_start, b.num_seqs, row);
      const int pos = QueryPosition(b.query_start, b.context_len, s, row);
      const int used =
          UsedPartitions(VisibleKeys(pos, p.sliding_window), partitions, min_partition_keys);
      for (int d = 0; d < d_model; ++d) {
        SoftmaxState st;
        float acc = 0;
        for (int part = 0; part < used; ++part) {
          const float* pp = ws.data() + (pair * partitions + part) * (d_model + 2);
          SoftmaxState pb;
          pb.max = pp[d_model];
          pb.sum = pp[d_model + 1];
          float fa, fb;
          SoftmaxMerge(st, pb, &fa, &fb);
          acc = acc * fa + pp[d] * fb;
        }
        out[pair * d_model + d] = SoftmaxOutput(st, acc);
      }
    }
  }
}

struct AttentionCase {
  int q_heads, kv_heads, head_dim, block_size, window;
  float softcap;
  std::vector<std::pair<int, int>> seqs;  // (context_len, q_len)
};

TEST(CudaIndexMath, PagedAttentionAsTheKernelComputesIt) {
  const std::vector<AttentionCase> cases = {
      {4, 4, 32, 16, 0, 0.0f, {{1, 1}, {37, 1}, {1200, 1}}},       // decode, MHA
      {8, 2, 64, 16, 0, 0.0f, {{20, 20}, {700, 5}, {1100, 1}}},    // prefill + chunk, GQA
      {6, 1, 48, 8, 0, 0.0f, {{600, 3}, {0, 0}, {9, 9}}},          // MQA, an empty sequence
      {4, 2, 32, 16, 100, 0.0f, {{1300, 2}, {90, 90}}},            // sliding window
      {4, 2, 32, 32, 0, 50.0f, {{513, 1}, {1024, 1}, {1025, 2}}},  // soft-cap, uneven shares
  };
  uint32_t seed = 10;
  for (const AttentionCase& c : cases) {
    AttentionParams p;
    p.q_heads = c.q_heads;
    p.kv_heads = c.kv_heads;
    p.head_dim = c.head_dim;
    p.block_size = c.block_size;
    p.sliding_window = c.window;
    p.softcap = c.softcap;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    int max_ctx = 1, rows = 0;
    for (auto [ctx, q_len] : c.seqs) {
      max_ctx = std::max(max_ctx, ctx);
      rows += q_len;
    }
    const int max_blocks = (max_ctx + p.block_size - 1) / p.block_size;
    const int seqs = static_cast<int>(c.seqs.size());
    const int num_blocks = seqs * max_blocks + 2;
    const size_t cache_floats =
        static_cast<size_t>(num_blocks) * p.block_size * p.kv_heads * p.head_dim;
    auto kc = RandomFloats(cache_floats, ++seed), vc = RandomFloats(cache_floats, ++seed);
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(++seed));
    std::vector<int32_t> qs{0}, ctx, tables(perm.begin(), perm.begin() + seqs * max_blocks);
    for (auto [context, q_len] : c.seqs) {
      qs.push_back(qs.back() + q_len);
      ctx.push_back(context);
    }
    AttentionBatch b{seqs, qs.data(), ctx.data(), tables.data(), max_blocks, rows};
    auto q = RandomFloats(static_cast<size_t>(rows) * p.q_heads * p.head_dim, ++seed, -2.0f, 2.0f);
    std::vector<float> want(q.size());
    ref::PagedAttention(q.data(), kc.data(), vc.data(), b, p, want.data());
    for (int partitions : {1, 3, NumPartitions(max_blocks * p.block_size, 64)}) {
      std::vector<float> got(q.size(), -7.0f);
      EmulatePagedAttention(q.data(), kc.data(), vc.data(), b, p, partitions, 64, got.data());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::fabs(want[i])))
            << "case heads " << c.q_heads << "/" << c.kv_heads << " window " << c.window
            << " partitions " << partitions << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace llm::kernels::cuda
