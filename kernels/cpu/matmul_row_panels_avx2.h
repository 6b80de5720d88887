// The matmul of F16 / BF16 row panels (kF16RowPanels, kBF16RowPanels: f16_row_panels.h) for the
// AVX2 set, included by matmul_avx2.cc; in an anonymous namespace: code compiled with one TU's
// ISA flags is never the copy another TU links.
//
// The same arithmetic as the AVX-512 sets' (matmul_row_panels.h), so the same bits: each output
// y[i][j] is one FMA chain over k in order, x[i][p] * w[j][p] added to an F32 sum from +0, then
// + bias. A panel column (16 rows) is two 8-lane vectors here; output j sits in lane j % 8 of
// half (j % 16) / 8 of its panel's accumulators.
//
// A tile is T input rows x R panels: 2 T R accumulators of the 16 ymm, the rest for the
// broadcasts and the widened weights. T <= 2 widens each weight vector and uses it at once for
// the T rows (their broadcasts held: 2 T R + T + 1 registers; R = 4 at T = 1, a GEMV's four
// streams; R = 2 at T = 2); T = 4 and 6 hold a column's two widened halves and broadcast one row
// at a time (2 T + 3), one panel. Batches up to 8 rows run as row tiles of 2 over two panels,
// larger ones as row tiles of 6, 6 and 4 per token tile over one panel (kPairRowsMaxM).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/f16_row_panels.h"
#include "kernels/cpu/matmul_internal.h"

namespace llm::kernels::internal {
namespace {

// 8 weights (16 bits each) as floats, exactly.
struct F16Widen8 {
  static __m256 Widen(__m128i h) { return _mm256_cvtph_ps(h); }
};
struct Bf16Widen8 {
  static __m256 Widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

// Rows [8h, 8h + 8) of the panel column at c (`column` weights, one per row of the panel): the
// last panel of a matrix may have fewer than 16 rows (kTail), then the column is copied into
// zeros first.
template <class W, bool kTail>
[[gnu::always_inline]] inline __m256 PanelHalf(const uint16_t* c, int column, int h) {
  if constexpr (kTail) {
    uint16_t buf[8] = {};
    const int n = std::clamp(column - 8 * h, 0, 8);
    if (n > 0) std::memcpy(buf, c + 8 * h, sizeof(uint16_t) * n);
    return W::Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)));
  } else {
    return W::Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 8 * h)));
  }
}

// R panels (stride apart; the one of `rows` rows when kTail, R = 1) times T rows of the token
// tile xt (x[i][p] at xt[p * ldt + i]) into y (row i at y + i * ldy), for the first `tokens`
// of the T rows. l1 / l2: the first panel's software prefetch distances (none at 0).
template <class W, int T, int R, bool kTail>
void RowPanelsTile8(const uint16_t* w, int64_t stride, int rows, int k, const float* xt, int ldt,
                    int tokens, const float* bias, float* y, int64_t ldy, uintptr_t l1,
                    uintptr_t l2) {
  static_assert(!kTail || R == 1, "the tail panel alone");
  static_assert(T <= 2 ? 2 * T * R + T + 1 <= 16 : R == 1 && 2 * T + 3 <= 16, "16 ymm");
  const int column = kTail ? rows : kF16PanelRows;
  __m256 acc[T][2 * R];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int a = 0; a < 2 * R; ++a) acc[t][a] = _mm256_setzero_ps();
  }
  auto step = [&](int p) __attribute__((always_inline)) {
    const float* xp = xt + static_cast<int64_t>(p) * ldt;
    if constexpr (T <= 2) {
      __m256 b[T];
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) b[t] = _mm256_broadcast_ss(xp + t);
#pragma GCC unroll 8
      for (int a = 0; a < 2 * R; ++a) {
        const __m256 wv = PanelHalf<W, kTail>(
            w + (a / 2) * stride + static_cast<int64_t>(p) * column, column, a % 2);
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) acc[t][a] = _mm256_fmadd_ps(wv, b[t], acc[t][a]);
      }
    } else {
      const uint16_t* c = w + static_cast<int64_t>(p) * column;
      const __m256 w0 = PanelHalf<W, kTail>(c, column, 0);
      const __m256 w1 = PanelHalf<W, kTail>(c, column, 1);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m256 b = _mm256_broadcast_ss(xp + t);
        acc[t][0] = _mm256_fmadd_ps(w0, b, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(w1, b, acc[t][1]);
      }
    }
  };
  int p = 0;
  if (l1 != 0) {  // two columns a step: one 64-byte line of each full panel
    for (; p + 1 < k; p += 2) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uintptr_t a =
            reinterpret_cast<uintptr_t>(w + r * stride + static_cast<int64_t>(p) * column) + l1;
        PrefetchLine<true>(a);
        if (l2 != 0) PrefetchLine<false>(a + l2);
      }
      step(p);
      step(p + 1);
    }
  }
  for (; p < k; ++p) step(p);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    if (t >= tokens) break;
#pragma GCC unroll 8
    for (int a = 0; a < 2 * R; ++a) {
      if constexpr (kTail) {
        const int n = std::clamp(column - 8 * a, 0, 8);
        if (n == 0) continue;  // a tail of 8 rows or fewer: no second half
        float s[8];
        _mm256_storeu_ps(s, acc[t][a]);
        float* out = y + t * ldy + 8 * a;
        for (int i = 0; i < n; ++i) out[i] = bias != nullptr ? s[i] + bias[8 * a + i] : s[i];
      } else {
        __m256 v = acc[t][a];
        if (bias != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + 8 * a));
        _mm256_storeu_ps(y + t * ldy + 8 * a, v);
      }
    }
  }
}

// Panels [q0, q1) of a call (`full` full panels, then a tail panel of `tail` rows), R at a time,
// for row tiles of T rows.
template <class W, int T>
void RowPanelsRange8(const uint16_t* w, int k, int q0, int q1, int full, int tail, const float* xt,
                     int ldt, int tokens, const float* bias, float* y, int64_t ldy, uintptr_t l1,
                     uintptr_t l2) {
  constexpr int kMaxR = T == 1 ? 4 : T == 2 ? 2 : 1;
  const int64_t stride = static_cast<int64_t>(kF16PanelRows) * k;
  for (int q = q0; q < q1;) {
    const uint16_t* wq = w + q * stride;
    const float* bq = bias != nullptr ? bias + kF16PanelRows * q : nullptr;
    float* yq = y + kF16PanelRows * q;
    if (q == full) {  // the tail panel
      RowPanelsTile8<W, T, 1, true>(wq, stride, tail, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
      ++q;
      continue;
    }
    const int r = std::min(kMaxR, std::min(q1, full) - q);
    switch (r) {
      case 1:
        RowPanelsTile8<W, T, 1, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        break;
      case 2:
        if constexpr (kMaxR >= 2) {
          RowPanelsTile8<W, T, 2, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        }
        break;
      case 3:
        if constexpr (kMaxR >= 3) {
          RowPanelsTile8<W, T, 3, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        }
        break;
      default:
        if constexpr (kMaxR >= 4) {
          RowPanelsTile8<W, T, 4, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        }
        break;
    }
    q += r;
  }
}

// Up to this many input rows run as row tiles of 2 over two panels at a time (two streams; the
// later row tiles find the pair in L2), more as row tiles of 6, 6 and 4 over one panel at a time.
// Measured on AMD Zen 4 (4 Dec 2026, `kernel_bench matmul` with LLM_MATMUL_ISA=avx2-fma, k = n =
// 4096, 2 threads, GFLOP/s, two rounds): m = 4 80-96 against 60-73 as one row tile of 4, m = 8
// 111-117 against 88-103, m = 16 135-145 either way.
constexpr int kPairRowsMaxM = 8;

// y[0:m, n0:n1] (n0 a multiple of 16; n1 - n0 <= 64: up to four panels) from x as the row
// itself (m = 1) or as token tiles (MakeRowPanelTokens).
template <class W>
void RowPanelsPanel8(const float* x, int m, int k, const void* wv, int n0, int n1,
                     const float* bias, float* y, int ldy) {
  const uint16_t* w = static_cast<const uint16_t*>(wv) + static_cast<int64_t>(n0) * k;
  const int full = (n1 - n0) / kF16PanelRows, tail = (n1 - n0) % kF16PanelRows;
  const int panels = full + (tail > 0 ? 1 : 0);
  const float* b = bias != nullptr ? bias + n0 : nullptr;
  const uintptr_t l2 = g_prefetch.f16_packed_l2;
  if (m == 1) {  // four panels at a time: a GEMV reads four streams
    RowPanelsRange8<W, 1>(w, k, 0, panels, full, tail, x, 1, 1, b, y + n0, ldy,
                          g_prefetch.f16_packed, l2);
    return;
  }
  if (m <= kPairRowsMaxM) {  // a single token tile
    for (int q = 0; q < panels; q += 2) {
      for (int i0 = 0; i0 < m; i0 += 2) {
        const uintptr_t l1 = i0 == 0 ? g_prefetch.f16_packed : 0;
        float* yt = y + static_cast<int64_t>(i0) * ldy + n0;
        const int q1 = std::min(q + 2, panels);
        if (m - i0 == 1) {
          RowPanelsRange8<W, 1>(w, k, q, q1, full, tail, x + i0, kRowPanelTokens, 1, b, yt, ldy, l1,
                                l2);
        } else {
          RowPanelsRange8<W, 2>(w, k, q, q1, full, tail, x + i0, kRowPanelTokens, 2, b, yt, ldy, l1,
                                l2);
        }
      }
    }
    return;
  }
  const int tiles = (m + kRowPanelTokens - 1) / kRowPanelTokens;
  for (int q = 0; q < panels; ++q) {  // a panel at a time: its row tiles find it in L2
    for (int t0 = 0; t0 < tiles; ++t0) {
      const int in_tile = std::min(kRowPanelTokens, m - kRowPanelTokens * t0);
      const float* xt = x + static_cast<int64_t>(t0) * k * kRowPanelTokens;
      for (int i0 = 0; i0 < in_tile;) {
        const int rest = in_tile - i0, tokens = std::min(rest, 6);
        const uintptr_t l1 = t0 == 0 && i0 == 0 ? g_prefetch.f16_packed : 0;
        float* yt = y + (static_cast<int64_t>(kRowPanelTokens) * t0 + i0) * ldy + n0;
        auto run = [&]<int T>() {
          RowPanelsRange8<W, T>(w, k, q, q + 1, full, tail, xt + i0, kRowPanelTokens, tokens, b, yt,
                                ldy, l1, l2);
        };
        switch (tokens) {
          case 1:
            run.template operator()<1>();
            break;
          case 2:
            run.template operator()<2>();
            break;
          case 3:
          case 4:
            run.template operator()<4>();
            break;
          default:
            run.template operator()<6>();
            break;
        }
        i0 += tokens;
      }
    }
  }
}

}  // namespace
}  // namespace llm::kernels::internal
