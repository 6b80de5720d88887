// The PagedAttention task kernel. Included only by attention_generic.cc, attention_avx2.cc and
// attention_avx512.cc, each compiled with its own ISA flags: everything here is in an anonymous
// namespace and calls no inline library template (std::max, ...), so no code compiled for one ISA
// can be picked by the linker for another TU.
//
// Per (row, head) query vector, the keys it may see are visited one cache block at a time, from
// position 0 upward: scores, block max, rescale of the running sum and accumulator, then the
// block's weighted values, all in key order. The result depends only on the query, its position
// and the cache.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/cpu/attention_kernel.h"

namespace llm::kernels::internal {
namespace {

constexpr int kLanes = 16;

inline int MinI(int a, int b) {
  return a < b ? a : b;
}
inline int MaxI(int a, int b) {
  return a > b ? a : b;
}

// Dot product with 16 explicit lane sums and a fixed reduction tree (vectorises, never reorders).
inline float Dot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < n; ++i) acc[i & (kLanes - 1)] += a[i] * b[i];
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  return acc[0];
}

struct VecState {
  float m;  // running max of the scores
  float l;  // running sum of exp(score - m)
  int first;
  int pos;
  const float* q;
};

struct TaskScratch {
  VecState v[kAttnMaxVectors];
  alignas(64) float acc[kAttnMaxVectors][kAttnMaxHeadDim];
  alignas(64) float s[kAttnMaxVectors][kAttnMaxBlockSize];
};

// Online-softmax update of vector v with the scores s[lo..hi] (already in st.s[v]).
inline float Rescale(TaskScratch& st, int v, int lo, int hi) {
  VecState& vs = st.v[v];
  float* s = st.s[v];
  float bmax = -std::numeric_limits<float>::infinity();
  for (int i = lo; i <= hi; ++i) bmax = s[i] > bmax ? s[i] : bmax;
  const float m_new = vs.m > bmax ? vs.m : bmax;
  const float factor =
      vs.m == -std::numeric_limits<float>::infinity() ? 0.0f : __builtin_expf(vs.m - m_new);
  float sum = 0.0f;
  for (int i = lo; i <= hi; ++i) {
    s[i] = __builtin_expf(s[i] - m_new);
    sum += s[i];
  }
  vs.m = m_new;
  vs.l = vs.l * factor + sum;
  return factor;
}

// Keys of block b (logical) for every vector that sees some of them.
void AttendBlock(const AttendTask& t, TaskScratch& st, int nv, int b) {
  const AttentionParams& p = *t.params;
  const int hd = p.head_dim;
  const int64_t stride = static_cast<int64_t>(p.kv_heads) * hd;
  const int64_t base = static_cast<int64_t>(t.table[b]) * p.block_size * stride + t.kvh * hd;
  const float* kb = t.k_cache + base;
  const float* vb = t.v_cache + base;
  int lo[kAttnMaxVectors], hi[kAttnMaxVectors];
  int lo_all = p.block_size, hi_all = -1;
  for (int v = 0; v < nv; ++v) {
    lo[v] = MaxI(st.v[v].first - b * p.block_size, 0);
    hi[v] = MinI(st.v[v].pos - b * p.block_size, p.block_size - 1);
    if (lo[v] <= hi[v]) {
      lo_all = MinI(lo_all, lo[v]);
      hi_all = MaxI(hi_all, hi[v]);
    }
  }
  for (int i = lo_all; i <= hi_all; ++i) {
    const float* krow = kb + i * stride;
    for (int v = 0; v < nv; ++v) {
      if (i < lo[v] || i > hi[v]) continue;
      float sc = Dot(st.v[v].q, krow, hd) * p.scale;
      if (p.logit_softcap > 0) sc = p.logit_softcap * __builtin_tanhf(sc / p.logit_softcap);
      st.s[v][i] = sc;
    }
  }
  for (int v = 0; v < nv; ++v) {
    if (lo[v] > hi[v]) continue;
    const float factor = Rescale(st, v, lo[v], hi[v]);
    float* acc = st.acc[v];
    for (int d = 0; d < hd; ++d) acc[d] *= factor;
  }
  for (int i = lo_all; i <= hi_all; ++i) {
    const float* vrow = vb + i * stride;
    for (int v = 0; v < nv; ++v) {
      if (i < lo[v] || i > hi[v]) continue;
      const float w = st.s[v][i];
      float* acc = st.acc[v];
      for (int d = 0; d < hd; ++d) acc[d] += w * vrow[d];
    }
  }
}

void AttendImpl(const AttendTask& t) {
  const AttentionParams& p = *t.params;
  const int hd = p.head_dim;
  const int nv = t.rows * t.heads;
  TaskScratch st;
  for (int v = 0; v < nv; ++v) {
    const int r = v / t.heads;
    const int h = t.h0 + v % t.heads;
    VecState& vs = st.v[v];
    vs.m = -std::numeric_limits<float>::infinity();
    vs.l = 0.0f;
    vs.pos = t.pos0 + r;
    vs.first = p.sliding_window > 0 ? MaxI(0, vs.pos - p.sliding_window + 1) : 0;
    vs.q = t.q + r * t.row_size + static_cast<int64_t>(h) * hd;
    for (int d = 0; d < hd; ++d) st.acc[v][d] = 0.0f;
  }
  const int b_first = st.v[0].first / p.block_size;
  const int b_last = (t.pos0 + t.rows - 1) / p.block_size;
  for (int b = b_first; b <= b_last; ++b) AttendBlock(t, st, nv, b);
  for (int v = 0; v < nv; ++v) {
    const int r = v / t.heads;
    const int h = t.h0 + v % t.heads;
    float* o = t.out + r * t.row_size + static_cast<int64_t>(h) * hd;
    const float inv = st.v[v].l > 0 ? 1.0f / st.v[v].l : 0.0f;
    for (int d = 0; d < hd; ++d) o[d] = st.acc[v][d] * inv;
  }
}

}  // namespace
}  // namespace llm::kernels::internal
