// The PagedAttention task kernel. Included only by attention_generic.cc, attention_avx2.cc and
// attention_avx512.cc, each compiled with its own ISA flags: everything here is in an anonymous
// namespace and calls no inline library function, so no code compiled for one ISA can be picked by
// the linker for another TU. Vectors are GCC vector extensions of the ISA's register width (VN: 16
// floats with AVX-512, 8 with AVX, 4 else; GCC lowers wider ones through memory and general
// registers, which made the AVX2 kernel slower than the SSE2 one). Every ISA with FMA rounds
// identically: the element-wise steps give the same bits at any width, products are accumulated
// by fused multiply-adds (Fma; kFused says where the generic kernel has them), and every sum over
// keys or dims keeps one 16-lane accumulation order (F16: 16 lanes as 16 / kVN registers) and one
// reduction tree.
//
// Per (row, head) query vector, the keys it may see are visited one cache block at a time, from
// position 0 upward: scores, block max, rescale of the running sum and accumulator, then the
// block's weighted values, all in key order. At each segment's end (attention_kernel.h) that
// state is folded into the running one and starts afresh. The result depends only on the query,
// its position and the cache, never on the other vectors of the task, nor on whether the
// segments were computed by this task or by several (kSegments, then kFinish: the same folds).
//
// A half (F16) cache's elements are widened to float (exactly) as they are loaded (F16C, AVX-512;
// without F16C, a block's rows into the task's buffer first), and then used as a float cache's
// would be: the same arithmetic on the same values.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <limits>

#include "kernels/cpu/attention_kernel.h"

// Vector values only pass between inlined functions of this TU: no ABI boundary to warn about.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace llm::kernels::internal {
namespace {

constexpr int kLanes = 16;  // lanes of a dot product's accumulators (F16)
typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));
#if defined(__AVX512F__)
typedef V16 VN;
typedef int32_t VIN __attribute__((vector_size(64)));
constexpr int kVN = 16;
#elif defined(__AVX__)
typedef V8 VN;
typedef int32_t VIN __attribute__((vector_size(32)));
constexpr int kVN = 8;
#else
typedef V4 VN;
typedef int32_t VIN __attribute__((vector_size(16)));
constexpr int kVN = 4;
#endif
constexpr int kParts = kLanes / kVN;  // registers of an F16
// 16 lanes: lane l is v[l / kVN][l % kVN].
struct F16 {
  VN v[kParts];
};
// Value accumulation: kAccGroup vectors at a time, each on kAccChunk registers of dims, so that
// their accumulators fit the register file (32 zmm with AVX-512, 16 ymm / xmm else).
constexpr int kAccGroup = 4;
constexpr int kAccChunk = kVN == 16 ? 4 : 2;

inline int MinI(int a, int b) {
  return a < b ? a : b;
}
inline int MaxI(int a, int b) {
  return a > b ? a : b;
}
// The float of IEEE half h (exact; what F16C's conversion gives).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {  // infinity, NaN (quieted, as F16C)
    bits = 0x7f800000u | (em - 0x7c00u) << 13 | (em > 0x7c00u ? 0x400000u : 0u);
  } else if (em >= 0x0400u) {  // normal
    bits = (em << 13) + ((127u - 15u) << 23);
  } else {  // zero or subnormal: em * 2^-24, exact in float
    bits = __builtin_bit_cast(uint32_t, static_cast<float>(em) * 5.9604644775390625e-8f);
  }
  return __builtin_bit_cast(float, sign | bits);
}

// dst[i] = the float of half src[i], for i < n, one at a time. Out of line: inlined into
// AttendBlock, this loop was left unvectorized once that function grew, and the generic kernel
// on a half cache ran at 0.4x.
[[gnu::noinline]] void WidenHalvesScalar(const uint16_t* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

// dst[i] = the float of half src[i], for i < n.
inline void WidenHalves(const uint16_t* src, float* dst, int n) {
  int i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  if (i < n) WidenHalvesScalar(src + i, dst + i, n - i);
}

inline VN Load(const float* p) {
  VN v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, VN v) {
  __builtin_memcpy(p, &v, sizeof(v));
}
// Whether a half cache is read in place, each K/V element widened as it is loaded (an exact
// conversion: the values, and so the bits, of a widened copy). Kernels without F16C widen a
// block's rows into the task's buffer first (WidenHalves): converting lane by lane inside the
// dot products would cost more than the copy.
#if defined(__AVX512F__) || defined(__F16C__)
constexpr bool kHalfInPlace = true;
#else
constexpr bool kHalfInPlace = false;
#endif
// kVN floats of a K/V row: float, or half widened.
inline VN LoadLanes(const float* p) {
  return Load(p);
}
inline VN LoadLanes(const uint16_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  VN v;
  for (int l = 0; l < kVN; ++l) v[l] = HalfToFloat(p[l]);
  return v;
#endif
}
inline float ToFloat(float x) {
  return x;
}
inline float ToFloat(uint16_t h) {
  return HalfToFloat(h);
}
// x in every lane.
inline VN Splat(float x) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(x);
#elif defined(__AVX__)
  return _mm256_set1_ps(x);
#else
  return x - VN{};  // exact for every x, -0 included
#endif
}
// Whether this kernel fuses its multiply-adds (and so gives the bits of every other kernel that
// does): always with AVX2 and AVX-512; the generic kernel where the compiler has an FMA
// instruction (ARM, among others), not on an x86 CPU older than AVX2. There, fmaf is a library
// call that switches rounding modes, ten times slower or worse than the kernel itself, so products
// are rounded before their add: within the reference's tolerance, not the others' bits.
#if defined(__AVX512F__) || defined(__FMA__) || defined(__FP_FAST_FMAF)
constexpr bool kFused = true;
#else
constexpr bool kFused = false;
#endif

// a * b + c, rounded once where the kernel is kFused.
[[gnu::always_inline]] inline float FmaF(float a, float b, float c) {
  if constexpr (kFused) {
    return __builtin_fmaf(a, b, c);
  } else {
    return a * b + c;  // two roundings: -ffp-contract=off keeps them apart
  }
}

// a * b + c per lane, rounded once where the kernel is kFused.
inline VN Fma(VN a, VN b, VN c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  if constexpr (kFused) {
    VN r;
    for (int l = 0; l < kVN; ++l) r[l] = FmaF(a[l], b[l], c[l]);
    return r;
  }
  return a * b + c;  // FmaF's unfused rule, on whole vectors
#endif
}

// Dot product with a fixed summation order: lane l of one 16-lane accumulator takes the products
// of elements l, l + 16, l + 32, ... in that order, each by a fused multiply-add from 0 (the
// elements past the last multiple of 16 go to their lanes one by one, the same way); then the 16
// lanes are reduced by halves (lanes l and l + 8, then l and l + 4, then l and l + 2, then 0 and
// 1: ReduceLanes16 does the same for 16 dot products at once, SumLanes for one). One add chain of
// n / 16 steps per lane: the 16 keys of a group are independent chains.
[[gnu::always_inline]] inline F16 DotLanes(const float* a, const float* b, int n) {
  F16 acc = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int r = 0; r < kParts; ++r) {
      acc.v[r] = Fma(Load(a + i + kVN * r), Load(b + i + kVN * r), acc.v[r]);
    }
  }
  for (; i < n; ++i) {
    const int l = i & (kLanes - 1);
    float& x = acc.v[l / kVN][l % kVN];
    x = FmaF(a[i], b[i], x);
  }
  return acc;
}

// Lane j of the result = the 16 lanes of p[j] reduced by DotLanes' tree (bitwise the same as one
// reduction at a time, in 15 adds for 16 vectors instead of 4 each plus the moves between
// register halves, which bounded the score loop).
#if defined(__AVX512F__)
// ReduceLanes16's first two stages for vectors p[0 .. 3] (its p[4n .. 4n + 3]): its q[n], lanes
// 4k..4k + 3 vector k's l + (l + 8) + ((l + 4) + (l + 12)).
[[gnu::always_inline]] inline V16 ReduceQuarter(const F16* p) {
  V16 h[2];
  for (int m = 0; m < 2; ++m) {  // lanes 0-7: vector 2m's l + (l + 8); 8-15: vector 2m + 1's
    h[m] = __builtin_shufflevector(p[2 * m].v[0], p[2 * m + 1].v[0], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17,
                                   18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(p[2 * m].v[0], p[2 * m + 1].v[0], 8, 9, 10, 11, 12, 13, 14, 15,
                                   24, 25, 26, 27, 28, 29, 30, 31);
  }
  return __builtin_shufflevector(h[0], h[1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26,
                                 27) +
         __builtin_shufflevector(h[0], h[1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30,
                                 31);
}
// ReduceLanes16's last two stages, from its four quarters.
[[gnu::always_inline]] inline F16 ReduceQuarters(const V16 (&q)[4]) {
  V16 e[2];
  for (int k = 0; k < 2; ++k) {  // lanes 2j, 2j + 1: vector 8k + j's l + (l + 2)
    e[k] = __builtin_shufflevector(q[2 * k], q[2 * k + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21,
                                   24, 25, 28, 29) +
           __builtin_shufflevector(q[2 * k], q[2 * k + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22,
                                   23, 26, 27, 30, 31);
  }
  return {{__builtin_shufflevector(e[0], e[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                   28, 30) +
           __builtin_shufflevector(e[0], e[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                   29, 31)}};
}
#endif

[[gnu::always_inline]] inline F16 ReduceLanes16(const F16 (&p)[kLanes]) {
#if defined(__AVX512F__)
  V16 q[4];
  for (int n = 0; n < 4; ++n) q[n] = ReduceQuarter(p + 4 * n);
  return ReduceQuarters(q);
#elif defined(__AVX__)
  V8 q[8], e[4];
  for (int m = 0; m < 8; ++m) {  // lanes 0-3: vector 2m's l + (l + 8) + ...(l + 4); 4-7: 2m + 1's
    const V8 a = p[2 * m].v[0] + p[2 * m].v[1], b = p[2 * m + 1].v[0] + p[2 * m + 1].v[1];
    q[m] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int n = 0; n < 4; ++n) {  // lanes 2k, 2k + 1: vector 4n + k's l + (l + 2)
    e[n] = __builtin_shufflevector(q[2 * n], q[2 * n + 1], 0, 1, 4, 5, 8, 9, 12, 13) +
           __builtin_shufflevector(q[2 * n], q[2 * n + 1], 2, 3, 6, 7, 10, 11, 14, 15);
  }
  F16 r;
  for (int k = 0; k < 2; ++k) {  // lane j: vector 8k + j's 0 + 1
    r.v[k] = __builtin_shufflevector(e[2 * k], e[2 * k + 1], 0, 2, 4, 6, 8, 10, 12, 14) +
             __builtin_shufflevector(e[2 * k], e[2 * k + 1], 1, 3, 5, 7, 9, 11, 13, 15);
  }
  return r;
#else
  V4 s4[kLanes], e[8];
  for (int j = 0; j < kLanes; ++j) {  // l + (l + 8), then + (l + 4)
    s4[j] = (p[j].v[0] + p[j].v[2]) + (p[j].v[1] + p[j].v[3]);
  }
  for (int m = 0; m < 8; ++m) {  // lanes 0, 1: vector 2m's l + (l + 2); 2, 3: 2m + 1's
    e[m] = __builtin_shufflevector(s4[2 * m], s4[2 * m + 1], 0, 1, 4, 5) +
           __builtin_shufflevector(s4[2 * m], s4[2 * m + 1], 2, 3, 6, 7);
  }
  F16 r;
  for (int k = 0; k < 4; ++k) {  // lane j: vector 4k + j's 0 + 1
    r.v[k] = __builtin_shufflevector(e[2 * k], e[2 * k + 1], 0, 2, 4, 6) +
             __builtin_shufflevector(e[2 * k], e[2 * k + 1], 1, 3, 5, 7);
  }
  return r;
#endif
}

// The 16 lanes of x reduced by DotLanes' tree: lanes l and l + 8, then l and l + 4, then l and
// l + 2, then 0 and 1.
[[gnu::always_inline]] inline float SumLanes(const F16& x) {
#if defined(__AVX512F__)
  const V8 h = __builtin_shufflevector(x.v[0], x.v[0], 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(x.v[0], x.v[0], 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 q =
      __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#elif defined(__AVX__)
  const V8 h = x.v[0] + x.v[1];
  const V4 q =
      __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#else
  const V4 q = (x.v[0] + x.v[2]) + (x.v[1] + x.v[3]);
#endif
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// The largest lane of x (exact in any order: halves, then quarters, ...).
[[gnu::always_inline]] inline float MaxLane(VN x) {
#if defined(__AVX512F__)
  const V8 a = __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7);
  const V8 b = __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15);
  const V8 h = a > b ? a : b;
#elif defined(__AVX__)
  const V8 h = x;
#endif
#if defined(__AVX__)
  const V4 c = __builtin_shufflevector(h, h, 0, 1, 2, 3),
           d = __builtin_shufflevector(h, h, 4, 5, 6, 7);
  const V4 q = c > d ? c : d;
#else
  const V4 q = x;
#endif
  const float e = q[0] > q[2] ? q[0] : q[2], f = q[1] > q[3] ? q[1] : q[3];
  return e > f ? e : f;
}

struct VecState {
  int first;
  int pos;
  int64_t kv_off;  // offset of the vector's kv head within a cache row
  const float* q;
};

struct TaskScratch {
  VecState v[kAttnMaxVectors];
  // Each vector's running max of the scores and sum of exp(score - m), as arrays: a block's
  // softmax factors are computed kVN vectors at a time.
  alignas(64) float m[kAttnMaxVectors];
  alignas(64) float l[kAttnMaxVectors];
  float run_m[kAttnMaxVectors];  // the folded state of the segments before the current one
  float run_l[kAttnMaxVectors];
  alignas(64) float acc[kAttnMaxVectors][kAttnMaxHeadDim];
  alignas(64) float run[kAttnMaxVectors][kAttnMaxHeadDim];
  alignas(64) float s[kAttnMaxVectors][kAttnMaxBlockSize + kLanes];  // padded for Exp
};

#include "kernels/cpu/cephes_exp.h"  // NOLINT: into this TU's anonymous namespace

// exp(x) per lane (cephes_exp.h). x < -87.3 gives 0.
inline VN Exp(VN x) {
  return CephesExp<VN, VIN>(x);
}
// Exp of each of N registers, their steps interleaved (CephesExpN).
template <int N>
[[gnu::always_inline]] inline void ExpN(VN (&x)[N]) {
  CephesExpN<VN, VIN, N>(x);
}
// Vectors whose scores Rescale exponentiates together: 4 chains on 32 zmm, 2 on 16 registers.
constexpr int kExpGroup = kVN == 16 ? 4 : 2;

#if defined(__AVX512F__)
constexpr VN kLaneIndex = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#elif defined(__AVX__)
constexpr VN kLaneIndex = {0, 1, 2, 3, 4, 5, 6, 7};
#else
constexpr VN kLaneIndex = {0, 1, 2, 3};
#endif

// Query vectors of one kv head scored together, and keys per tile: each K load (and widening)
// serves kScoreHeads vectors and each q load kScoreKeys keys, with kScoreHeads * kScoreKeys
// accumulators of 16 lanes in registers (16 of 32 zmm with AVX-512; 12 of 16 ymm with AVX2, best
// of 4x1, 2x2, 2x3 and 1x4 there). One vector and one key at a time, the score loop loaded two
// operands per multiply-add and ran at a quarter of the FMA peak. Any tiling gives the same bits:
// each (vector, key) keeps DotLanes' order.
constexpr int kScoreHeads = kVN == 16 ? 4 : 2;
constexpr int kScoreKeys = kVN == 16 ? 4 : kVN == 8 ? 3 : 1;

// acc[g][b] = DotLanes' 16 lanes of q[g] . key j0 + b (g < G, b < KB), key j at k + j * stride;
// when `ask`, asks for the line pf elements past each line of K it reads (the next block's).
template <int G, int KB, int kHd, typename KT>
[[gnu::always_inline]] inline void DotTile(const float* const* q, const KT* k, int64_t stride,
                                           int hd, F16 (&acc)[G][KB], int j0, int64_t pf,
                                           bool ask) {
  const int n = kHd > 0 ? kHd : hd;
  for (int g = 0; g < G; ++g) {
    for (int b = 0; b < KB; ++b) acc[g][b] = F16{};
  }
  const KT* kr[KB];
  for (int b = 0; b < KB; ++b) kr[b] = k + (j0 + b) * stride;
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int r = 0; r < kParts; ++r) {
      VN x[KB];
      for (int b = 0; b < KB; ++b) x[b] = LoadLanes(kr[b] + i + kVN * r);
      if (ask && (i + kVN * r) * sizeof(KT) % 64 == 0) {
        for (int b = 0; b < KB; ++b) __builtin_prefetch(kr[b] + i + kVN * r + pf, 0, 3);
      }
      for (int g = 0; g < G; ++g) {
        const VN qv = Load(q[g] + i + kVN * r);
        for (int b = 0; b < KB; ++b) acc[g][b].v[r] = Fma(qv, x[b], acc[g][b].v[r]);
      }
    }
  }
  for (; i < n; ++i) {
    const int l = i & (kLanes - 1);
    for (int b = 0; b < KB; ++b) {
      const float x = ToFloat(kr[b][i]);
      for (int g = 0; g < G; ++g) {
        float& a = acc[g][b].v[l / kVN][l % kVN];
        a = FmaF(q[g][i], x, a);
      }
    }
  }
}

// Scores sc (of keys j < count in lanes) scaled, soft-capped, stored to s[0 .. 16).
[[gnu::always_inline]] inline void StoreScores(F16 sc, int count, float* s, float scale,
                                               float softcap) {
  for (int r = 0; r < kParts; ++r) sc.v[r] *= scale;
  if (softcap > 0.0f) {
    for (int j = 0; j < count; ++j) {
      float& x = sc.v[j / kVN][j % kVN];
      x = __builtin_tanhf(x / softcap) * softcap;
    }
  }
  for (int r = 0; r < kParts; ++r) Store(s + kVN * r, sc.v[r]);
}

// The scores of G vectors (queries q[g]) against keys j < count (at k + j * stride): scaled,
// soft-capped, stored to s[g][j] for j < 16 (lanes past count hold 0 * scale).
template <int G, int kHd, typename KT>
[[gnu::always_inline]] inline void ScoresTileHd(const float* const* q, const KT* k, int64_t stride,
                                                int count, int hd, float* const* s, float scale,
                                                float softcap, int64_t pf, bool ask) {
#if defined(__AVX512F__)
  // A full group: each tile's 4 keys fill a quarter of the reduction tree at once, where the
  // 16 keys' accumulators went through memory (prefill 512 and decode 3-5% faster).
  static_assert(kScoreKeys == 4);
  if (count == kLanes) {
    V16 quarter[G][4];
    for (int j = 0; j < kLanes; j += 4) {
      F16 acc[G][4];
      DotTile<G, 4, kHd>(q, k, stride, hd, acc, j, pf, ask);
      for (int g = 0; g < G; ++g) quarter[g][j / 4] = ReduceQuarter(acc[g]);
    }
    for (int g = 0; g < G; ++g)
      StoreScores(ReduceQuarters(quarter[g]), count, s[g], scale, softcap);
    return;
  }
#endif
  F16 part[G][kLanes];
  int j = 0;
  for (; j + kScoreKeys <= count; j += kScoreKeys) {
    F16 acc[G][kScoreKeys];
    DotTile<G, kScoreKeys, kHd>(q, k, stride, hd, acc, j, pf, ask);
    for (int g = 0; g < G; ++g) {
      for (int b = 0; b < kScoreKeys; ++b) part[g][j + b] = acc[g][b];
    }
  }
  for (; j < count; ++j) {
    F16 acc[G][1];
    DotTile<G, 1, kHd>(q, k, stride, hd, acc, j, pf, ask);
    for (int g = 0; g < G; ++g) part[g][j] = acc[g][0];
  }
  for (int g = 0; g < G; ++g) {
    for (int jj = count; jj < kLanes; ++jj) part[g][jj] = F16{};
    StoreScores(ReduceLanes16(part[g]), count, s[g], scale, softcap);
  }
}
template <int G, typename KT>
inline void ScoresTile(const float* const* q, const KT* k, int64_t stride, int count, int hd,
                       float* const* s, float scale, float softcap, int64_t pf, bool ask) {
  switch (hd) {  // the common head sizes get unrolled dot products
    case 64:
      return ScoresTileHd<G, 64>(q, k, stride, count, hd, s, scale, softcap, pf, ask);
    case 128:
      return ScoresTileHd<G, 128>(q, k, stride, count, hd, s, scale, softcap, pf, ask);
    default:
      return ScoresTileHd<G, 0>(q, k, stride, count, hd, s, scale, softcap, pf, ask);
  }
}
// ScoresTile for n <= kScoreHeads vectors (the first tile asks for the next lines when `ask`).
template <typename KT>
inline void ScoresOf(int n, const float* const* q, const KT* k, int64_t stride, int count, int hd,
                     float* const* s, float scale, float softcap, int64_t pf, bool ask) {
  int g = 0;
  if constexpr (kScoreHeads >= 4) {
    for (; g + 4 <= n; g += 4, ask = false) {
      ScoresTile<4>(q + g, k, stride, count, hd, s + g, scale, softcap, pf, ask);
    }
  }
  for (; g + 2 <= n; g += 2, ask = false) {
    ScoresTile<2>(q + g, k, stride, count, hd, s + g, scale, softcap, pf, ask);
  }
  if (g < n) ScoresTile<1>(q + g, k, stride, count, hd, s + g, scale, softcap, pf, ask);
}

// The largest of vector v's scores s[lo..hi] (-inf for an empty range).
inline float BlockMax(const TaskScratch& st, int v, int lo, int hi) {
  const float* s = st.s[v];
  VN vmax = VN{} - std::numeric_limits<float>::infinity();
  for (int i = lo; i <= hi; i += kVN) {
    const VIN valid = kLaneIndex < static_cast<float>(hi - i + 1);
    const VN x = Load(s + i);
    vmax = valid && x > vmax ? x : vmax;
  }
  return MaxLane(vmax);
}

// Vectors v0 .. v0 + N - 1, of key range [lo, hi]: scores s[lo..hi] become exp(score - m_new),
// their sum (16 lanes, DotLanes' tree) is added to the running sum scaled by `factor`, and the
// max becomes m_new. (Rescale's step for each vector.)
template <int N>
[[gnu::always_inline]] inline void ExpScores(TaskScratch& st, int v0, int lo, int hi,
                                             const float* m_new, const float* factor) {
  F16 lanes[N] = {};
  for (int i = lo; i <= hi; i += kLanes) {  // s is padded: padding lanes are not added
    for (int r = 0; r < kParts; ++r) {
      VN e[N];
      for (int k = 0; k < N; ++k) e[k] = Load(st.s[v0 + k] + i + kVN * r) - m_new[v0 + k];
      ExpN(e);
      const VIN valid = kLaneIndex < static_cast<float>(hi - i - kVN * r + 1);
      for (int k = 0; k < N; ++k) {
        Store(st.s[v0 + k] + i + kVN * r, e[k]);
        lanes[k].v[r] += valid ? e[k] : VN{};
      }
    }
  }
  for (int k = 0; k < N; ++k) {
    const int v = v0 + k;
    st.m[v] = m_new[v];
    st.l[v] = st.l[v] * factor[v] + SumLanes(lanes[k]);
  }
}

// Online-softmax update of the block's vectors [0, nv), given each one's block max (-inf for a
// vector without keys in the block, which keeps its state): the new max, and the factor of the
// running sum and accumulator, exp(old max - new max) by Exp, kVN vectors at a time; then each
// vector's scores s[lo..hi] become exp(score - new max), and their sum is added to the running
// sum. That sum is taken in 16 lanes (lane l: keys lo + l, lo + 16 + l, ... in order) and reduced
// by DotLanes' tree: independent chains, where one serial sum of the keys bounded this loop.
inline void Rescale(TaskScratch& st, int nv, const int* lo, const int* hi, const float* bmax,
                    float* factor) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  alignas(64) float m_new[kAttnMaxVectors];
  for (int v0 = 0; v0 < nv; v0 += kVN) {  // the arrays hold kAttnMaxVectors, a multiple of kVN
    const VN m = Load(st.m + v0), b = Load(bmax + v0);
    const VN mn = m > b ? m : b;
    const VN f = Exp(m - mn);
    Store(m_new + v0, mn);
    Store(factor + v0, m == kNone ? VN{} : f);
  }
  for (int v = 0; v < nv;) {
    if (lo[v] > hi[v]) {
      ++v;
      continue;
    }
    int n = 1;  // vectors v .. v + n - 1 share the key range: their exps go together
    while (n < kExpGroup && v + n < nv && lo[v + n] == lo[v] && hi[v + n] == hi[v]) ++n;
    if constexpr (kExpGroup >= 4) {
      if (n == 4) {
        ExpScores<4>(st, v, lo[v], hi[v], m_new, factor);
        v += 4;
        continue;
      }
    }
    if (n >= 2) {
      ExpScores<2>(st, v, lo[v], hi[v], m_new, factor);
      v += 2;
    } else {
      ExpScores<1>(st, v, lo[v], hi[v], m_new, factor);
      v += 1;
    }
  }
}

// For each of G vectors with the same key range [lo, hi] and kv head (q heads of one group at one
// position): acc[g][d] = acc[g][d] * factor[g] + sum over keys i in [lo, hi] (in order) of
// w[g][i] * vrow_i[d] (fused multiply-adds), where vrow_i = v0 + i * stride. Each V row is loaded
// once for all G, and their accumulators' add chains interleave (one vector at a time, a chain of
// dependent adds per accumulator bounded this loop).
template <int G, typename KT>
inline void AccumulateValuesG(float* const* acc, const float* factor, const float* const* w,
                              const KT* v0, int64_t stride, int lo, int hi, int hd, int64_t pf,
                              bool ask) {
  constexpr int C = kAccChunk;
  int d = 0;
  for (; d + C * kVN <= hd; d += C * kVN) {
    VN a[G][C];
    for (int g = 0; g < G; ++g) {
      for (int c = 0; c < C; ++c) a[g][c] = Load(acc[g] + d + kVN * c) * factor[g];
    }
    for (int i = lo; i <= hi; ++i) {
      const KT* vr = v0 + i * stride + d;
      VN x[C];
      for (int c = 0; c < C; ++c) x[c] = LoadLanes(vr + kVN * c);
      for (int c = 0; c < C && ask; ++c) {
        if (kVN * c * sizeof(KT) % 64 == 0) __builtin_prefetch(vr + kVN * c + pf, 0, 3);
      }
      for (int g = 0; g < G; ++g) {
        const VN wi = Splat(w[g][i]);
        for (int c = 0; c < C; ++c) a[g][c] = Fma(wi, x[c], a[g][c]);
      }
    }
    for (int g = 0; g < G; ++g) {
      for (int c = 0; c < C; ++c) Store(acc[g] + d + kVN * c, a[g][c]);
    }
  }
  for (; d + kVN <= hd; d += kVN) {
    for (int g = 0; g < G; ++g) {
      VN a = Load(acc[g] + d) * factor[g];
      for (int i = lo; i <= hi; ++i) a = Fma(Splat(w[g][i]), LoadLanes(v0 + i * stride + d), a);
      Store(acc[g] + d, a);
    }
  }
  for (; d < hd; ++d) {
    for (int g = 0; g < G; ++g) {
      float a = acc[g][d] * factor[g];
      for (int i = lo; i <= hi; ++i) a = FmaF(w[g][i], ToFloat(v0[i * stride + d]), a);
      acc[g][d] = a;
    }
  }
}

// Asks for the task's K and V rows of logical block b (its kv heads are contiguous in a row).
inline void PrefetchBlock(const AttendTask& t, int b) {
  const AttentionParams& p = *t.params;
  const int64_t elem = p.kv_dtype == DType::kF16 ? 2 : 4;
  const int64_t stride = static_cast<int64_t>(p.kv_heads) * p.head_dim * elem;
  const int64_t base = static_cast<int64_t>(t.table[b]) * p.block_size * stride +
                       static_cast<int64_t>(t.kv0) * p.head_dim * elem;
  const int bytes = static_cast<int>(t.nkv * p.head_dim * elem);
  for (int i = 0; i < p.block_size; ++i) {
    const char* k = static_cast<const char*>(t.k_cache) + base + i * stride;
    const char* v = static_cast<const char*>(t.v_cache) + base + i * stride;
    for (int off = 0; off < bytes; off += 64) {
      __builtin_prefetch(k + off, 0, 3);
      __builtin_prefetch(v + off, 0, 3);
    }
  }
}

// Which of a task's kv heads (bit j: t.kv0 + j) have asked for the next block's lines, twice at
// most: a second request helps when the first was dropped (decode of 8 q heads a kv head, two
// groups: 0.14 against 0.18 ms asking once, float cache), all eight groups of a prefill tile
// asking slowed prefill (8.9 against 8.5 ms).
struct NextBlockAsks {
  uint32_t once = 0, twice = 0;
  // Whether the vectors of kv head `head` (from the task's first) read next ask; counts them.
  bool Ask(int head) {
    const uint32_t bit = 1u << head;
    const bool ask = (twice & bit) == 0;
    twice |= once & bit;
    once |= bit;
    return ask;
  }
};

// Keys [lo_all, hi_all] of one block for vectors [0, nv) (vector v's own range [lo[v], hi[v]]):
// key i's K row at kb + i * kst, V row at vb + i * kst, a vector's kv head at + kv_off - shift.
// Each line of K and V read asks for the line pf elements on: the next block's, read next (once:
// by the first vectors of a kv head that read the line).
template <typename KT>
void AttendKeys(const AttendTask& t, TaskScratch& st, int nv, const int* lo, const int* hi,
                int lo_all, int hi_all, const KT* kb, const KT* vb, int64_t kst, int64_t shift,
                int64_t pf) {
  const AttentionParams& p = *t.params;
  const int hd = p.head_dim;
  // Scores of 16 keys at a time, the vectors of one kv head that see some of them together
  // (keys of [lo_all, hi_all] outside a vector's own range are computed and never read; lanes
  // past hi_all land in the padding of s).
  const float scale = p.scale, softcap = p.softcap;
  for (int i0 = lo_all; i0 <= hi_all; i0 += kLanes) {
    const int count = MinI(kLanes, hi_all - i0 + 1);
    const KT* k0 = kb + i0 * kst;
    auto sees = [&](int v) { return i0 + count > lo[v] && i0 <= hi[v]; };
    NextBlockAsks asks;  // for K lines
    for (int v = 0; v < nv;) {
      if (!sees(v)) {
        ++v;
        continue;
      }
      int n = 1;
      while (n < kScoreHeads && v + n < nv && sees(v + n) && st.v[v + n].kv_off == st.v[v].kv_off) {
        ++n;
      }
      const float* q[kScoreHeads];
      float* s[kScoreHeads];
      for (int g = 0; g < n; ++g) {
        q[g] = st.v[v + g].q;
        s[g] = st.s[v + g] + i0;
      }
      ScoresOf(n, q, k0 + (st.v[v].kv_off - shift), kst, count, hd, s, scale, softcap, pf,
               asks.Ask(static_cast<int>(st.v[v].kv_off / hd) - t.kv0));
      v += n;
    }
  }
  // All softmax updates first (independent chains), then the values.
  alignas(64) float bmax[kAttnMaxVectors], factor[kAttnMaxVectors];
  for (int v = 0; v < kAttnMaxVectors; ++v) {
    bmax[v] = v < nv && lo[v] <= hi[v] ? BlockMax(st, v, lo[v], hi[v])
                                       : -std::numeric_limits<float>::infinity();
  }
  Rescale(st, nv, lo, hi, bmax, factor);
  NextBlockAsks asks;  // for V lines
  for (int v = 0; v < nv;) {
    if (lo[v] > hi[v]) {
      ++v;
      continue;
    }
    int n = 1;  // vectors v .. v + n - 1 share the key range and the kv head
    while (n < kAccGroup && v + n < nv && lo[v + n] == lo[v] && hi[v + n] == hi[v] &&
           st.v[v + n].kv_off == st.v[v].kv_off) {
      ++n;
    }
    float* acc[kAccGroup];
    const float* w[kAccGroup];
    for (int g = 0; g < n; ++g) {
      acc[g] = st.acc[v + g];
      w[g] = st.s[v + g];
    }
    const KT* v0 = vb + (st.v[v].kv_off - shift);
    const bool ask = asks.Ask(static_cast<int>(st.v[v].kv_off / hd) - t.kv0);
    switch (n) {
      case 4:
        AccumulateValuesG<4>(acc, factor + v, w, v0, kst, lo[v], hi[v], hd, pf, ask);
        break;
      case 3:
        AccumulateValuesG<3>(acc, factor + v, w, v0, kst, lo[v], hi[v], hd, pf, ask);
        break;
      case 2:
        AccumulateValuesG<2>(acc, factor + v, w, v0, kst, lo[v], hi[v], hd, pf, ask);
        break;
      default:
        AccumulateValuesG<1>(acc, factor + v, w, v0, kst, lo[v], hi[v], hd, pf, ask);
    }
    v += n;
  }
}

// Keys of logical block b for every vector that sees some of them, asking for logical block
// `next` (none when negative) as they are read: each line of K and V read asks for the same line
// of the next block, so the requests keep pace with the reads. (Asking for a whole block at
// once, 64 KiB for Llama-3-8B's eight kv heads, queued a thousand requests behind the core's few
// outstanding misses, and the first loads of the block waited for them: 19 GB/s of K/V from
// DRAM at 2 threads.)
void AttendBlock(const AttendTask& t, TaskScratch& st, int nv, int b, int next) {
  const AttentionParams& p = *t.params;
  const int64_t stride = static_cast<int64_t>(p.kv_heads) * p.head_dim;
  const int64_t base = static_cast<int64_t>(t.table[b]) * p.block_size * stride;
  const int64_t pf =
      next < 0 ? 0 : (static_cast<int64_t>(t.table[next]) - t.table[b]) * p.block_size * stride;
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
  if (hi_all < lo_all) return;
  if (p.kv_dtype != DType::kF16) {
    const float* k = static_cast<const float*>(t.k_cache) + base;
    const float* v = static_cast<const float*>(t.v_cache) + base;
    AttendKeys(t, st, nv, lo, hi, lo_all, hi_all, k, v, stride, 0, pf);
    return;
  }
  const uint16_t* k16 = static_cast<const uint16_t*>(t.k_cache) + base;
  const uint16_t* v16 = static_cast<const uint16_t*>(t.v_cache) + base;
  if constexpr (kHalfInPlace) {
    AttendKeys(t, st, nv, lo, hi, lo_all, hi_all, k16, v16, stride, 0, pf);
  } else {  // the task's kv heads of rows [lo_all, hi_all], widened into t.widened
    const int64_t kst = static_cast<int64_t>(t.nkv) * p.head_dim;
    const int64_t shift = static_cast<int64_t>(t.kv0) * p.head_dim;
    float* kw = t.widened;
    float* vw = t.widened + p.block_size * kst;
    for (int i = lo_all; i <= hi_all; ++i) {
      WidenHalves(k16 + shift + i * stride, kw + i * kst, static_cast<int>(kst));
      WidenHalves(v16 + shift + i * stride, vw + i * kst, static_cast<int>(kst));
    }
    if (next >= 0) PrefetchBlock(t, next);  // the widened copy is read, not the cache
    AttendKeys<float>(t, st, nv, lo, hi, lo_all, hi_all, kw, vw, kst, shift, 0);
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

// Vector v's segment state afresh: no keys yet.
inline void ResetVector(TaskScratch& st, int v, int hd) {
  st.m[v] = -std::numeric_limits<float>::infinity();
  st.l[v] = 0.0f;
  for (int d = 0; d < hd; ++d) st.acc[v][d] = 0.0f;
}

// Folds a segment's state (max m, sum l, weighted values acc) into vector v's running state:
// both rescaled to the larger max, then added. A segment without keys (m = -inf) changes nothing;
// into a running state without keys the segment's is copied. Element-wise steps and libm exp:
// the same bits with every ISA.
inline void Fold(TaskScratch& st, int v, float m, float l, const float* acc, int hd) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  if (m == kNone) return;
  float* run = st.run[v];
  if (st.run_m[v] == kNone) {
    st.run_m[v] = m;
    st.run_l[v] = l;
    for (int d = 0; d < hd; ++d) run[d] = acc[d];
    return;
  }
  const float mx = st.run_m[v] > m ? st.run_m[v] : m;
  const float f_run = __builtin_expf(st.run_m[v] - mx), f_seg = __builtin_expf(m - mx);
  st.run_m[v] = mx;
  st.run_l[v] = st.run_l[v] * f_run + l * f_seg;
  int d = 0;
  for (; d + kVN <= hd; d += kVN) Store(run + d, Load(run + d) * f_run + Load(acc + d) * f_seg);
  for (; d < hd; ++d) run[d] = run[d] * f_run + acc[d] * f_seg;
}

// Keys of logical blocks [b_lo, b_hi], asking for each next block up to b_stop (the caller asked
// for b_lo).
inline void AttendBlocks(const AttendTask& t, TaskScratch& st, int nv, int b_lo, int b_hi,
                         int b_stop) {
  for (int b = b_lo; b <= b_hi; ++b) AttendBlock(t, st, nv, b, b < b_stop ? b + 1 : -1);
}

void AttendImpl(const AttendTask& t) {
  const AttentionParams& p = *t.params;
  const int hd = p.head_dim;
  const int nv = t.rows * t.nkv * t.heads;
  const int64_t state = StateFloats(p);
  TaskScratch st;
  for (int v = 0; v < kAttnMaxVectors; ++v) {  // Rescale reads every lane of these
    st.m[v] = -std::numeric_limits<float>::infinity();
    st.l[v] = 0.0f;
  }
  int seg_blocks[kAttnMaxVectors];
  for (int v = 0; v < nv; ++v) {
    int r = 0;
    VecState& vs = st.v[v];
    vs.q = t.q + HeadOffset(t, v, &r);
    vs.pos = t.pos0 + r;
    vs.first = p.sliding_window > 0 ? MaxI(0, vs.pos - p.sliding_window + 1) : 0;
    vs.kv_off = static_cast<int64_t>(t.kv0 + (v % (t.nkv * t.heads)) / t.heads) * hd;
    ResetVector(st, v, hd);
    st.run_m[v] = -std::numeric_limits<float>::infinity();
    st.run_l[v] = 0.0f;
    for (int d = 0; d < hd; ++d) st.run[v][d] = 0.0f;
    seg_blocks[v] = SegmentBlocks(vs.pos, p.block_size);
  }
  // Vector 0 is row 0's (position pos0): the first key any vector sees.
  const int b_first =
      (p.sliding_window > 0 ? MaxI(0, t.pos0 - p.sliding_window + 1) : 0) / p.block_size;
  const int b_last = (t.pos0 + t.rows - 1) / p.block_size;
  if (t.mode == AttendMode::kSegments) {  // one row: every vector has the same segments
    const int sb = seg_blocks[0];
    for (int j = t.seg_lo; j < t.seg_hi; ++j) {
      for (int v = 0; v < nv; ++v) ResetVector(st, v, hd);
      const int b_lo = MaxI(b_first, j * sb), b_hi = MinI(b_last, (j + 1) * sb - 1);
      if (b_lo <= b_hi) PrefetchBlock(t, b_lo);
      AttendBlocks(t, st, nv, b_lo, b_hi, b_hi);
      for (int v = 0; v < nv; ++v) {
        float* out = t.partial + (static_cast<int64_t>(j) * nv + v) * state;
        out[0] = st.m[v];
        out[1] = st.l[v];
        for (int d = 0; d < hd; ++d) out[2 + d] = st.acc[v][d];
      }
    }
    return;
  }
  if (t.mode == AttendMode::kFinish) {  // one row: the states of segments 0 .. last, in order
    const int segments = SegmentCount(t.pos0, p.block_size);
    for (int j = 0; j < segments; ++j) {
      for (int v = 0; v < nv; ++v) {
        const float* in = t.partial + (static_cast<int64_t>(j) * nv + v) * state;
        Fold(st, v, in[0], in[1], in + 2, hd);
      }
    }
  } else {
    PrefetchBlock(t, b_first);
    int b_lo = b_first;  // blocks [b_lo, b) are attended, not yet folded
    for (int b = b_first + 1; b <= b_last + 1; ++b) {
      bool ends = b > b_last;
      for (int v = 0; v < nv && !ends; ++v) ends = b % seg_blocks[v] == 0;
      if (!ends) continue;
      AttendBlocks(t, st, nv, b_lo, b - 1, b_last);
      b_lo = b;
      for (int v = 0; v < nv; ++v) {
        if (b > b_last || b % seg_blocks[v] == 0) {
          Fold(st, v, st.m[v], st.l[v], st.acc[v], hd);
          ResetVector(st, v, hd);
        }
      }
    }
  }
  for (int v = 0; v < nv; ++v) {
    int r = 0;
    float* o = t.out + HeadOffset(t, v, &r);
    const float inv = st.run_l[v] > 0 ? 1.0f / st.run_l[v] : 0.0f;
    for (int d = 0; d < hd; ++d) o[d] = st.run[v][d] * inv;
  }
}

}  // namespace
}  // namespace llm::kernels::internal
