// The matmul of F16 / BF16 row panels (kF16RowPanels, kBF16RowPanels: f16_row_panels.h) for the
// AVX-512 sets, included by matmul_avx512.cc; in an anonymous namespace: code compiled with one
// TU's ISA flags is never the copy another TU links.
//
// Each output y[i][j] is one FMA chain over k in order, x[i][p] * w[j][p] added to an F32 sum
// from +0 (then + bias, one more rounding): lane j % 16 of the tile's accumulator for row i and
// row j's panel. Every m, tile shape and kernel set computes exactly that chain, so a row's bits
// are those of the row alone (batch invariance), and equal to a scalar loop of std::fma.
//
// A tile is T input rows x R panels: per weight column p it widens R vectors (16 rows each) and
// broadcasts T values x[i][p] from the token tile (one 4-byte load each, no shuffle). T is the
// batch rounded up to 1, 2, 3, 4, 6, 8, 12 or 16 (the rows past the batch are zero in the token
// tile and not stored); R as many panels as the registers allow (T R + R <= 31), up to the 4 of
// a call: a GEMV reads four panels as four streams (one stream: ~25% slower from DRAM).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/f16_row_panels.h"
#include "kernels/cpu/matmul_internal.h"

namespace llm::kernels::internal {
namespace {

// 16 weights of a panel column (16 bits each) as floats, exactly.
struct F16Widen {
  static __m512 Widen(__m256i h) { return _mm512_cvtph_ps(h); }
};
struct Bf16Widen {
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

// R panels (stride apart; the last one of `rows` rows when kTail, R = 1) times T rows of the
// token tile xt (x[i][p] at xt[p * ldt + i]) into y (row i at y + i * ldy, the panels' first
// output at y), for the first `tokens` of the T rows. l1 / l2: the first panel's software
// prefetch distances (none at 0), one line per two columns of each panel.
template <class W, int T, int R, bool kTail>
void RowPanelsTile(const uint16_t* w, int64_t stride, int rows, int k, const float* xt, int ldt,
                   int tokens, const float* bias, float* y, int64_t ldy, uintptr_t l1,
                   uintptr_t l2) {
  static_assert(!kTail || R == 1, "the tail panel alone");
  const __mmask16 mask = kTail ? static_cast<__mmask16>((1u << rows) - 1) : 0xFFFF;
  const int column = kTail ? rows : kF16PanelRows;  // weights per column of a panel
  __m512 acc[T * R];
#pragma GCC unroll 64
  for (int a = 0; a < T * R; ++a) acc[a] = _mm512_setzero_ps();
  auto step = [&](int p) __attribute__((always_inline)) {
    __m512 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint16_t* c = w + r * stride + static_cast<int64_t>(p) * column;
      if constexpr (kTail) {
        wv[r] = W::Widen(_mm256_maskz_loadu_epi16(mask, c));
      } else {
        wv[r] = W::Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
      }
    }
    const float* xp = xt + static_cast<int64_t>(p) * ldt;
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 b = _mm512_set1_ps(xp[t]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[t * R + r] = _mm512_fmadd_ps(wv[r], b, acc[t * R + r]);
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
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512 v = acc[t * R + r];
      if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias + 16 * r));
      _mm512_mask_storeu_ps(y + t * ldy + 16 * r, mask, v);
    }
  }
}

// Panels from a call's `full` full panels and its tail of `tail` rows, for tiles of T rows.
template <class W, int T>
void RowPanelsOfTile(const uint16_t* w, int k, int full, int tail, const float* xt, int ldt,
                     int tokens, const float* bias, float* y, int64_t ldy, uintptr_t l1,
                     uintptr_t l2) {
  constexpr int kMaxR = T <= 6 ? 4 : T <= 8 ? 3 : T <= 12 ? 2 : 1;
  const int64_t stride = static_cast<int64_t>(kF16PanelRows) * k;
  for (int q = 0; q < full;) {
    const int r = std::min(kMaxR, full - q);
    const uint16_t* wq = w + q * stride;
    const float* bq = bias != nullptr ? bias + kF16PanelRows * q : nullptr;
    float* yq = y + kF16PanelRows * q;
    switch (r) {
      case 1:
        RowPanelsTile<W, T, 1, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        break;
      case 2:
        if constexpr (kMaxR >= 2) {
          RowPanelsTile<W, T, 2, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        }
        break;
      case 3:
        if constexpr (kMaxR >= 3) {
          RowPanelsTile<W, T, 3, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        }
        break;
      default:
        if constexpr (kMaxR >= 4) {
          RowPanelsTile<W, T, 4, false>(wq, stride, 0, k, xt, ldt, tokens, bq, yq, ldy, l1, l2);
        }
        break;
    }
    q += r;
  }
  if (tail > 0) {
    RowPanelsTile<W, T, 1, true>(w + full * stride, stride, tail, k, xt, ldt, tokens,
                                 bias != nullptr ? bias + kF16PanelRows * full : nullptr,
                                 y + kF16PanelRows * full, ldy, l1, l2);
  }
}

// y[0:m, n0:n1] (n0 a multiple of 16; n1 - n0 <= 64: up to four panels) from x as the row
// itself (m = 1) or as token tiles (MakeRowPanelTokens).
template <class W>
void RowPanelsPanel(const float* x, int m, int k, const void* wv, int n0, int n1, const float* bias,
                    float* y, int ldy) {
  const uint16_t* w = static_cast<const uint16_t*>(wv) + static_cast<int64_t>(n0) * k;
  const int full = (n1 - n0) / kF16PanelRows, tail = (n1 - n0) % kF16PanelRows;
  const float* b = bias != nullptr ? bias + n0 : nullptr;
  const int tiles = m == 1 ? 1 : (m + kRowPanelTokens - 1) / kRowPanelTokens;
  for (int t0 = 0; t0 < tiles; ++t0) {
    const int tokens = m == 1 ? 1 : std::min(kRowPanelTokens, m - kRowPanelTokens * t0);
    const float* xt = m == 1 ? x : x + static_cast<int64_t>(t0) * k * kRowPanelTokens;
    const int ldt = m == 1 ? 1 : kRowPanelTokens;
    float* yt = y + static_cast<int64_t>(kRowPanelTokens) * t0 * ldy + n0;
    // the later token tiles find the panels in L2: no prefetch; a tile of 8 rows or more
    // computes longer per line, so it fetches further ahead (f16_panels_wide)
    const uintptr_t l2 = g_prefetch.f16_packed_l2;
    auto run = [&]<int T>() {
      const uintptr_t l1 = t0 != 0  ? 0
                           : T >= 8 ? g_prefetch.f16_panels_wide
                                    : g_prefetch.f16_packed;
      RowPanelsOfTile<W, T>(w, k, full, tail, xt, ldt, tokens, b, yt, ldy, l1, l2);
    };
    if (tokens <= 4) {
      switch (tokens) {
        case 1:
          run.template operator()<1>();
          break;
        case 2:
          run.template operator()<2>();
          break;
        case 3:
          run.template operator()<3>();
          break;
        default:
          run.template operator()<4>();
          break;
      }
    } else if (tokens <= 6) {
      run.template operator()<6>();
    } else if (tokens <= 8) {
      run.template operator()<8>();
    } else if (tokens <= 12) {
      run.template operator()<12>();
    } else {
      run.template operator()<16>();
    }
  }
}

}  // namespace
}  // namespace llm::kernels::internal
