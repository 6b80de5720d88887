// The x86 micro-kernels of the quantized block formats (Q4_0 ... Q6_K, the i-quants) on Q8
// activations, for the TUs compiled with AVX2 or AVX-512 flags: each includes this header inside
// its own anonymous namespace, so no code compiled for one ISA is shared with another TU.
// The float operations are those quant_blocks.h defines, so every ISA gives the scalar bits.
//
// A K-quant weight block is decoded in registers, 32 unsigned quants (< 64) at a time, and
// multiplied with the MR activation rows of the tile while it is there: per tile and block, each
// weight block is read and decoded once for MR rows (and the panel of weight rows stays in cache
// while the chunks of rows stream through it, matmul_internal.h). Products: maddubs(u, x) sums
// pairs exactly (|pair| <= 2 * 63 * 127), madd with the sub-block scales gives the int32 lanes.
// The weight stream is prefetched ahead (PrefetchWeights): these tiles do enough work per byte
// that the hardware prefetcher alone leaves a GEMV from DRAM at a third of its in-cache speed.
// The 32-block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) run on their packed layout
// (matmul_legacy_packed_x86.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/int8_dot_x86.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/q8_0.h"
#include "kernels/cpu/quant_blocks.h"

namespace qx {

using ::llm::kernels::internal::BlockQ2_K;
using ::llm::kernels::internal::BlockQ3_K;
using ::llm::kernels::internal::BlockQ4_0;
using ::llm::kernels::internal::BlockQ4_1;
using ::llm::kernels::internal::BlockQ4_K;
using ::llm::kernels::internal::BlockQ5_0;
using ::llm::kernels::internal::BlockQ5_1;
using ::llm::kernels::internal::BlockQ5_K;
using ::llm::kernels::internal::BlockQ6_K;
using ::llm::kernels::internal::BlockQ8_0;
using ::llm::kernels::internal::BlockQ8_K;

inline float ReduceAdd(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// (v >> shift) & mask in every byte.
inline __m256i Bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(mask));
}
// 0xFF in byte e of 32 where bit e of `bits` is set, else 0.
inline __m256i BitBytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}
// Byte e = 0x10 where bit e of the little-endian uint32 at qh is set.
inline __m256i FifthBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return _mm256_and_si256(BitBytes(bits), _mm256_set1_epi8(0x10));
}

// K-quants: Header gives d, dmin and the 16 integer scales and mins of the groups of 16
// weights (sc[g], mn[g] of quant_blocks.h) as int16 lanes; Chunk h the 32 unsigned quants of
// elements 32h .. 32h + 31.
struct KHeader {
  float d, dmin;
  __m256i sc, mn;
};

// 16 int16 lanes from 8 bytes, each repeated (the formats with 32-weight sub-blocks).
inline __m256i Repeat8(__m128i bytes8) {
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(bytes8, bytes8));
}
// The 8 scales of the formats with 32-weight sub-blocks (bytes 0..7) as int16 lanes 0..7 of
// both 128-bit halves: one in-lane shuffle then gives chunk h's scale in every lane (ScaleOf).
inline __m256i Scales8(__m128i bytes8) {
  return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes8));
}

struct Q2_KF {
  using B = BlockQ2_K;
  static constexpr bool kScalePer32 = false;
  static KHeader Header(const B& b) {
    // Each scale byte (min << 4 | scale) as a word, then split: 3 vector ops, not 5.
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    return {_cvtsh_ss(b.d), _cvtsh_ss(b.dmin), _mm256_and_si256(w, _mm256_set1_epi16(0x0F)),
            _mm256_srli_epi16(w, 4)};
  }
  static __m256i Chunk(const B& b, int h) {
    return Bits(Load32(b.qs + 32 * (h >> 2)), 2 * (h & 3), 3);
  }
};
struct Q3_KF {
  using B = BlockQ3_K;
  static constexpr bool kScalePer32 = false;
  // The 16 6-bit scales, biased by 32, as unsigned bytes: low 4 bits from scales[0..7] (low,
  // then high nibbles), high 2 bits from scales[8..11] (bits 2 (g / 4) of byte 8 + g % 4).
  // In vector registers from one 16-byte load ending at the scales' last byte (the 4 bytes before
  // them are qs, inside the block): dwords a0 a1 a2 of the scales are dwords 1 2 3 of it. The
  // scalar unpacking with four inserts took about 4 of a Q3_K GEMV's ~10 cycles per block outside
  // the dot products.
  static __m128i BiasedScales(const B& b) {
    static_assert(offsetof(B, scales) >= 4);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales - 4));
    // s_j = ((a_{j % 2} >> 4 (j / 2)) & 0x0f) | (((a2 >> 2j) & 0x03) << 4)
    const __m128i low =
        _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 1)), _mm_set_epi32(4, 4, 0, 0));
#if defined(__AVX512VL__)
    // The high bits straight to bits 4-5 by a rotate (left 4 - 2j: 30 is right by 2), then one
    // ternary op for (low & 0x0f) | high: 6 operations where the shifts take 8.
    const __m128i high = _mm_and_si128(
        _mm_rolv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 3, 3, 3)), _mm_set_epi32(30, 0, 2, 4)),
        _mm_set1_epi8(0x30));
    return _mm_ternarylogic_epi32(low, high, _mm_set1_epi8(0x0f), 0xEC);  // (a & c) | b
#else
    const __m128i high =
        _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 3, 3, 3)), _mm_set_epi32(6, 4, 2, 0));
    return _mm_or_si128(_mm_and_si128(low, _mm_set1_epi8(0x0f)),
                        _mm_slli_epi32(_mm_and_si128(high, _mm_set1_epi8(0x03)), 4));
#endif
  }
  static KHeader Header(const B& b) {
    const __m256i sc =
        _mm256_sub_epi16(_mm256_cvtepu8_epi16(BiasedScales(b)), _mm256_set1_epi16(32));
    const float d = _cvtsh_ss(b.d);
    return {d, d, sc, _mm256_slli_epi16(sc, 2)};
  }
  static __m256i Chunk(const B& b, int h) {
    const __m256i lo = Bits(Load32(b.qs + 32 * (h >> 2)), 2 * (h & 3), 3);
    return _mm256_or_si256(lo, _mm256_slli_epi16(Bits(Load32(b.hmask), h, 1), 2));
  }
};
// 16 consecutive 6-bit fields at bytes 4 .. 15 of 16 bytes (field g at bits 6g .. 6g + 5 from
// byte 4; `v`: the 16 bytes in both 128-bit halves): word g gets the two bytes holding field g
// (4 + 6g / 8 and the next; the last field lies in one byte) by one byte shuffle. Shifted right
// by 6g % 8 (SixBitFieldShift) and masked, word g is field g. The packed Q3_K scales and IQ4_XS's
// group heads (matmul_legacy_packed_x86.h) hold their scales so.
inline __m256i SixBitFieldWords(__m256i v) {
  auto pair = [](int g) {
    const int lo = 4 + 6 * g / 8, hi = lo < 15 ? lo + 1 : 15;
    return static_cast<int16_t>(lo | hi << 8);
  };
  return _mm256_shuffle_epi8(
      v, _mm256_setr_epi16(pair(0), pair(1), pair(2), pair(3), pair(4), pair(5), pair(6), pair(7),
                           pair(8), pair(9), pair(10), pair(11), pair(12), pair(13), pair(14),
                           pair(15)));
}
constexpr int SixBitFieldShift(int g) {
  return 6 * g % 8;  // 0 6 4 2, again every 4 fields
}

#if defined(__AVX512BW__)
// Q3_K with its high bits in bit planes and its scales as 6-bit fields (kQ3_KPacked,
// kquant_packed.h): chunk h's 32 high bits are the 32-bit word Q3KPlaneOf(h) of hmask, which a
// masked add takes as it is: the same integers as Q3_KF::Chunk (a low part under 4 plus 4 is the
// low part or 4).
struct Q3_KPackedF : Q3_KF {
  // Scale g is bits 6g .. 6g + 5 of the 12 bytes: word g takes the two bytes from byte 6g / 8
  // (one byte shuffle of the 16 bytes ending at the scales' last, in both 128-bit halves), shifted
  // right by 6g % 8 (one word shift) and masked; then unbiased as Q3_KF's. 5 operations where
  // ggml's layout takes 9 (kernel_bench-like loop in L2, 1 thread, AMD Zen 4, 2 Dec 2026: packed
  // Q3_K GEMV 23.0 -> 21.5 cycles per block at k = 2048, 21.7 -> 20.3 at k = 5632).
  static KHeader Header(const B& b) {
    static_assert(offsetof(B, scales) >= 4);
    const __m256i v = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales - 4)));
    constexpr int16_t s0 = SixBitFieldShift(0), s1 = SixBitFieldShift(1), s2 = SixBitFieldShift(2),
                      s3 = SixBitFieldShift(3);
    const __m256i counts =
        _mm256_setr_epi16(s0, s1, s2, s3, s0, s1, s2, s3, s0, s1, s2, s3, s0, s1, s2, s3);
    const __m256i biased =
        _mm256_and_si256(_mm256_srlv_epi16(SixBitFieldWords(v), counts), _mm256_set1_epi16(0x3F));
    const __m256i sc = _mm256_sub_epi16(biased, _mm256_set1_epi16(32));
    const float d = _cvtsh_ss(b.d);
    return {d, d, sc, _mm256_slli_epi16(sc, 2)};
  }
  static __m256i Chunk(const B& b, int h) {
    const __m256i lo = Bits(Load32(b.qs + 32 * (h >> 2)), 2 * (h & 3), 3);
    uint32_t bits;
    std::memcpy(&bits, b.hmask + 4 * Q3KPlaneOf(h), 4);
    return _mm256_mask_add_epi8(lo, _cvtu32_mask32(bits), lo, _mm256_set1_epi8(4));
  }
};
#endif
// The first 16 bytes of a Q4_K / Q5_K block (d, dmin, then 12 bytes of 6-bit scales and mins,
// dwords u0 u1 u2) -> bytes 0..7 the 8 scales, 8..15 the 8 mins (get_scale_min_k4), all in
// vector registers: the scalar decode with its inserts was ~40% of a GEMV's time per block.
//   scales 0..3 = u0 & 0x3f, scales 4..7 = (u2 & 0x0f) | ((u0 >> 2) & 0x30),
//   mins 0..3 = u1 & 0x3f,   mins 4..7 = ((u2 >> 4) & 0x0f) | ((u1 >> 2) & 0x30)  (per byte)
inline __m128i ScalesMinsK4(__m128i head) {
  const __m128i low = _mm_srlv_epi32(_mm_shuffle_epi32(head, _MM_SHUFFLE(3, 2, 3, 1)),
                                     _mm_set_epi32(4, 0, 0, 0));  // u0, u2, u1, u2 >> 4
  const __m128i high = _mm_srli_epi32(_mm_shuffle_epi32(head, _MM_SHUFFLE(2, 0, 1, 0)),
                                      2);  // -, u0 >> 2, -, u1 >> 2
  return _mm_or_si128(
      _mm_and_si128(low, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f)),
      _mm_and_si128(high, _mm_set_epi32(0x30303030, 0, 0x30303030, 0)));
}
inline __m128i LoadHead16(const void* block) {
  return _mm_loadu_si128(static_cast<const __m128i*>(block));
}
// KHeader of a Q4_K / Q5_K block from its first 16 bytes.
inline KHeader HeaderK4(__m128i head) {
  const __m128 dd = _mm_cvtph_ps(head);  // d, dmin
  const __m128i sm = ScalesMinsK4(head);
  return {_mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd)), Scales8(sm),
          Repeat8(_mm_srli_si128(sm, 8))};
}
struct Q4_KF {
  using B = BlockQ4_K;
  static constexpr bool kScalePer32 = true;
  static KHeader Header(const B& b) { return HeaderK4(LoadHead16(&b)); }
  static __m256i Chunk(const B& b, int h) {
    return Bits(Load32(b.qs + 32 * (h >> 1)), 4 * (h & 1), 0x0F);
  }
};
struct Q5_KF {
  using B = BlockQ5_K;
  static constexpr bool kScalePer32 = true;
  static KHeader Header(const B& b) { return HeaderK4(LoadHead16(&b)); }
  static __m256i Chunk(const B& b, int h) {
    const __m256i lo = Bits(Load32(b.qs + 32 * (h >> 1)), 4 * (h & 1), 0x0F);
    return _mm256_or_si256(lo, _mm256_slli_epi16(Bits(Load32(b.qh), h, 1), 4));
  }
};
struct Q6_KF {
  using B = BlockQ6_K;
  static constexpr bool kScalePer32 = false;
  static KHeader Header(const B& b) {
    const __m256i sc =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    const float d = _cvtsh_ss(b.d);
    return {d, d, sc, _mm256_slli_epi16(sc, 5)};
  }
  static __m256i Chunk(const B& b, int h) {
    const int n = h >> 2, k = h & 3;
    const __m256i lo = Bits(Load32(b.ql + 64 * n + 32 * (k & 1)), 4 * (k >> 1), 0x0F);
    return _mm256_or_si256(lo, _mm256_slli_epi16(Bits(Load32(b.qh + 32 * n), 2 * k, 3), 4));
  }
};

// int16 lanes 0..7 = sc[2h], lanes 8..15 = sc[2h + 1]: the scales of chunk h's two groups.
inline __m256i ScalePattern(__m256i sc, int h) {
  const __m256i pair = _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(h));
  return _mm256_shuffle_epi8(pair, _mm256_set_epi64x(0x0302030203020302, 0x0302030203020302,
                                                     0x0100010001000100, 0x0100010001000100));
}

// Chunk h's scales as int16 lanes: lanes 0..7 for its first 16 weights, 8..15 for the others.
// Per-32 formats (Scales8 headers): int16 lane h of each half, everywhere.
template <class F>
inline __m256i ScaleOf(__m256i sc, int h) {
  if constexpr (F::kScalePer32) {
    return _mm256_shuffle_epi8(
        sc, _mm256_set1_epi16(static_cast<int16_t>(((2 * h + 1) << 8) | (2 * h))));
  } else {
    return ScalePattern(sc, h);
  }
}

}  // namespace qx

#if defined(__AVX512BW__)
#include "kernels/cpu/matmul_kquant_gemv512.h"  // NOLINT: inside this TU's anonymous namespace
#endif
#include "kernels/cpu/matmul_legacy_packed_x86.h"  // NOLINT: inside this TU's anonymous namespace
// NOLINTNEXTLINE: inside this TU's anonymous namespace
#include "kernels/cpu/matmul_iquant_x86.h"

namespace qx {

// kXOrder: the order of x's chunks (Q8KOrder): the AVX-512 sets give x to Q4_K / Q5_K with its
// chunks paired and to Q2_K / Q3_K with them halved, at every m.
template <class F, int kMRv, int kNRv, Q8KOrder kXOrder = Q8KOrder::kNatural>
struct KMicro {
  using XBlock = BlockQ8_K;
  using WBlock = typename F::B;
  static constexpr int kBlock = 256;
  static constexpr int kMR = kMRv;
  static constexpr int kNR = kNRv;

  // Where x has chunk h.
  static constexpr int XAt(int h) { return Q8KChunkAt(kXOrder, h); }

  template <int MR, int NR>
  static void Tile(const XBlock* x, int64_t ldx, const WBlock* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; ++b) {
      for (int j = 0; j < NR; ++j) PrefetchWeights(&w[j * ldw + b]);
      KHeader hw[NR];
      for (int j = 0; j < NR; ++j) hw[j] = F::Header(w[j * ldw + b]);
      // kChains independent integer sums per output element: one chain of 8 dependent
      // vpdpwssd per block (5-cycle latency each) bounded a GEMV to ~40 cycles per block, 18 GB/s
      // of Q4_K per core. Integer addition is exact, so the split changes no bit.
      constexpr int kChains = MR * NR >= 4 ? 1 : 4 / (MR * NR);
      __m256i isum[kChains][MR][NR];
      for (int c = 0; c < kChains; ++c) {
        for (int i = 0; i < MR; ++i) {
          for (int j = 0; j < NR; ++j) isum[c][i][j] = _mm256_setzero_si256();
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) {
        const int c = h % kChains;
        __m256i wq[NR], sp[NR];
        for (int j = 0; j < NR; ++j) {
          wq[j] = F::Chunk(w[j * ldw + b], h);
          sp[j] = ScaleOf<F>(hw[j].sc, h);
        }
        for (int i = 0; i < MR; ++i) {
          const __m256i xv =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i * ldx + b].qs + 32 * XAt(h)));
          for (int j = 0; j < NR; ++j) {
            isum[c][i][j] = AddScaledDotU8S8(isum[c][i][j], wq[j], xv, sp[j]);
          }
        }
      }
      for (int c = 1; c < kChains; ++c) {
        for (int i = 0; i < MR; ++i) {
          for (int j = 0; j < NR; ++j)
            isum[0][i][j] = _mm256_add_epi32(isum[0][i][j], isum[c][i][j]);
        }
      }
      for (int i = 0; i < MR; ++i) {
        const XBlock& xb = x[i * ldx + b];
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
        for (int j = 0; j < NR; ++j) {
          const __m256i ms = _mm256_madd_epi16(hw[j].mn, bs);
          acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(hw[j].d * xb.d),
                                      _mm256_cvtepi32_ps(isum[0][i][j]), acc[i][j]);
          acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(-(hw[j].dmin * xb.d)), _mm256_cvtepi32_ps(ms),
                                      acc[i][j]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = ReduceAdd(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

#if defined(__AVX512BW__)
// The 2-bit formats (x with halved chunks): registers 1 and 3 hold 4 u (K2Quants512), so their
// scale words are the scales and those of registers 0 and 2 four times the scales.
template <class F>
constexpr bool kTimes4 =
    std::is_same_v<F, Q2_KF> || std::is_same_v<F, Q3_KF> || std::is_same_v<F, Q3_KPackedF>;

// One weight block on four 512-bit registers: register p's 64 quants as bytes (u) and each
// one's scale as int16 words (sc), against x at qs + 64p in the order Gemv512XOrder<F> gives:
// Q4_K / Q5_K chunks 4r + h | 4r + h + 2 for p = 2r + h (paired x); Q2_K / Q3_K chunks p | p + 4
// (halved x), every lane sum 4 times its value (kTimes4); Q6_K elements 64p .. 64p + 63, 128-bit
// lane g taking scale 4p + g (x in natural order).
struct KWeights512 {
  __m512i u[4], sc[4];
};
template <class F>
inline KWeights512 KWeightsOf512(const typename F::B& w, const KHeader& hw) {
  KWeights512 q;
  const __m512i words = _mm512_castsi256_si512(hw.sc);
  if constexpr (Gemv512XOrder<F> == Q8KOrder::kPairs) {
    __m512i high = _mm512_setzero_si512();
    if constexpr (std::is_same_v<F, Q5_KF>) {
      high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh)));
    }
    constexpr bool kFifthBit = std::is_same_v<F, Q5_KF>;
    K4Quants512<kFifthBit>(w.qs, high, 0, q.u[0], q.u[1]);
    K4Quants512<kFifthBit>(w.qs, high, 1, q.u[2], q.u[3]);
    // hw.sc (Scales8): words 0..7 are the 8 scales
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const int c = 4 * (p >> 1) + (p & 1);
      q.sc[p] = _mm512_permutexvar_epi16(
          _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(c)),
                             _mm256_set1_epi16(static_cast<int16_t>(c + 2)), 1),
          words);
    }
  } else if constexpr (Gemv512XOrder<F> == Q8KOrder::kHalves) {
    K2QuantsOf512<F>(w, q.u);
    const __m512i both = ScalesAndTimes4(hw.sc);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) q.sc[p] = ScalesOfHalvedRegister(both, p);
  } else {
    static_assert(std::is_same_v<F, Q6_KF>);
    Q6KQuants512(w, 0, q.u[0], q.u[1]);
    Q6KQuants512(w, 1, q.u[2], q.u[3]);
    // hw.sc: the 16 scales as words
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      const ScalePair512 sc = ScalesOfRegisters(words, n);
      q.sc[2 * n] = sc.even;
      q.sc[2 * n + 1] = sc.odd;
    }
  }
  return q;
}

// The AVX-512 sets' K-quant panels for kMinRows <= m < tiles_min_m (batched decode; the AMX set
// has tiles from there on) and their GEMV rows at m = 1, on 512-bit registers.
//  - KMicro's 256-bit tiles left half of this Xeon's integer multiply throughput unused:
//    vpmaddubsw / vpdpwssd on zmm issue two per cycle here as on ymm (a microbench of independent
//    chains, 30 Nov 2026: 6.4-6.9 G zmm ops/s a core against 7.0-7.7 on ymm), each with twice
//    the lanes. A weight block is decoded once into KWeights512 (its scale words by one
//    permutation per register), and each input row takes 4 maddubs + 4 dpwssd for it, or with
//    VNNI 4 vpdpbusd + 2 vpdpwssd (the GEMV's AddScaledDotPair512).
//  - On AMD Zen 4 the 512-bit integer multiplies, FMAs and float multiplies share one port pair
//    (one zmm op a cycle between them; shifts, converts and blends issue beside them: a microbench
//    of independent chains, 2 Dec 2026). So the VNNI pairing, the bsums of a pair laid out once
//    per step, and the x.d factors permuted where they were multiplied per pair: a panel of
//    16 columns in L2 went from 11.2-11.3 to 9.9-10.1 cycles per row and block (Q4_K, m = 16,
//    1 thread; Q6_K, Q2_K alike), 4096 columns from DRAM from 13.6 to 11.8 (both in one
//    process, alternating; m = 8: 4-7%). Without VNNI (same epilogue) it measured alike.
//  - Rows go in pairs: an accumulator holds row 2r in lanes 0..7 and 2r + 1 in 8..15, so the
//    float steps of a block (halves added, converted, the factors, two FMAs) are one 512-bit
//    operation for two rows (in L1, m = 16: 3.80-3.85 -> 3.53-3.57 ns per row and block).
//  - k goes in steps of kStepBlocks blocks: the step's x blocks of up to kRowChunk rows stay in
//    L1 while the panel's weight rows pass over them, the accumulators in L1 between steps.
//    (Steps of 2 and 4 blocks and the weight prefetch 2 KiB or one step ahead measured alike:
//    in cache the loop is bound by the two vector ports that take 512-bit work, not by loads.)
// Same integers as KMicro (maddubs on the same byte pairs, exact int32 sums; int32 lane q < 8
// sums lane q of the low chunks, q >= 8 of the high ones, added before converting) and the same
// float steps per lane and block in the same order: the bits of every set.
template <class F>
struct KMicro512 {
  using XBlock = BlockQ8_K;
  using WBlock = typename F::B;
  static constexpr int kBlock = 256;
  static constexpr int kStepBlocks = 4;
  // Below this many rows KMicro's 4 x 2 tiles: the block's decode here (its scale words above
  // all) is shared by fewer rows. kernel_bench matmul (k = n = 4096, 2 threads, two alternating
  // rounds), GFLOP/s here / there: Q4_K m = 4 211-222 / 201-205, m = 8 256-258 / 210-230; Q6_K
  // m = 4 165-176 / 175-182, m = 8 226-238 / 176-185.
  static constexpr int kMinRows = 6;
  static constexpr int kPanelCols = 16;
  // x's chunk order at every m (QuantMatmulKernels::x_order)
  static constexpr Q8KOrder kXOrder = Gemv512XOrder<F>;

  static void Panel(const void* xv, int m, int k, const void* wv, int n0, int n1, const float* bias,
                    float* y, int ldy) {
    const auto* x = static_cast<const XBlock*>(xv);
    const auto* w = static_cast<const WBlock*>(wv);
    const int nb = k / kBlock;
    if (m == 1) {
      for (int j = n0; j < n1; ++j) {
        const float s = KGemvRow512<F>(x, w + static_cast<int64_t>(j) * nb, nb);
        y[j] = bias != nullptr ? s + bias[j] : s;
      }
      return;
    }
    if (m < kMinRows)
      return MatmulBlockPanel<KMicro<F, 4, 2, kXOrder>>(xv, m, k, wv, n0, n1, bias, y, ldy);
    // Rows in pairs: pair r's accumulators hold row 2r in lanes 0..7 and 2r + 1 in 8..15, so
    // the float steps of two rows are one 512-bit operation each.
    alignas(64) float acc[kRowChunk / 2][kPanelCols][16];
    alignas(64) float xd[kStepBlocks][kRowChunk];  // the rows' x scales: row i in lane i
    alignas(64) int16_t bsums[kStepBlocks][kRowChunk / 2][32];  // pair r's: row 2r's, 2r + 1's
    for (int j0 = n0; j0 < n1; j0 += kPanelCols) {
      const int cols = n1 - j0 < kPanelCols ? n1 - j0 : kPanelCols;
      for (int c0 = 0; c0 < m; c0 += kRowChunk) {
        const int rows = m - c0 < kRowChunk ? m - c0 : kRowChunk, pairs = (rows + 1) / 2;
        for (int r = 0; r < pairs; ++r) {
          for (int j = 0; j < cols; ++j) _mm512_store_ps(acc[r][j], _mm512_setzero_ps());
        }
        const XBlock* xc = x + static_cast<int64_t>(c0) * nb;
        for (int b0 = 0; b0 < nb; b0 += kStepBlocks) {
          const int b1 = nb - b0 < kStepBlocks ? nb : b0 + kStepBlocks;
          for (int b = b0; b < b1; ++b) {
            for (int i = 0; i < kRowChunk; ++i) {  // rows past the last: its copies, unused
              const XBlock& xb = xc[static_cast<int64_t>(i < rows ? i : rows - 1) * nb + b];
              xd[b - b0][i] = xb.d;
              if (i < 2 * pairs) std::memcpy(bsums[b - b0][i / 2] + 16 * (i % 2), xb.bsums, 32);
            }
          }
          for (int j = 0; j < cols; ++j) {
            const WBlock* wj = w + static_cast<int64_t>(j0 + j) * nb;
            for (int b = b0; b < b1; ++b) {
              Block(xc, nb, rows, wj[b], b, xd[b - b0], bsums[b - b0], acc, j);
            }
          }
        }
        for (int i = 0; i < rows; ++i) {
          float* const yi = y + static_cast<int64_t>(c0 + i) * ldy + j0;
          for (int j = 0; j < cols; ++j) {
            const float s = ReduceAdd(_mm256_load_ps(&acc[i / 2][j][8 * (i % 2)]));
            yi[j] = bias != nullptr ? s + bias[j0 + j] : s;
          }
        }
      }
    }
  }

  // A row's 16 int32 lane sums of weight block q against x block xb: lanes q < 8 the low
  // chunks' lane q, q >= 8 the high ones' (all 4 times their value for kTimes4). With VNNI,
  // registers 0, 1 and 2, 3 share a vpdpwssd (AddScaledDotPair512, scale word pairs in sc2):
  // 6 integer multiplies a row, not 8.
  static __m512i Sums(const KWeights512& q, [[maybe_unused]] const __m512i (&sc2)[2],
                      const XBlock& xb) {
#if defined(__AVX512VNNI__)
    // AddScaledDotPair512's steps, but all four registers' 4-byte dot products first and the
    // first pair's products starting the sum: 5-6% faster in L2 at m = 16 than
    // AddScaledDotPair512 twice (the out-of-order window sees the multiplies sooner).
    __m512i d[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      d[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q.u[p], _mm512_load_si512(xb.qs + 64 * p));
    }
    const __m512i low = _mm512_mask_blend_epi16(0xAAAAAAAA, d[0], _mm512_slli_epi32(d[1], 16));
    const __m512i high = _mm512_mask_blend_epi16(0xAAAAAAAA, d[2], _mm512_slli_epi32(d[3], 16));
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(low, sc2[0]), high, sc2[1]);
#else
    // the first register's products start the sum (pmaddwd: no zeroed accumulator)
    __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(q.u[0], _mm512_load_si512(xb.qs)), q.sc[0]);
#pragma GCC unroll 3
    for (int p = 1; p < 4; ++p) {
      s = AddScaledDotU8S8x512(s, q.u[p], _mm512_load_si512(xb.qs + 64 * p), q.sc[p]);
    }
    return s;
#endif
  }

  // The lane sums of a row pair from their Sums: [row 2r's low + high chunks | row 2r + 1's].
  static __m512i PairLaneSums(__m512i s0, __m512i s1) {
    // [s0 low | s1 high] + [s0 high | s1 low]: a blend and one lane shuffle
    __m512i l =
        _mm512_add_epi32(_mm512_mask_blend_epi64(0xF0, s0, s1), _mm512_shuffle_i64x2(s0, s1, 0x4E));
    if constexpr (kTimes4<F>) l = _mm512_srai_epi32(l, 2);  // exact: 4 times a sum
    return l;
  }

  // Weight block wb (block b of its row) against block b of `rows` x rows (row i at x + i * nb;
  // xd, bsums: their scales and bsums as Panel lays them out), into accumulators acc[r][j].
  static void Block(const XBlock* x, int nb, int rows, const WBlock& wb, int b, const float* xd,
                    const int16_t (*bsums)[32], float (*acc)[kPanelCols][16], int j) {
    PrefetchWeights(&wb);
    const KHeader hw = F::Header(wb);
    const KWeights512 q = KWeightsOf512<F>(wb, hw);
    const __m512i sc2[2] = {_mm512_mask_blend_epi16(0xAAAAAAAA, q.sc[0], q.sc[1]),
                            _mm512_mask_blend_epi16(0xAAAAAAAA, q.sc[2], q.sc[3])};
    const __m512i mn = _mm512_broadcast_i64x4(hw.mn);
    // The per-block factors hw.d * x.d, hw.dmin * x.d of all the rows (row i in lane i: the same
    // products as KMicro's scalar ones), a lane permutation per pair where a multiply per pair
    // took the multiply port.
    const __m512 xdv = _mm512_load_ps(xd);
    const __m512 fd = _mm512_mul_ps(_mm512_set1_ps(hw.d), xdv);
    const __m512 fm = _mm512_mul_ps(_mm512_set1_ps(hw.dmin), xdv);
    // Pair r's lanes: row 2r in 0..7, 2r + 1 in 8..15. fnmadd rounds -(a * b) + c once, as
    // KMicro's fmadd(-a, b, c) does.
    const __m512i two = _mm512_set1_epi32(2);
    __m512i lanes = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    auto row = [&](int i) -> const XBlock& { return x[static_cast<int64_t>(i) * nb + b]; };
    auto mins = [&](int r) { return _mm512_madd_epi16(mn, _mm512_load_si512(bsums[r])); };
    int i = 0;
    // Two pairs at a time, their float steps interleaved (3-4% in L2 at m = 16 against one pair
    // after the other).
    for (; i + 4 <= rows; i += 4) {
      const int r = i / 2;
      const __m512i s0 = Sums(q, sc2, row(i)), s1 = Sums(q, sc2, row(i + 1));
      const __m512i s2 = Sums(q, sc2, row(i + 2)), s3 = Sums(q, sc2, row(i + 3));
      const __m512i l0 = PairLaneSums(s0, s1), l1 = PairLaneSums(s2, s3);
      const __m512i ms0 = mins(r), ms1 = mins(r + 1);
      const __m512i lanes1 = _mm512_add_epi32(lanes, two);
      __m512 a0 = _mm512_load_ps(acc[r][j]), a1 = _mm512_load_ps(acc[r + 1][j]);
      a0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(lanes, fd), _mm512_cvtepi32_ps(l0), a0);
      a1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(lanes1, fd), _mm512_cvtepi32_ps(l1), a1);
      a0 = _mm512_fnmadd_ps(_mm512_permutexvar_ps(lanes, fm), _mm512_cvtepi32_ps(ms0), a0);
      a1 = _mm512_fnmadd_ps(_mm512_permutexvar_ps(lanes1, fm), _mm512_cvtepi32_ps(ms1), a1);
      _mm512_store_ps(acc[r][j], a0);
      _mm512_store_ps(acc[r + 1][j], a1);
      lanes = _mm512_add_epi32(lanes1, two);
    }
    for (; i < rows; i += 2) {  // an odd last row's partner: itself, unused
      const int r = i / 2;
      const __m512i s0 = Sums(q, sc2, row(i));
      const __m512i l = PairLaneSums(s0, i + 1 < rows ? Sums(q, sc2, row(i + 1)) : s0);
      __m512 a = _mm512_load_ps(acc[r][j]);
      a = _mm512_fmadd_ps(_mm512_permutexvar_ps(lanes, fd), _mm512_cvtepi32_ps(l), a);
      a = _mm512_fnmadd_ps(_mm512_permutexvar_ps(lanes, fm), _mm512_cvtepi32_ps(mins(r)), a);
      _mm512_store_ps(acc[r][j], a);
      lanes = _mm512_add_epi32(lanes, two);
    }
  }
};

#endif

}  // namespace qx

// The kernel table of one ISA's translation unit: every block format through its micro-kernel
// (PackedLegacy for the 32-block formats, on their packed layouts or packing on the fly; K for
// the 256-blocks), with that unit's tile shapes.
template <template <class> class K, template <class> class PackedLegacy>
QuantMatmulKernels MakeQuantKernels() {
  QuantMatmulKernels k;
  auto legacy = [&k]<class F>(F) {
    k.fn[static_cast<int>(F::kType)] = qx::MatmulLegacyByPacking<PackedLegacy<F>>;
    k.fn[static_cast<int>(::llm::kernels::internal::PackedLayoutOf(F::kType))] =
        MatmulBlockPanel<PackedLegacy<F>>;
  };
  legacy(qx::Q4_0F{});
  legacy(qx::Q4_1F{});
  legacy(qx::Q5_0F{});
  legacy(qx::Q5_1F{});
  legacy(qx::Q8_0F{});
  legacy(qx::IQ4_NLF{});
  legacy(qx::IQ4_XSF{});
  legacy(qx::MXFP4F{});
  legacy(qx::Q1_0F{});
  legacy(qx::NVFP4F{});
  k.fn[static_cast<int>(DType::kQ2_K)] = BlockPanelOf<K<qx::Q2_KF>>();
  k.fn[static_cast<int>(DType::kQ3_K)] = BlockPanelOf<K<qx::Q3_KF>>();
#if defined(__AVX512BW__)
  k.fn[static_cast<int>(DType::kQ3_KPacked)] = BlockPanelOf<K<qx::Q3_KPackedF>>();
#endif
  k.fn[static_cast<int>(DType::kQ4_K)] = BlockPanelOf<K<qx::Q4_KF>>();
  k.fn[static_cast<int>(DType::kQ5_K)] = BlockPanelOf<K<qx::Q5_KF>>();
  k.fn[static_cast<int>(DType::kQ6_K)] = BlockPanelOf<K<qx::Q6_KF>>();
  k.x_order[static_cast<int>(DType::kQ2_K)] = XOrderOf<K<qx::Q2_KF>>();
  k.x_order[static_cast<int>(DType::kQ3_K)] = XOrderOf<K<qx::Q3_KF>>();
#if defined(__AVX512BW__)
  k.x_order[static_cast<int>(DType::kQ3_KPacked)] = XOrderOf<K<qx::Q3_KPackedF>>();
#endif
  k.x_order[static_cast<int>(DType::kQ4_K)] = XOrderOf<K<qx::Q4_KF>>();
  k.x_order[static_cast<int>(DType::kQ5_K)] = XOrderOf<K<qx::Q5_KF>>();
  // A decoded grid block serves a whole chunk of activation rows (kRowChunk) per decode.
  qx::AddIQuantKernels<16>(k);
  return k;
}
