// The PagedAttention task kernel. Included only by attention_generic.cc, attention_avx2.cc and
// attention_avx512.cc, each compiled with its own ISA flags: everything here is in an anonymous
// namespace and calls no inline library function, so no code compiled for one ISA can be picked by
// the linker for another TU. Vectors are GCC vector extensions (16 floats), lowered to whatever
// registers the ISA has; no FMA, so every ISA rounds identically.
//
// Per (row, head) query vector, the keys it may see are visited one cache block at a time, from
// position 0 upward: scores, block max, rescale of the running sum and accumulator, then the
// block's weighted values, all in key order. The result depends only on the query, its position
// and the cache, never on the other vectors of the task.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/cpu/attention_kernel.h"

// V16 values only pass between inlined functions of this TU: no ABI boundary to warn about.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace llm::kernels::internal {
namespace {

constexpr int kLanes = 16;
typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t VI16 __attribute__((vector_size(64)));

inline int MinI(int a, int b) {
  return a < b ? a : b;
}
inline int MaxI(int a, int b) {
  return a > b ? a : b;
}
inline V16 Load(const float* p) {
  V16 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, V16 v) {
  __builtin_memcpy(p, &v, sizeof(v));
}

// Dot product with a fixed summation order: four 16-lane accumulators take 64 elements at a time
// (independent add chains), then one accumulator takes 16 at a time, the rest go to its lanes one
// by one; the four are added pairwise and the 16 lanes reduced by halves.
inline float Dot(const float* a, const float* b, int n) {
  V16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    a0 += Load(a + i) * Load(b + i);
    a1 += Load(a + i + 16) * Load(b + i + 16);
    a2 += Load(a + i + 32) * Load(b + i + 32);
    a3 += Load(a + i + 48) * Load(b + i + 48);
  }
  for (; i + kLanes <= n; i += kLanes) a0 += Load(a + i) * Load(b + i);
  for (; i < n; ++i) a0[i & (kLanes - 1)] += a[i] * b[i];
  const V16 s16 = (a0 + a1) + (a2 + a3);
  const V8 s8 = __builtin_shufflevector(s16, s16, 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(s16, s16, 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 s4 =
      __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

struct VecState {
  float m;  // running max of the scores
  float l;  // running sum of exp(score - m)
  int first;
  int pos;
  int64_t kv_off;  // offset of the vector's kv head within a cache row
  const float* q;
};

struct TaskScratch {
  VecState v[kAttnMaxVectors];
  alignas(64) float acc[kAttnMaxVectors][kAttnMaxHeadDim];
  alignas(64) float s[kAttnMaxVectors][kAttnMaxBlockSize + kLanes];  // padded for Exp
};

// exp(x) for 16 lanes (Cephes expf: Cody-Waite reduction, degree-6 polynomial; about 1 ulp).
// Plain multiplies and adds, so every ISA rounds the same. x < -87.3 gives 0.
inline V16 Exp(V16 x) {
  const V16 hi = V16{} + 88.3762626647949f, lo = V16{} - 87.3365478515625f;
  x = x > hi ? hi : x;
  const VI16 underflow = x < lo;
  x = x < lo ? lo : x;
  const V16 magic = V16{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const V16 n = (x * 1.44269504088896341f + magic) - magic;
  x = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  const V16 z = x * x;
  V16 y = x * 1.9875691500E-4f + 1.3981999507E-3f;
  y = y * x + 8.3334519073E-3f;
  y = y * x + 4.1665795894E-2f;
  y = y * x + 1.6666665459E-1f;
  y = y * x + 5.0000001201E-1f;
  y = (y * z + x) + 1.0f;
  const VI16 bits = (__builtin_convertvector(n, VI16) + 127) << 23;
  const V16 r = y * __builtin_bit_cast(V16, bits);
  return underflow ? V16{} : r;
}

// Online-softmax update of vector v with its scores s[lo..hi]; returns the accumulator's factor.
inline float Rescale(TaskScratch& st, int v, int lo, int hi) {
  VecState& vs = st.v[v];
  float* s = st.s[v];
  float bmax = -std::numeric_limits<float>::infinity();
  for (int i = lo; i <= hi; ++i) bmax = s[i] > bmax ? s[i] : bmax;
  const float m_new = vs.m > bmax ? vs.m : bmax;
  const float factor =
      vs.m == -std::numeric_limits<float>::infinity() ? 0.0f : __builtin_expf(vs.m - m_new);
  for (int i = lo; i <= hi; i += kLanes) Store(s + i, Exp(Load(s + i) - m_new));  // s is padded
  float sum = 0.0f;
  for (int i = lo; i <= hi; ++i) sum += s[i];
  vs.m = m_new;
  vs.l = vs.l * factor + sum;
  return factor;
}

// acc[d] = acc[d] * factor + sum over keys i in [lo, hi] (in order) of w[i] * vrow_i[d], where
// vrow_i = v0 + i * stride. 64 dims at a time stay in registers across the keys.
inline void AccumulateValues(float* acc, float factor, const float* w, const float* v0,
                             int64_t stride, int lo, int hi, int hd) {
  int d = 0;
  for (; d + 4 * kLanes <= hd; d += 4 * kLanes) {
    V16 a0 = Load(acc + d) * factor, a1 = Load(acc + d + 16) * factor;
    V16 a2 = Load(acc + d + 32) * factor, a3 = Load(acc + d + 48) * factor;
    for (int i = lo; i <= hi; ++i) {
      const float* vr = v0 + i * stride + d;
      a0 += w[i] * Load(vr);
      a1 += w[i] * Load(vr + 16);
      a2 += w[i] * Load(vr + 32);
      a3 += w[i] * Load(vr + 48);
    }
    Store(acc + d, a0);
    Store(acc + d + 16, a1);
    Store(acc + d + 32, a2);
    Store(acc + d + 48, a3);
  }
  for (; d + kLanes <= hd; d += kLanes) {
    V16 a = Load(acc + d) * factor;
    for (int i = lo; i <= hi; ++i) a += w[i] * Load(v0 + i * stride + d);
    Store(acc + d, a);
  }
  for (; d < hd; ++d) {
    float a = acc[d] * factor;
    for (int i = lo; i <= hi; ++i) a += w[i] * v0[i * stride + d];
    acc[d] = a;
  }
}

// Asks for the task's K and V rows of logical block b (its kv heads are contiguous in a row).
inline void PrefetchBlock(const AttendTask& t, int b) {
  const AttentionParams& p = *t.params;
  const int64_t stride = static_cast<int64_t>(p.kv_heads) * p.head_dim;
  const int64_t base = static_cast<int64_t>(t.table[b]) * p.block_size * stride +
                       static_cast<int64_t>(t.kv0) * p.head_dim;
  const int bytes = t.nkv * p.head_dim * 4;
  for (int i = 0; i < p.block_size; ++i) {
    const char* k = reinterpret_cast<const char*>(t.k_cache + base + i * stride);
    const char* v = reinterpret_cast<const char*>(t.v_cache + base + i * stride);
    for (int off = 0; off < bytes; off += 64) {
      __builtin_prefetch(k + off, 0, 3);
      __builtin_prefetch(v + off, 0, 3);
    }
  }
}

// Keys of logical block b for every vector that sees some of them.
void AttendBlock(const AttendTask& t, TaskScratch& st, int nv, int b) {
  const AttentionParams& p = *t.params;
  const int64_t stride = static_cast<int64_t>(p.kv_heads) * p.head_dim;
  const int64_t base = static_cast<int64_t>(t.table[b]) * p.block_size * stride;
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
    const float* krow = t.k_cache + base + i * stride;
    for (int v = 0; v < nv; ++v) {
      if (i < lo[v] || i > hi[v]) continue;
      float sc = Dot(st.v[v].q, krow + st.v[v].kv_off, p.head_dim) * p.scale;
      if (p.softcap > 0.0f) sc = __builtin_tanhf(sc / p.softcap) * p.softcap;
      st.s[v][i] = sc;
    }
  }
  for (int v = 0; v < nv; ++v) {
    if (lo[v] > hi[v]) continue;
    const float factor = Rescale(st, v, lo[v], hi[v]);
    AccumulateValues(st.acc[v], factor, st.s[v], t.v_cache + base + st.v[v].kv_off, stride, lo[v],
                     hi[v], p.head_dim);
  }
}

// q head of vector v: vectors run over rows, then kv heads, then the heads of the group.
inline int64_t HeadOffset(const AttendTask& t, int v, int* row) {
  const AttentionParams& p = *t.params;
  const int per_row = t.nkv * t.heads;
  *row = v / per_row;
  const int g = t.kv0 + (v % per_row) / t.heads;
  const int h = g * (p.q_heads / p.kv_heads) + t.h_off + v % t.heads;
  return *row * t.row_size + static_cast<int64_t>(h) * p.head_dim;
}

void AttendImpl(const AttendTask& t) {
  const AttentionParams& p = *t.params;
  const int hd = p.head_dim;
  const int nv = t.rows * t.nkv * t.heads;
  TaskScratch st;
  for (int v = 0; v < nv; ++v) {
    int r = 0;
    VecState& vs = st.v[v];
    vs.q = t.q + HeadOffset(t, v, &r);
    vs.m = -std::numeric_limits<float>::infinity();
    vs.l = 0.0f;
    vs.pos = t.pos0 + r;
    vs.first = p.sliding_window > 0 ? MaxI(0, vs.pos - p.sliding_window + 1) : 0;
    vs.kv_off = static_cast<int64_t>(t.kv0 + (v % (t.nkv * t.heads)) / t.heads) * hd;
    for (int d = 0; d < hd; ++d) st.acc[v][d] = 0.0f;
  }
  const int b_first = st.v[0].first / p.block_size;
  const int b_last = (t.pos0 + t.rows - 1) / p.block_size;
  PrefetchBlock(t, b_first);
  for (int b = b_first; b <= b_last; ++b) {
    if (b < b_last) PrefetchBlock(t, b + 1);
    AttendBlock(t, st, nv, b);
  }
  for (int v = 0; v < nv; ++v) {
    int r = 0;
    float* o = t.out + HeadOffset(t, v, &r);
    const float inv = st.v[v].l > 0 ? 1.0f / st.v[v].l : 0.0f;
    for (int d = 0; d < hd; ++d) o[d] = st.acc[v][d] * inv;
  }
}

}  // namespace
}  // namespace llm::kernels::internal
