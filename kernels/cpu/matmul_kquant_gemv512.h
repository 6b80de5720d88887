// 512-bit GEMV rows (m = 1: a decode step's matmuls) of the K-quants (Q2_K ... Q6_K) for the
// AVX-512 translation units, included by matmul_quant_x86.h inside their anonymous namespace.
//
// Why: KMicro's 256-bit tile, run on one weight row, was bound by its shuffle unit, not by memory
// (Q4_K: ~19 TSC cycles per 144-byte block in cache, 18-20 GB/s per core, below what one core
// streams from DRAM). Here each multiply takes 64 weights, and nothing on the weight path is a
// shuffle:
//  - Q4_K / Q5_K: 64 bytes of qs are loaded as they are; their low nibbles are chunks 4r, 4r + 2 of
//    the 8 chunks of 32 weights (r = 0, 1), their high nibbles chunks 4r + 1 and 4r + 3. The
//    activations are laid out to match once per GEMV (Q8KOrder::kPairs in matmul_internal.h:
//    chunk order 0 2 1 3 4 6 5 7). Q5_K's fifth bits (one 32-byte qh, bit c for chunk c) are
//    moved to bit 4 by a shift per register half.
//  - Q6_K: the low 4 bits of 64 consecutive elements are one 64-byte load of ql (natural order).
//  - Q2_K / Q3_K: bits 2j, 2j + 1 of the 64 bytes of qs are chunks j (low half) and j + 4 (high
//    half), so one 64-byte load, one shift and four masks give the four registers; the
//    activations are laid out to match (Q8KOrder::kHalves: chunk order 0 4 1 5 2 6 3 7).
//  - With VNNI (AddScaledDotPair512) two registers' 4-byte dot products (vpdpbusd) share one
//    vpdpwssd by their scales, packed as the low and high words of each int32 lane; the scale
//    word pairs take one permutation per two registers. Without VNNI, the sub-block scales of
//    Q4_K / Q5_K (two registers) come from one word permutation that packs both into each 16-bit
//    word (low and high byte), split by a mask and a shift; those of the 16-group formats from
//    one word permutation per register (ScalesOfRegisters, ScalesOfHalvedRegister).
//
// Same integers and same float operations as KMicro (quant_blocks.h): int32 lane q of a 512-bit
// sum holds canonical lane q % 8 of one chunk (q < 8) or another (q >= 8), so adding the halves
// gives the 8 lane sums L_l exactly; the float steps per block are KMicro's. Bitwise equal to
// every tile and ISA (tested in matmul_quant_test.cc).
#pragma once

#include <type_traits>

namespace qx {

#if defined(__AVX512VNNI__)
// acc + the scaled 4-byte dot products of two registers, u0 · x0 and u1 · x1, whose int32 lane
// sums D (vpdpbusd) fit in 16 bits (|D| < 2^15: 4 products of u <= 63 and |x| <= 128): the two
// D of a lane are packed as its low and high word, times the word pair (scale of u0's D, scale
// of u1's D) in `scale_pairs`: one vpdpwssd for both. Against maddubs + vpdpwssd per register:
// 3 integer multiplies for two registers, not 4, and a scale per word where the other way needs
// a register of scales each. Integer sums are exact, so every int32 lane (and so every lane sum
// of a block) is the same integer as the canonical order's.
// kHighShift 14 (not 16) takes u1 · x1 sums that are 4 times their value (u1 times 4, the 2-bit
// formats' K2Quants512): shifted left by 14, the high word holds the value itself, exactly.
template <int kHighShift = 16>
[[gnu::always_inline]] inline __m512i AddScaledDotPair512(__m512i acc, __m512i u0, __m512i x0,
                                                          __m512i u1, __m512i x1,
                                                          __m512i scale_pairs) {
  const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u0, x0);
  const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u1, x1);
  const __m512i packed = _mm512_mask_blend_epi16(0xAAAAAAAA, d0, _mm512_slli_epi32(d1, kHighShift));
  return _mm512_dpwssd_epi32(acc, packed, scale_pairs);
}
#endif

// Half r (0, 1) of a Q4_K (kFifthBit false) or Q5_K block's quants as two registers of bytes:
// qs[64r .. 64r + 63]'s low nibbles are chunks 4r | 4r + 2 (u_lo), its high nibbles 4r + 1 |
// 4r + 3 (u_hi); Q5_K adds its fifth bits from `high` (the 32 bytes of qh in both halves).
template <bool kFifthBit>
inline void K4Quants512(const uint8_t* qs, [[maybe_unused]] __m512i high, int r, __m512i& u_lo,
                        __m512i& u_hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i q = _mm512_loadu_si512(qs + 64 * r);
  u_lo = _mm512_and_si512(q, low4);
  u_hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
  if constexpr (kFifthBit) {
    // Bit c of qh to bit 4 for chunk c: left shifts 4 - c for chunks 0..3 (r = 0), right
    // shifts c - 4 for chunks 4..7, per 256-bit half (16-bit lanes: no bit crosses a byte
    // into bit 4 at these counts); then u |= that & 0x10.
    const int64_t a = r == 0 ? 0x0004000400040004ll : 0, b = 0x0002000200020002ll;
    const int64_t c = r == 0 ? 0x0003000300030003ll : 0x0001000100010001ll,
                  e = r == 0 ? 0x0001000100010001ll : 0x0003000300030003ll;
    const __m512i cnt_lo = _mm512_set_epi64(b, b, b, b, a, a, a, a);
    const __m512i cnt_hi = _mm512_set_epi64(e, e, e, e, c, c, c, c);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    const __m512i h_lo = r == 0 ? _mm512_sllv_epi16(high, cnt_lo) : _mm512_srlv_epi16(high, cnt_lo);
    const __m512i h_hi = r == 0 ? _mm512_sllv_epi16(high, cnt_hi) : _mm512_srlv_epi16(high, cnt_hi);
    u_lo = _mm512_ternarylogic_epi32(u_lo, h_lo, bit4, 0xF8);  // u | (h & 0x10)
    u_hi = _mm512_ternarylogic_epi32(u_hi, h_hi, bit4, 0xF8);
  }
}

// Q4_K (kFifthBit false) and Q5_K lane sums of one block: x with its chunks paired
// (PairChunksQ8K, matmul_internal.h); sm = ScalesMinsK4 (bytes 0..7 the scales, so 16-bit word
// k = sc[2k] | sc[2k + 1] << 8); qh: Q5_K's fifth bits (bit c of qh[i] for element 32c + i).
template <bool kFifthBit>
inline __m256i K4LaneSums512(const uint8_t* qs, const uint8_t* qh, const BlockQ8_K& x, __m128i sm) {
  __m512i high = _mm512_setzero_si512();
  if constexpr (kFifthBit) {
    high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
  }
#if defined(__AVX512VNNI__)
  // Word k = sc[k] (k < 8), so dword j = (sc[2j], sc[2j + 1]).
  const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));
#else
  const __m512i low_byte = _mm512_set1_epi16(0x00FF);
  const __m512i sm512 = _mm512_castsi128_si512(sm);
#endif
  __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 2
  for (int r = 0; r < 2; ++r) {
    __m512i u_lo, u_hi;
    K4Quants512<kFifthBit>(qs, high, r, u_lo, u_hi);
#if defined(__AVX512VNNI__)
    // Half h: chunks 4r + 2h (u_lo) and 4r + 2h + 1 (u_hi), scales dword 2r + h of sc16.
    const __m512i sc = _mm512_permutexvar_epi32(
        _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1), sc16);
    sum[0] = AddScaledDotPair512(sum[0], u_lo, _mm512_loadu_si512(x.qs + 128 * r), u_hi,
                                 _mm512_loadu_si512(x.qs + 128 * r + 64), sc);
#else
    // Words 0..15 = word 2r of sm (sc[4r] | sc[4r + 1] << 8), words 16..31 = word 2r + 1.
    const int64_t w0 = 2 * r * 0x0001000100010001ll, w1 = w0 + 0x0001000100010001ll;
    const __m512i pair =
        _mm512_permutexvar_epi16(_mm512_set_epi64(w1, w1, w1, w1, w0, w0, w0, w0), sm512);
    const __m512i sc_lo = _mm512_and_si512(pair, low_byte);  // sc[4r] | sc[4r + 2]
    const __m512i sc_hi = _mm512_srli_epi16(pair, 8);        // sc[4r + 1] | sc[4r + 3]
    sum[0] = AddScaledDotU8S8x512(sum[0], u_lo, _mm512_loadu_si512(x.qs + 128 * r), sc_lo);
    sum[1] = AddScaledDotU8S8x512(sum[1], u_hi, _mm512_loadu_si512(x.qs + 128 * r + 64), sc_hi);
#endif
  }
  const __m512i s = _mm512_add_epi32(sum[0], sum[1]);
  return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

// The int16 scales of registers 2n and 2n + 1 of Q6_K, whose register p holds elements
// 64p .. 64p + 63 (chunks 2p, 2p + 1) in natural order, so its 128-bit lane g takes scale 4p + g.
// `words`: the 16 scales as int16 words 0..15 (sign- or zero-extended once per block). One word
// permutation per register: a byte shuffle of both registers' scales into each word, split by two
// shifts (three to sign-extend), measured 9-10% slower on Q3_K and Q6_K (AMD Zen 4, 29 Nov 2026).
struct ScalePair512 {
  __m512i even, odd;
};
inline ScalePair512 ScalesOfRegisters(__m512i words, int n) {
  auto index = [](int p) {
    const int64_t g = 0x0001000100010001ll;
    return _mm512_set_epi64((4 * p + 3) * g, (4 * p + 3) * g, (4 * p + 2) * g, (4 * p + 2) * g,
                            (4 * p + 1) * g, (4 * p + 1) * g, (4 * p) * g, (4 * p) * g);
  };
  return {_mm512_permutexvar_epi16(index(2 * n), words),
          _mm512_permutexvar_epi16(index(2 * n + 1), words)};
}

#if defined(__AVX512VNNI__)
// For AddScaledDotPair512 on registers 2n and 2n + 1 (ScalesOfRegisters' layout): lane g's word
// pair (scale 8n + g, scale 8n + 4 + g) in every int32 lane of 128-bit lane g. One word
// permutation for two registers.
inline __m512i ScalePairsOfRegisters(__m512i words, int n) {
  auto pair = [n](int g) {
    const int64_t d = (8 * n + g) | (8 * n + 4 + g) << 16;
    return d | d << 32;
  };
  return _mm512_permutexvar_epi16(
      _mm512_set_epi64(pair(3), pair(3), pair(2), pair(2), pair(1), pair(1), pair(0), pair(0)),
      words);
}
#endif

// Where a 2-bit format's third bit comes from: none (Q2_K), ggml's hmask (Q3_K), or the
// packed bit planes (kQ3_KPacked, kquant_packed.h), where register j's 64 bits are the 64-bit
// word j of hmask: a byte mask as they are, where ggml's layout takes a vptestmb per register.
// Measured on AMD Zen 4 (29 Nov 2026, kernel_bench gemv, in cache): 1 thread 9.8 -> 14.4 GB/s,
// 2 threads 18.8 -> 23.0.
enum class HighBits { kNone, kHmask, kPlanes };
template <class F>
constexpr HighBits K2HighBitsOf = std::is_same_v<F, Q2_KF>   ? HighBits::kNone
                                  : std::is_same_v<F, Q3_KF> ? HighBits::kHmask
                                                             : HighBits::kPlanes;

// Byte lo in every byte of the low 256-bit half, hi in the high half.
inline __m512i HalfBytes(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(lo)),
                            _mm256_set1_epi8(static_cast<char>(hi)), 1);
}

// The four registers of a Q2_K (kHigh kNone) or Q3_K block's quants as bytes, for x with halved
// chunks (Q8KOrder::kHalves): register j holds chunks j (low half) and j + 4 (high half), whose
// low 2 bits are bits 2j, 2j + 1 of qs[0..31] and qs[32..63]: q & 0x03, q & 0x0C, (q >> 4) & 0x03,
// (q >> 4) & 0x0C for one 64-byte load q, so registers 1 and 3 hold 4 u. One shift per block,
// where 32-byte halves broadcast to both register halves (x in natural order) took two and a
// final shift of the sums (both versions' GEMV row in one process, rows in L2, 1 thread, AMD Zen
// 4, 2 Dec 2026, cycles per block at k = 2048 / 5632: Q2_K 17.1 / 16.2 -> 17.1 / 15.3, packed
// Q3_K 24.8 / 23.4 -> 23.3 / 21.8). Q3_K's third bit adds 4 (16 in
// registers 1 and 3) where set.
template <HighBits kHigh>
[[gnu::always_inline]] inline void K2Quants512(const uint8_t* qs,
                                               [[maybe_unused]] const uint8_t* hmask,
                                               __m512i u[4]) {
  const __m512i low2 = _mm512_set1_epi8(0x03), high2 = _mm512_set1_epi8(0x0C);
  const __m512i q = _mm512_loadu_si512(qs), q4 = _mm512_srli_epi16(q, 4);
  u[0] = _mm512_and_si512(q, low2);
  u[1] = _mm512_and_si512(q, high2);
  u[2] = _mm512_and_si512(q4, low2);
  u[3] = _mm512_and_si512(q4, high2);
  if constexpr (kHigh != HighBits::kNone) {
    [[maybe_unused]] __m512i high;
    if constexpr (kHigh == HighBits::kHmask) {
      high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hmask)));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __mmask64 set;
      if constexpr (kHigh == HighBits::kPlanes) {
        uint64_t bits;
        std::memcpy(&bits, hmask + 8 * j, 8);
        set = _cvtu64_mask64(bits);
      } else {
        set = _mm512_test_epi8_mask(high, HalfBytes(1 << j, 1 << (j + 4)));
      }
      u[j] = _mm512_mask_add_epi8(u[j], set, u[j], _mm512_set1_epi8(j & 1 ? 16 : 4));
    }
  }
}
template <class F>
inline void K2QuantsOf512(const typename F::B& w, __m512i u[4]) {
  if constexpr (K2HighBitsOf<F> == HighBits::kNone) {
    K2Quants512<HighBits::kNone>(w.qs, nullptr, u);
  } else {
    K2Quants512<K2HighBitsOf<F>>(w.qs, w.hmask, u);
  }
}

// Scale group of 128-bit lane g of halved register p (K2Quants512): chunk p (g < 2) or p + 4.
constexpr int HalvedGroup(int p, int g) {
  return 2 * p + 8 * (g >> 1) + (g & 1);
}

// The 16 scales as int16 words (KHeader::sc) in words 0..15, four times them in 16..31.
inline __m512i ScalesAndTimes4(__m256i scale_words) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(scale_words), _mm256_slli_epi16(scale_words, 2),
                            1);
}
// The scale words of halved register p from ScalesAndTimes4: lane g's scale, times 4 for
// registers 0 and 2 (whose u are not), so every product is 4 times its value.
inline __m512i ScalesOfHalvedRegister(__m512i both, int p) {
  auto word = [p](int g) { return (HalvedGroup(p, g) + (p & 1 ? 0 : 16)) * 0x0001000100010001ll; };
  return _mm512_permutexvar_epi16(
      _mm512_set_epi64(word(3), word(3), word(2), word(2), word(1), word(1), word(0), word(0)),
      both);
}

#if defined(__AVX512VNNI__)
// For AddScaledDotPair512 on halved registers 2n and 2n + 1: lane g's word pair (scale of
// register 2n, scale of register 2n + 1) in every int32 lane. One word permutation for two
// registers.
inline __m512i ScalePairsOfHalvedRegisters(__m512i words, int n) {
  auto pair = [n](int g) {
    const int64_t d = HalvedGroup(2 * n, g) | HalvedGroup(2 * n + 1, g) << 16;
    return d | d << 32;
  };
  return _mm512_permutexvar_epi16(
      _mm512_set_epi64(pair(3), pair(3), pair(2), pair(2), pair(1), pair(1), pair(0), pair(0)),
      words);
}
#endif

// Q2_K (kHigh kNone) and Q3_K lane sums of one block (x with halved chunks). With VNNI, the two
// registers of a pair go through AddScaledDotPair512's packing with the second one's dot products
// shifted left by 14, not 16: they are 4 times their value (u times 4), so the high word gets
// the value itself (exact: a multiple of 4 shifted), and the sums need no correction. Without
// VNNI the scale words of registers 0 and 2 are times 4 (ScalesOfHalvedRegister) and the sum is
// shifted back, exactly. scale_words: the 16 scales as int16 words (KHeader::sc). Always inlined:
// GCC 12 called it once per block otherwise (5-8% slower).
template <HighBits kHigh>
[[gnu::always_inline]] inline __m256i K2LaneSums512(const uint8_t* qs, const uint8_t* hmask,
                                                    const BlockQ8_K& x, __m256i scale_words) {
  __m512i u[4];
  K2Quants512<kHigh>(qs, hmask, u);
#if defined(__AVX512VNNI__)
  const __m512i scales = _mm512_castsi256_si512(scale_words);
  __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int n = 0; n < 2; ++n) {
    sum = AddScaledDotPair512<14>(sum, u[2 * n], _mm512_loadu_si512(x.qs + 128 * n), u[2 * n + 1],
                                  _mm512_loadu_si512(x.qs + 128 * n + 64),
                                  ScalePairsOfHalvedRegisters(scales, n));
  }
  return _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
#else
  const __m512i both = ScalesAndTimes4(scale_words);
  __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    sum[p & 1] = AddScaledDotU8S8x512(sum[p & 1], u[p], _mm512_loadu_si512(x.qs + 64 * p),
                                      ScalesOfHalvedRegister(both, p));
  }
  const __m512i s = _mm512_add_epi32(sum[0], sum[1]);
  return _mm256_srai_epi32(
      _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1)), 2);
#endif
}

// Registers 2n and 2n + 1 (n = 0, 1) of a Q6_K block's quants as bytes: register p = 2n + j
// holds elements 128n + 64j .. + 63, low 4 bits from nibble j of ql[64n .. 64n + 63], high 2 bits
// from bits 4j + 2t of qh[32n + i] (t = which half of the register), moved to bits 4-5.
inline void Q6KQuants512(const BlockQ6_K& w, int n, __m512i& u0, __m512i& u1) {
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i shl = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0002000200020002, 0x0004000400040004, 0x0004000400040004,
                                       0x0004000400040004, 0x0004000400040004);
  const __m512i shr = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0002000200020002, 0, 0, 0, 0);
  const __m512i ql = _mm512_loadu_si512(w.ql + 64 * n);
  const __m512i qh =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * n)));
  // (lo & 0x0F) | (hi & 0x30)
  u0 = _mm512_ternarylogic_epi32(ql, _mm512_and_si512(_mm512_sllv_epi16(qh, shl), bits45), low4,
                                 0xEC);
  u1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4),
                                 _mm512_and_si512(_mm512_srlv_epi16(qh, shr), bits45), low4, 0xEC);
}

// Q6_K lane sums of one block (x in natural order), on Q6KQuants512's registers.
inline __m256i Q6KLaneSums512(const BlockQ6_K& w, const BlockQ8_K& x) {
  // The 16 int8 scales as int16 words; lane g of register p takes scale 4p + g.
  const __m512i scales = _mm512_castsi256_si512(
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales))));
  __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 2
  for (int n = 0; n < 2; ++n) {
    __m512i u0, u1;
    Q6KQuants512(w, n, u0, u1);
#if defined(__AVX512VNNI__)
    sum[0] = AddScaledDotPair512(sum[0], u0, _mm512_loadu_si512(x.qs + 128 * n), u1,
                                 _mm512_loadu_si512(x.qs + 128 * n + 64),
                                 ScalePairsOfRegisters(scales, n));
#else
    const ScalePair512 sc = ScalesOfRegisters(scales, n);
    sum[0] = AddScaledDotU8S8x512(sum[0], u0, _mm512_loadu_si512(x.qs + 128 * n), sc.even);
    sum[1] = AddScaledDotU8S8x512(sum[1], u1, _mm512_loadu_si512(x.qs + 128 * n + 64), sc.odd);
#endif
  }
  const __m512i s = _mm512_add_epi32(sum[0], sum[1]);
  return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

// Prefetch of the weight row g_prefetch.kquant_l1 ahead (2 KiB; 6 KiB on AMD Zen 5,
// matmul_internal.h) into every cache level (T0), at fixed addresses less
// than a cache line apart (no loop; every 64-byte line is touched, also across consecutive
// blocks). It was non-temporal (NTA) first: on the AMD Zen 4 of the first measurements NTA and
// T0 were within noise (0.83 and 0.81 of an F16 GEMV's GB/s on 100 MB of Q4_K from DRAM, 1
// thread; no software prefetch 0.62), but on an Intel Xeon with AMX (28 Nov 2026) NTA left the
// 2-thread Q4_K GEMV at 14 GB/s in cache and 13 from DRAM against 38 and 17 with T0, and
// TinyLlama Q4_K_M decode at 20-21 tok/s against 34-35.
template <class Block>
[[gnu::always_inline]] inline void PrefetchBlockT0(const Block* block) {
  constexpr int kCount = (sizeof(Block) + 63) / 64, kStep = sizeof(Block) / kCount;
  static_assert(kStep <= 64 && sizeof(Block) - (kCount - 1) * kStep <= 64);
  const uintptr_t l1 = g_prefetch.kquant_l1;
  const char* a = reinterpret_cast<const char*>(block) + l1;
  const uintptr_t l2 = g_prefetch.l2_ahead;  // and into L2 further on (matmul_internal.h)
#pragma GCC unroll 8
  for (int i = 0; i < kCount; ++i) {
    if (l1 != 0) PrefetchLine<true>(reinterpret_cast<uintptr_t>(a + i * kStep));
    if (l2 != 0) PrefetchLine<false>(reinterpret_cast<uintptr_t>(a + l2 + i * kStep));
  }
}

// The chunk order of the activations the GEMV and panels of F read.
template <class F>
constexpr Q8KOrder Gemv512XOrder =
    std::is_same_v<F, Q4_KF> || std::is_same_v<F, Q5_KF> ? Q8KOrder::kPairs
    : std::is_same_v<F, Q6_KF>                           ? Q8KOrder::kNatural
                                                         : Q8KOrder::kHalves;

// One weight row of F on nb blocks (x in Gemv512XOrder<F>): KMicro's Tile<1, 1> result, bitwise.
template <class F>
inline float KGemvRow512(const BlockQ8_K* x, const typename F::B* w, int nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    PrefetchBlockT0(&w[b]);
    // dd = (d, dmin) as floats (d twice for Q3_K and Q6_K, whose mins use d): one multiply by
    // x's d gives both per-block factors, the same products as two scalar ones.
    __m128 dd;
    __m256i lsum, mn;
    if constexpr (Gemv512XOrder<F> == Q8KOrder::kPairs) {
      const __m128i head = LoadHead16(&w[b]);
      dd = _mm_cvtph_ps(head);
      const __m128i sm = ScalesMinsK4(head);
      mn = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));  // Repeat8 of bytes 8..15
      if constexpr (std::is_same_v<F, Q5_KF>) {
        lsum = K4LaneSums512<true>(w[b].qs, w[b].qh, x[b], sm);
      } else {
        lsum = K4LaneSums512<false>(w[b].qs, nullptr, x[b], sm);
      }
    } else {
      const KHeader hw = F::Header(w[b]);
      mn = hw.mn;
      if constexpr (std::is_same_v<F, Q2_KF>) {
        static_assert(offsetof(BlockQ2_K, dmin) == offsetof(BlockQ2_K, d) + 2);
        uint32_t d_dmin;
        std::memcpy(&d_dmin, &w[b].d, 4);
        dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));
        lsum = K2LaneSums512<HighBits::kNone>(w[b].qs, nullptr, x[b], hw.sc);
      } else {
        dd = _mm_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(w[b].d)));
        if constexpr (std::is_same_v<F, Q3_KF>) {
          lsum = K2LaneSums512<HighBits::kHmask>(w[b].qs, w[b].hmask, x[b], hw.sc);
        } else if constexpr (std::is_same_v<F, Q3_KPackedF>) {
          lsum = K2LaneSums512<HighBits::kPlanes>(w[b].qs, w[b].hmask, x[b], hw.sc);
        } else {
          lsum = Q6KLaneSums512(w[b], x[b]);
        }
      }
    }
    // The two per-block factors go through memory: an FMA's broadcast operand from memory is a
    // load, where a broadcast from a register takes the shuffle port (on Intel one of the two
    // 512-bit ports): 3 of ~40 vector uops per block. The empty asm keeps GCC from forwarding
    // the stored values back into registers. (Xeon with AMX, 29 Nov 2026, kernel_bench gemv, 1
    // thread in cache, with Q2_K's scales split as words: Q2_K 12.2-13.4 -> 13.6-14.8 GB/s,
    // Q3_K (packed) 11.8-12.9 -> 12.6-13.9, Q4_K 19.1-20.6 -> 20.0-21.4, Q6_K 23.9-25.2 ->
    // 25.0-26.5.)
    alignas(16) float dx[4];
    _mm_store_ps(dx, _mm_mul_ps(dd, _mm_set1_ps(x[b].d)));
    asm("" : "+m"(dx));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    const __m256i ms = _mm256_madd_epi16(mn, bs);
    acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&dx[0]), _mm256_cvtepi32_ps(lsum), acc);
    // acc - (dmin * x.d) * ms: fnmadd rounds -(a * b) + c once, as fmadd(-a, b, c) does.
    acc = _mm256_fnmadd_ps(_mm256_broadcast_ss(&dx[1]), _mm256_cvtepi32_ps(ms), acc);
  }
  return ReduceAdd(acc);
}

}  // namespace qx
