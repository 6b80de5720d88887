// The packed Q4_0 matmul (q4_0_packed.h) for the AVX-512 translation units, included by
// matmul_quant_x86.h inside their anonymous namespace after LegacyMicro512.
//
// Per group of 16 blocks a weight row costs: one conversion of its 16 scales, and per 64-byte
// run of quants one load, and two masks and a shift for two block pairs. LegacyMicro512 spent a
// masked load, two word permutations, a shift, a mask and a conversion on every pair. The
// activations come as PackedQ4_0XGroup (the dot product starts from -(8 * S) as prepared, the
// scales as lanes). Per output, lanes 0..7 are the even chain and 8..15 the odd one, and each pair
// is fma(d_w * d_x, float(D - 8 S), acc) as in LegacyMicro512: the same bits (tested). The
// blocks after the last group are ggml's and go through LegacyMicro512's Pair.
#pragma once

namespace qx {

using ::llm::kernels::internal::kPackGroupBlocks;
using ::llm::kernels::internal::kPackGroupBytes;
using ::llm::kernels::internal::PackedQ4_0XGroup;

template <int kMRv, int kNRv>
struct PackedQ4_0Micro {
  static constexpr int kMR = kMRv;
  static constexpr int kNR = kNRv;
  using Tail = LegacyMicro512<Q4_0F, kMRv, kNRv>;

  // Lanes 0..7 take element 2p of a 16-float vector, lanes 8..15 element 2p + 1.
  static __m512i PairLanes(int p) {
    return _mm512_set_epi32(2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                            2 * p + 1, 2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p,
                            2 * p);
  }
  // Pair 2r + h's 64 quants from run r of a group (h = 0: low nibbles, 1: high nibbles).
  [[gnu::always_inline]] static inline __m512i Quants(const uint8_t* group, int r, int h) {
    const __m512i v = _mm512_loadu_si512(group + 64 * r);
    const __m512i low = _mm512_set1_epi8(0x0F);
    return h == 0 ? _mm512_and_si512(v, low) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  }
  static __m512 Scales(const uint8_t* group) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 256)));
  }

  // One weight row at m = 1: the 16 scale products of a group in one multiply, a permutation
  // places a pair's two.
  static float GemvRow(const uint8_t* x, const uint8_t* w, int nb) {
    const int groups = nb / kPackGroupBlocks;
    const auto* xg = reinterpret_cast<const PackedQ4_0XGroup*>(x);
    __m512 acc[1][1] = {{_mm512_setzero_ps()}};
    for (int g = 0; g < groups; ++g) {
      const uint8_t* gw = w + static_cast<int64_t>(g) * kPackGroupBytes;
      PrefetchAhead(gw, kPackGroupBytes);
      const PackedQ4_0XGroup& xp = xg[g];
      const __m512 prod = _mm512_mul_ps(Scales(gw), _mm512_load_ps(xp.d16));
      for (int r = 0; r < 4; ++r) {
        for (int h = 0; h < 2; ++h) {
          const int p = 2 * r + h;
          const __m512i l = DotU8S8x512(_mm512_load_si512(xp.start[p]), Quants(gw, r, h),
                                        _mm512_load_si512(xp.qs[p]));
          acc[0][0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(PairLanes(p), prod),
                                      _mm512_cvtepi32_ps(l), acc[0][0]);
        }
      }
    }
    TailPairs<1, 1>(acc, x, 0, w, 0, nb);
    return Tail::Reduce(acc[0][0]);
  }

  // The blocks after the last group, ggml's layout, on the activation pairs after the groups.
  template <int MR, int NR>
  [[gnu::always_inline]] static inline void TailPairs(__m512 (&acc)[MR][NR], const uint8_t* x,
                                                      int64_t ldx, const uint8_t* w, int64_t ldw,
                                                      int nb) {
    const int groups = nb / kPackGroupBlocks, done = groups * kPackGroupBlocks;
    if (done == nb) return;
    const auto* xt = reinterpret_cast<const LegacyBlockPair*>(x + static_cast<int64_t>(groups) *
                                                                      sizeof(PackedQ4_0XGroup));
    const auto* wt =
        reinterpret_cast<const BlockQ4_0*>(w + static_cast<int64_t>(groups) * kPackGroupBytes);
    const int64_t ldx_pairs = ldx / static_cast<int64_t>(sizeof(LegacyBlockPair));
    const int64_t ldw_blocks = ldw / static_cast<int64_t>(sizeof(BlockQ4_0));
    const int tail = nb - done;
    int b = 0;
    for (; b + 2 <= tail; b += 2) {
      Tail::template Pair<MR, NR>(acc, xt, ldx_pairs, wt, ldw_blocks, b, 0xFFFF);
    }
    if (b < tail) Tail::template Pair<MR, NR>(acc, xt, ldx_pairs, wt, ldw_blocks, b, 0x00FF);
  }

  // MR activation rows (ldx bytes apart) times NR weight rows (ldw bytes apart).
  template <int MR, int NR>
  static void Tile(const uint8_t* x, int64_t ldx, const uint8_t* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    }
    const int groups = nb / kPackGroupBlocks;
    for (int g = 0; g < groups; ++g) {
      const int64_t gx = static_cast<int64_t>(g) * static_cast<int64_t>(sizeof(PackedQ4_0XGroup));
      const uint8_t* gw[NR];
      __m512 dw[NR];
      for (int j = 0; j < NR; ++j) {
        gw[j] = w + j * ldw + static_cast<int64_t>(g) * kPackGroupBytes;
        PrefetchAhead(gw[j], kPackGroupBytes);
        dw[j] = Scales(gw[j]);
      }
      for (int p = 0; p < 8; ++p) {
        __m512i u[NR];
        __m512 dwp[NR];
        for (int j = 0; j < NR; ++j) {
          u[j] = Quants(gw[j], p / 2, p % 2);
          dwp[j] = _mm512_permutexvar_ps(PairLanes(p), dw[j]);
        }
        for (int i = 0; i < MR; ++i) {
          const auto& xp = *reinterpret_cast<const PackedQ4_0XGroup*>(x + i * ldx + gx);
          const __m512i start = _mm512_load_si512(xp.start[p]);
          const __m512i xq = _mm512_load_si512(xp.qs[p]);
          const __m512 dx = _mm512_load_ps(xp.dx[p]);
          for (int j = 0; j < NR; ++j) {
            const __m512 l = _mm512_cvtepi32_ps(DotU8S8x512(start, u[j], xq));
            acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(dwp[j], dx), l, acc[i][j]);
          }
        }
      }
    }
    TailPairs<MR, NR>(acc, x, ldx, w, ldw, nb);
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = Tail::Reduce(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

// Dispatches an mr x nr tile (mr <= MR, nr <= NR) to Micro::Tile<mr, nr>.
template <class Micro, int MR, int NR>
void PackedTile(int mr, int nr, const uint8_t* x, int64_t ldx, const uint8_t* w, int64_t ldw,
                int nb, const float* bias, float* y, int64_t ldy) {
  if constexpr (MR > 1) {
    if (mr < MR) return PackedTile<Micro, MR - 1, NR>(mr, nr, x, ldx, w, ldw, nb, bias, y, ldy);
  }
  if constexpr (NR > 1) {
    if (nr < NR) return PackedTile<Micro, MR, NR - 1>(mr, nr, x, ldx, w, ldw, nb, bias, y, ldy);
  }
  Micro::template Tile<MR, NR>(x, ldx, w, ldw, nb, bias, y, ldy);
}

// The panel (MatmulBlockPanelFn): x holds m rows of PackedQ4_0XRowBytes(nb) bytes.
template <class Micro>
void MatmulPackedQ4_0Panel(const void* xv, int m, int k, const void* wv, int n0, int n1,
                           const float* bias, float* y, int ldy) {
  const auto* x = static_cast<const uint8_t*>(xv);
  const auto* w = static_cast<const uint8_t*>(wv);
  const int nb = k / kQKLegacy;
  const int64_t ldw = static_cast<int64_t>(nb) * static_cast<int64_t>(sizeof(BlockQ4_0));
  const int64_t ldx = ::llm::kernels::internal::PackedQ4_0XRowBytes(nb);
  if (m == 1) {
    for (int j = n0; j < n1; ++j) {
      const float s = Micro::GemvRow(x, w + j * ldw, nb);
      y[j] = bias != nullptr ? s + bias[j] : s;
    }
    return;
  }
  for (int c0 = 0; c0 < m; c0 += kRowChunk) {
    const int c1 = m < c0 + kRowChunk ? m : c0 + kRowChunk;
    for (int j = n0; j < n1; j += Micro::kNR) {
      const int nr = n1 - j < Micro::kNR ? n1 - j : Micro::kNR;
      for (int i = c0; i < c1; i += Micro::kMR) {
        const int mr = c1 - i < Micro::kMR ? c1 - i : Micro::kMR;
        PackedTile<Micro, Micro::kMR, Micro::kNR>(mr, nr, x + i * ldx, ldx, w + j * ldw, ldw, nb,
                                                  bias != nullptr ? bias + j : nullptr,
                                                  y + static_cast<int64_t>(i) * ldy + j, ldy);
      }
    }
  }
}

}  // namespace qx
