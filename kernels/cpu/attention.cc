// PagedAttention: one task per (query row, kv head); the task runs an online softmax over the
// keys its query may see, one cache block at a time, from position 0 upward, for every q head of
// the kv head's group. A query's result depends only on its own q, its position and the cache:
// never on the other rows of the batch, on how its sequence was chunked, or on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/simd_util.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

constexpr int kMaxHeadDim = 512;
constexpr int kMaxBlockSize = 256;
constexpr int kHeadTile = 8;  // q heads of one group processed together (they share K/V loads)

struct RowState {
  float m[kHeadTile];  // running max of the scores
  float l[kHeadTile];  // running sum of exp(score - m)
  float acc[kHeadTile][kMaxHeadDim];
  float s[kHeadTile][kMaxBlockSize];
};

// Sequence that owns flat query row `row` (query_start is nondecreasing).
int SeqOfRow(const AttentionBatch& b, int row) {
  const int32_t* end = b.query_start + b.num_seqs + 1;
  return static_cast<int>(std::upper_bound(b.query_start, end, row) - b.query_start) - 1;
}

// Keys [lo, hi] of one cache block, for heads [0, nh) of the tile.
void AttendBlock(const float* const* qv, int nh, const float* kb, const float* vb, int64_t stride,
                 int lo, int hi, const AttentionParams& p, RowState& st) {
  const int n = hi - lo + 1;
  for (int h = 0; h < nh; ++h) {
    float bmax = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) {
      float sc = simd::Dot(qv[h], kb + (lo + i) * stride, p.head_dim) * p.scale;
      if (p.logit_softcap > 0) sc = p.logit_softcap * std::tanh(sc / p.logit_softcap);
      st.s[h][i] = sc;
      bmax = std::max(bmax, sc);
    }
    const float m_new = std::max(st.m[h], bmax);
    const float factor =
        st.m[h] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(st.m[h] - m_new);
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      st.s[h][i] = std::exp(st.s[h][i] - m_new);
      sum += st.s[h][i];
    }
    st.m[h] = m_new;
    st.l[h] = st.l[h] * factor + sum;
    simd::Scale(st.acc[h], factor, p.head_dim);
    for (int i = 0; i < n; ++i)
      simd::Axpy(st.acc[h], st.s[h][i], vb + (lo + i) * stride, p.head_dim);
  }
}

// All q heads [h0, h0 + nh) of one query row; they share kv head `kvh`.
void AttendRow(const float* q_row, float* out_row, int h0, int nh, int kvh, int pos,
               const int32_t* table, const float* k_cache, const float* v_cache,
               const AttentionParams& p) {
  RowState st;
  const float* qv[kHeadTile];
  for (int h = 0; h < nh; ++h) {
    qv[h] = q_row + static_cast<int64_t>(h0 + h) * p.head_dim;
    st.m[h] = -std::numeric_limits<float>::infinity();
    st.l[h] = 0.0f;
    std::fill(st.acc[h], st.acc[h] + p.head_dim, 0.0f);
  }
  const int64_t stride = static_cast<int64_t>(p.kv_heads) * p.head_dim;
  const int first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
  for (int b = first / p.block_size; b <= pos / p.block_size; ++b) {
    const int64_t base = static_cast<int64_t>(table[b]) * p.block_size * stride + kvh * p.head_dim;
    const int lo = std::max(first - b * p.block_size, 0);
    const int hi = std::min(pos - b * p.block_size, p.block_size - 1);
    AttendBlock(qv, nh, k_cache + base, v_cache + base, stride, lo, hi, p, st);
  }
  for (int h = 0; h < nh; ++h) {
    float* o = out_row + static_cast<int64_t>(h0 + h) * p.head_dim;
    const float inv = st.l[h] > 0 ? 1.0f / st.l[h] : 0.0f;
    for (int d = 0; d < p.head_dim; ++d) o[d] = st.acc[h][d] * inv;
  }
}

}  // namespace

void PagedAttention(const float* q, const float* k_cache, const float* v_cache,
                    const AttentionBatch& batch, const AttentionParams& p, float* out) {
  if (batch.num_seqs <= 0 || p.head_dim > kMaxHeadDim || p.block_size > kMaxBlockSize) return;
  const int rows = batch.query_start[batch.num_seqs] - batch.query_start[0];
  const int group = p.q_heads / p.kv_heads;
  const int tiles_per_kv = (group + kHeadTile - 1) / kHeadTile;
  const int64_t tasks = static_cast<int64_t>(rows) * p.kv_heads * tiles_per_kv;
  const int64_t qrow = static_cast<int64_t>(p.q_heads) * p.head_dim;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int row = batch.query_start[0] + static_cast<int>(task / (p.kv_heads * tiles_per_kv));
    const int rem = static_cast<int>(task % (p.kv_heads * tiles_per_kv));
    const int kvh = rem / tiles_per_kv;
    const int h0 = kvh * group + (rem % tiles_per_kv) * kHeadTile;
    const int nh = std::min(kHeadTile, (kvh + 1) * group - h0);
    const int s = SeqOfRow(batch, row);
    const int q_len = batch.query_start[s + 1] - batch.query_start[s];
    const int pos = batch.context_len[s] - q_len + (row - batch.query_start[s]);
    const int32_t* table = batch.block_tables + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
    AttendRow(q + row * qrow, out + row * qrow, h0, nh, kvh, pos, table, k_cache, v_cache, p);
  }
}

}  // namespace llm::kernels
