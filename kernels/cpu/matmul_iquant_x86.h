// Micro-kernels of the grid i-quants (IQ2_XXS ... IQ1_M, iquant_blocks.h) for the AVX2 and
// AVX-512 translation units, included by matmul_quant_x86.h inside their anonymous namespace.
//
// A weight block is decoded once into registers (IQRegs: DecodeIQ's 256 signed values, 32 per
// register, gathered from the grid 4 or 8 entries at a time, and its 16 group scales) and its
// exact integer lane sums L_l taken with each of the tile's MR activation rows: |v| times x
// with v's sign (maddubs, pairs within 2 * 62 * 127), times the group scales (madd, or vpdpwssd
// with VNNI), summed per lane. Integer sums are exact, and the float steps are the scalar set's
// (a conversion and an fma per block and lane, the lanes summed at the end), so every ISA gives
// the scalar bits.
#pragma once

// The including TU includes kernels/cpu/iquant_blocks.h first (outside its anonymous namespace).

namespace qx {

// A decoded block in registers: v[c] the values of sub-block c (32 weights), s the 16 group
// scales (bytes), f the block's float factor.
struct IQRegs {
  __m256i v[8];
  __m128i s;
  float f;
};

// Magnitudes g (none 0) with the sign bits applied: -g in byte j where bit j is set.
inline __m256i ApplySigns(__m256i g, uint32_t bits) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_mask_sub_epi8(g, static_cast<__mmask32>(bits), _mm256_setzero_si256(), g);
#else
  const __m256i m = BitBytes(bits);  // matmul_quant_x86.h
  return _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
#endif
}
inline uint32_t Load32U(const void* p) {
  uint32_t u;
  std::memcpy(&u, p, 4);
  return u;
}
inline uint64_t Load64U(const void* p) {
  uint64_t u;
  std::memcpy(&u, p, 8);
  return u;
}
// 4 uint64 grid entries (32 bytes) at the 4 int32 indices: scalar loads, a little faster than
// vpgatherdq on AMD Zen 4 (kernel_bench gemv, 1 thread, 4 Dec 2026).
inline __m256i Gather4(const uint64_t* grid, __m128i idx) {
  alignas(16) uint32_t i[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(i), idx);
  return _mm256_set_epi64x(static_cast<int64_t>(grid[i[3]]), static_cast<int64_t>(grid[i[2]]),
                           static_cast<int64_t>(grid[i[1]]), static_cast<int64_t>(grid[i[0]]));
}
// 8 uint32 grid entries (32 bytes) at the 8 int32 indices (likewise: IQ3_S 2.2-3.0 GB/s against
// 1.9-2.8 with vpgatherdd).
inline __m256i Gather8(const uint32_t* grid, __m256i idx) {
  alignas(32) uint32_t i[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(i), idx);
  return _mm256_set_epi32(static_cast<int>(grid[i[7]]), static_cast<int>(grid[i[6]]),
                          static_cast<int>(grid[i[5]]), static_cast<int>(grid[i[4]]),
                          static_cast<int>(grid[i[3]]), static_cast<int>(grid[i[2]]),
                          static_cast<int>(grid[i[1]]), static_cast<int>(grid[i[0]]));
}
// The grid entries at 4 (uint64_t grids) or 8 (uint32_t) indices read from memory (bytes or
// uint16, masked): no vector round trip where the file holds the indices as they are.
template <class I>
inline __m256i Grid4At(const uint64_t* grid, const I* i, unsigned mask = ~0u) {
  return _mm256_set_epi64x(
      static_cast<int64_t>(grid[i[3] & mask]), static_cast<int64_t>(grid[i[2] & mask]),
      static_cast<int64_t>(grid[i[1] & mask]), static_cast<int64_t>(grid[i[0] & mask]));
}
template <class I>
inline __m256i Grid8At(const uint32_t* grid, const I* i) {
  return _mm256_set_epi32(static_cast<int>(grid[i[7]]), static_cast<int>(grid[i[6]]),
                          static_cast<int>(grid[i[5]]), static_cast<int>(grid[i[4]]),
                          static_cast<int>(grid[i[3]]), static_cast<int>(grid[i[2]]),
                          static_cast<int>(grid[i[1]]), static_cast<int>(grid[i[0]]));
}
// 4 bytes as 4 int32 lanes.
inline __m128i Bytes4(const uint8_t* p) {
  return _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(Load32U(p))));
}
// Bytes of 7-bit sign indices (bit 7 clear) as ggml's sign bytes: the index and, as bit 7, its
// parity. 16-bit shifts: a byte's bits 0..3 only ever meet its own bits on the way to bit 0.
inline __m256i SignBytesOf7(__m256i b) {
  __m256i p = _mm256_xor_si256(b, _mm256_srli_epi16(b, 4));
  p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 1));
  return _mm256_or_si256(b, _mm256_slli_epi16(_mm256_and_si256(p, _mm256_set1_epi8(1)), 7));
}
// 8 uint32 each holding 4 7-bit sign indices (bits 7l ..) as 8 x 4 sign bytes.
inline __m256i SignBytesOfFields(__m256i aux) {
  const __m256i f = _mm256_or_si256(
      _mm256_or_si256(_mm256_and_si256(aux, _mm256_set1_epi32(0x7F)),
                      _mm256_and_si256(_mm256_slli_epi32(aux, 1), _mm256_set1_epi32(0x7F00))),
      _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(aux, 2), _mm256_set1_epi32(0x7F0000)),
                      _mm256_and_si256(_mm256_slli_epi32(aux, 3), _mm256_set1_epi32(0x7F000000))));
  return SignBytesOf7(f);
}
// Bytes 0..7: the 8 int32 lanes (each < 256).
inline __m128i Bytes8Of(__m256i v) {
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_packus_epi16(w, w);
}
// IQ1: grid bytes g (-1, 0, 1) as 8 g + delta, delta +-1 per byte in `delta`.
inline __m256i ShiftIQ1(__m256i g, __m256i delta) {
  return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(g, 3), _mm256_set1_epi8(-8)), delta);
}
// The 4-bit fields of bytes 0..7 (low nibble first) as bytes 0..15.
inline __m128i NibbleBytes(__m128i bytes8) {
  return _mm_and_si128(_mm_unpacklo_epi8(bytes8, _mm_srli_epi16(bytes8, 4)), _mm_set1_epi8(15));
}
// The odd scales 2 ls + 1 of 16 ls.
inline __m128i OddScales(__m128i ls) {
  return _mm_add_epi8(_mm_add_epi8(ls, ls), _mm_set1_epi8(1));
}
// The 16 group scales of 8 sub-block ls (bytes 0..7): 2 ls + 1 for both groups of each.
inline __m128i SubBlockScales(__m128i ls8) {
  return OddScales(_mm_unpacklo_epi8(ls8, ls8));
}
#if defined(__AVX512BW__)
// The 32 grid indices of a block at once: idx[k] = low[k] | ((words[k / kPer] >> (kBits * (k %
// kPer))) & kMask) << 8, with `words` the block's uint16 words of high bits in its low lanes.
template <int kPer, int kBits, int kMask>
inline void BlockIndices(const uint8_t* low, __m512i words, uint16_t* idx) {
  struct Tables {
    uint16_t which[32], shift[32];
  };
  static constexpr Tables kT = [] {
    Tables t{};
    for (int k = 0; k < 32; ++k) {
      t.which[k] = static_cast<uint16_t>(k / kPer);
      t.shift[k] = static_cast<uint16_t>(kBits * (k % kPer));
    }
    return t;
  }();
  const __m512i h = _mm512_permutexvar_epi16(_mm512_loadu_si512(kT.which), words);
  const __m512i high = _mm512_and_si512(_mm512_srlv_epi16(h, _mm512_loadu_si512(kT.shift)),
                                        _mm512_set1_epi16(kMask));
  _mm512_store_si512(
      idx, _mm512_or_si512(
               _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low))),
               _mm512_slli_epi16(high, 8)));
}
#endif

// DecodeIQ (iquant_blocks.cc) of format kType in registers: the same integers.
template <DType kType>
[[gnu::always_inline]] inline void DecodeIQRegs(const void* block, IQRegs& r) {
  namespace in = ::llm::kernels::internal;
  // The sign bytes of the whole block at once where they come from 7-bit indices (IQ2_XXS,
  // IQ2_XS, IQ3_XXS), then 4 per sub-block from L1.
  alignas(32) uint32_t signs[8];
  if constexpr (kType == DType::kIQ2_XXS || kType == DType::kIQ3_XXS) {
    constexpr bool kIQ2 = kType == DType::kIQ2_XXS;
    using B = std::conditional_t<kIQ2, in::BlockIQ2_XXS, in::BlockIQ3_XXS>;
    const auto* b = static_cast<const B*>(block);
    const auto* qs = reinterpret_cast<const uint8_t*>(b->qs);
    r.f = _cvtsh_ss(b->d) * (kIQ2 ? 0.125f : 0.25f);
    // per sub-block a uint32 of 4 sign indices and the scale: IQ2_XXS's after each 4 grid
    // indices, IQ3_XXS's after all 64
    __m256i aux;
    if constexpr (kIQ2) {
      const __m256i odd = _mm256_set_epi32(7, 5, 3, 1, 7, 5, 3, 1);
      aux = _mm256_blend_epi32(
          _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)),
                                      odd),
          _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32)),
                                      odd),
          0xF0);
    } else {
      aux = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64));
    }
    r.s = SubBlockScales(Bytes8Of(_mm256_srli_epi32(aux, 28)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(signs), SignBytesOfFields(aux));
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      __m256i g;
      if constexpr (kIQ2) {
        g = Grid4At(in::kIQ2XXSGrid, qs + 8 * ib);
      } else {
        g = Grid8At(in::kIQ3XXSGrid, qs + 8 * ib);
      }
      r.v[ib] = ApplySigns(g, signs[ib]);
    }
  } else if constexpr (kType == DType::kIQ2_XS || kType == DType::kIQ2_S) {
    constexpr bool kXS = kType == DType::kIQ2_XS;
    using B = std::conditional_t<kXS, in::BlockIQ2_XS, in::BlockIQ2_S>;
    const auto* b = static_cast<const B*>(block);
    r.f = _cvtsh_ss(b->d) * 0.125f;
    r.s = OddScales(NibbleBytes(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->scales))));
    if constexpr (kXS) {  // the 7-bit sign index atop each uint16, as 32 bytes in order
      const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
      const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 16));
      const __m256i bytes = _mm256_permute4x64_epi64(
          _mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), 0xD8);
      _mm256_store_si256(reinterpret_cast<__m256i*>(signs), SignBytesOf7(bytes));
    }
#if defined(__AVX512BW__)
    [[maybe_unused]] alignas(64) uint16_t idx[32];
    if constexpr (!kXS) {  // index k's 2 high bits: bits 2 (k % 4) of qh[k / 4]
      BlockIndices<4, 2, 3>(b->qs,
                            _mm512_castsi128_si512(_mm_cvtepu8_epi16(
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qh)))),
                            idx);
    }
#endif
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      if constexpr (kXS) {
        r.v[ib] = ApplySigns(Grid4At(in::kIQ2XSGrid, b->qs + 4 * ib, 511), signs[ib]);
      } else {
#if defined(__AVX512BW__)
        r.v[ib] = ApplySigns(Grid4At(in::kIQ2SGrid, idx + 4 * ib), Load32U(b->qs + 32 + 4 * ib));
#else
        const __m128i high =
            _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(b->qh[ib]), _mm_set_epi32(6, 4, 2, 0)),
                          _mm_set1_epi32(3));
        const __m128i at = _mm_or_si128(Bytes4(b->qs + 4 * ib), _mm_slli_epi32(high, 8));
        r.v[ib] = ApplySigns(Gather4(in::kIQ2SGrid, at), Load32U(b->qs + 32 + 4 * ib));
#endif
      }
    }
  } else if constexpr (kType == DType::kIQ3_S) {
    const auto* b = static_cast<const in::BlockIQ3_S*>(block);
    r.f = _cvtsh_ss(b->d);
    r.s = SubBlockScales(NibbleBytes(_mm_cvtsi32_si128(static_cast<int>(Load32U(b->scales)))));
#if defined(__AVX512BW__)
    // the 64 9-bit indices at once: bit k of the 64 bits of qh is index k's high bit
    alignas(64) uint16_t idx[64];
    const __m512i q = _mm512_loadu_si512(b->qs);
    const uint64_t qh = Load64U(b->qh);
    const __m512i high = _mm512_set1_epi16(256);
    const __m512i lo = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q));
    const __m512i hi = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q, 1));
    _mm512_store_si512(idx, _mm512_mask_add_epi16(lo, static_cast<__mmask32>(qh), lo, high));
    _mm512_store_si512(idx + 32,
                       _mm512_mask_add_epi16(hi, static_cast<__mmask32>(qh >> 32), hi, high));
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      r.v[ib] = ApplySigns(Grid8At(in::kIQ3SGrid, idx + 8 * ib), Load32U(b->signs + 4 * ib));
    }
#else
    const __m256i shifts = _mm256_set_epi32(1, 2, 3, 4, 5, 6, 7, 8);  // bit j to bit 8
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i low =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + 8 * ib)));
      const __m256i high = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(b->qh[ib]), shifts),
                                            _mm256_set1_epi32(256));
      r.v[ib] = ApplySigns(Gather8(in::kIQ3SGrid, _mm256_or_si256(low, high)),
                           Load32U(b->signs + 4 * ib));
    }
#endif
  } else if constexpr (kType == DType::kIQ1_S) {
    const auto* b = static_cast<const in::BlockIQ1_S*>(block);
    r.f = _cvtsh_ss(b->d) * 0.125f;
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qh));
    const __m128i ls = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
    r.s = SubBlockScales(_mm_packus_epi16(ls, ls));
#if defined(__AVX512BW__)
    alignas(64) uint16_t idx[32];  // index k's 3 high bits: bits 3 (k % 4) of qh[k / 4]
    BlockIndices<4, 3, 7>(b->qs, _mm512_castsi128_si512(qh), idx);
#endif
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const int q = b->qh[ib];
#if defined(__AVX512BW__)
      const __m256i g = Grid4At(in::kIQ1SGrid, idx + 4 * ib);
#else
      const __m128i high = _mm_and_si128(
          _mm_srlv_epi32(_mm_set1_epi32(q), _mm_set_epi32(9, 6, 3, 0)), _mm_set1_epi32(7));
      const __m256i g =
          Gather4(in::kIQ1SGrid, _mm_or_si128(Bytes4(b->qs + 4 * ib), _mm_slli_epi32(high, 8)));
#endif
      r.v[ib] = ShiftIQ1(g, _mm256_set1_epi8((q & 0x8000) != 0 ? -1 : 1));
    }
  } else {
    static_assert(kType == DType::kIQ1_M);
    const auto* b = static_cast<const in::BlockIQ1_M*>(block);
    const uint64_t sc = Load64U(b->scales);
    // d's 4 nibbles atop the 4 uint16 words
    const auto d16 = static_cast<uint16_t>(((sc >> 12) & 0xF) | ((sc >> 24) & 0xF0) |
                                           ((sc >> 36) & 0xF00) | ((sc >> 48) & 0xF000));
    r.f = _cvtsh_ss(d16) * 0.125f;
    // group g's 3 bits at bit 3 (g % 4) of word g / 4
    uint64_t ls = 0;
    for (int g = 0; g < 16; g += 2) {
      const uint64_t word = sc >> (16 * (g / 4)), shift = 3 * (g % 4);
      ls |= ((word >> shift) & 7) << (4 * g) | ((word >> (shift + 3)) & 7) << (4 * g + 4);
    }
    r.s = OddScales(NibbleBytes(_mm_cvtsi64_si128(static_cast<int64_t>(ls))));
#if defined(__AVX512BW__)
    alignas(64) uint16_t idx[32];  // index k's 3 high bits: nibble k % 2 of qh[k / 2]
    BlockIndices<2, 4, 7>(b->qs,
                          _mm512_castsi256_si512(_mm256_cvtepu8_epi16(
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qh)))),
                          idx);
#endif
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      // group 4 ib + l: its index's high bits and shift sign in nibble l of qh[2ib] | qh[2ib+1] <<
      // 8
      const uint32_t h =
          static_cast<uint32_t>(b->qh[2 * ib]) | static_cast<uint32_t>(b->qh[2 * ib + 1]) << 8;
#if defined(__AVX512BW__)
      const __m256i g = Grid4At(in::kIQ1SGrid, idx + 4 * ib);
#else
      const __m128i nibbles =
          _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(h)), _mm_set_epi32(12, 8, 4, 0));
      const __m256i g =
          Gather4(in::kIQ1SGrid,
                  _mm_or_si128(Bytes4(b->qs + 4 * ib),
                               _mm_slli_epi32(_mm_and_si128(nibbles, _mm_set1_epi32(7)), 8)));
#endif
      // byte l of the 4: -1 where bit 3 of nibble l is set, else +1; then each to its 8 bytes
      const uint32_t neg = ((h >> 3) & 0x1) * 0xFEu | ((h >> 7) & 0x1) * 0xFE00u |
                           ((h >> 11) & 0x1) * 0xFE0000u | ((h >> 15) & 0x1) * 0xFE000000u;
      const __m256i delta = _mm256_shuffle_epi8(
          _mm256_set1_epi32(static_cast<int>(0x01010101u + neg)),
          _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
      r.v[ib] = ShiftIQ1(g, delta);
    }
  }
}

// The 8 lane sums L_l of iquant_blocks.h for a decoded block and a Q8_K block, exact.
[[gnu::always_inline]] inline __m256i IQLaneSums(const IQRegs& w, const BlockQ8_K& x) {
#if defined(__AVX512BW__)
  // Word k of chunk c (64 weights: 32 words of pairs) takes group 4c + k / 8 of the 16 scales,
  // which are in both 128-bit lanes of s2 (vpshufb stays in its lane). Int32 lane q of a chunk
  // holds its elements 4q .. 4q + 3, so lanes q and q + 8 fold into canonical lane q.
  const __m256i s2 = _mm256_broadcastsi128_si256(w.s);
  const __m256i lane_groups =
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(w.v[2 * c]), w.v[2 * c + 1], 1);
    const __m512i xv = _mm512_loadu_si512(x.qs + 64 * c);
    const __m512i xs = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(v), _mm512_setzero_si512(), xv);
    const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(v), xs);
    const __m512i sc = _mm512_cvtepu8_epi16(
        _mm256_shuffle_epi8(s2, _mm256_add_epi8(lane_groups, _mm256_set1_epi8(4 * c))));
#if defined(__AVX512VNNI__)
    acc = _mm512_dpwssd_epi32(acc, p, sc);
#else
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
  }
  return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
#else
  // int32 lane q of chunk c (32 weights) holds its elements 4q .. 4q + 3
  const __m128i halves = _mm_set_epi64x(0x0101010101010101, 0);
  __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * c));
    const __m256i p =
        _mm256_maddubs_epi16(_mm256_sign_epi8(w.v[c], w.v[c]), _mm256_sign_epi8(xv, w.v[c]));
    // word k of chunk c: group 2c + k / 8
    const __m256i sc = _mm256_cvtepu8_epi16(
        _mm_shuffle_epi8(w.s, _mm_add_epi8(halves, _mm_set1_epi8(static_cast<char>(2 * c)))));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
  }
  return acc;
#endif
}

// A ternary block (TQ1_0, TQ2_0) in registers: u[c] = t + 1 of sub-block c (0, 1, 2; TQ2_0's
// 2-bit fields as they are, 0..3), and f = d.
struct TQRegs {
  __m256i u[8];
  float f;
};
// TQ1_0: bytes times 3, wrapping (ggml's uint8_t product).
inline __m256i Times3Bytes(__m256i p) {
  return _mm256_add_epi8(p, _mm256_add_epi8(p, p));
}
// TQ1_0: the trit ((uint16_t)r * 3) >> 8 of each byte r: [r >= 86] + [r >= 171].
inline __m256i TritsOf(__m256i r) {
  const __m256i one = _mm256_set1_epi8(1);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  const __mmask32 ge86 = _mm256_cmpge_epu8_mask(r, _mm256_set1_epi8(86));
  const __mmask32 ge171 = _mm256_cmpge_epu8_mask(r, _mm256_set1_epi8(-85));
  const __m256i u = _mm256_maskz_mov_epi8(ge86, one);
  return _mm256_mask_add_epi8(u, ge171, u, one);
#else
  return _mm256_add_epi8(_mm256_min_epu8(_mm256_subs_epu8(r, _mm256_set1_epi8(85)), one),
                         _mm256_min_epu8(_mm256_subs_epu8(r, _mm256_set1_epi8(-86)), one));
#endif
}
// (DecodeIQRegs for the ternary formats.)
template <DType kType>
[[gnu::always_inline]] inline void DecodeIQRegs(const void* block, TQRegs& r) {
  namespace in = ::llm::kernels::internal;
  if constexpr (kType == DType::kTQ2_0) {
    const auto* b = static_cast<const in::BlockTQ2_0*>(block);
    r.f = _cvtsh_ss(b->d);
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * j));
#pragma GCC unroll 4
      for (int n = 0; n < 4; ++n) {  // 16-bit shifts: the mask drops what crossed a byte
        r.u[4 * j + n] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * n), _mm256_set1_epi8(3));
      }
    }
  } else {
    static_assert(kType == DType::kTQ1_0);
    const auto* b = static_cast<const in::BlockTQ1_0*>(block);
    r.f = _cvtsh_ss(b->d);
    // bytes 0..31: trit n of each is sub-block n
    __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
#pragma GCC unroll 5
    for (int n = 0; n < 5; ++n) {
      r.u[n] = TritsOf(p);
      p = Times3Bytes(p);
    }
    // bytes 32..47: trits 0 | 1 are sub-block 5, 2 | 3 sub-block 6, 4 the first half of 7
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + 32));
    __m256i y =
        _mm256_inserti128_si256(_mm256_castsi128_si256(x), _mm_add_epi8(x, _mm_add_epi8(x, x)), 1);
    r.u[5] = TritsOf(y);
    y = Times3Bytes(Times3Bytes(y));
    r.u[6] = TritsOf(y);
    y = Times3Bytes(Times3Bytes(y));
    // qh: dword n of 16 bytes = its 4 bytes times 3^n, whose trit 0 is their trit n
    const __m128i h0 = _mm_set1_epi32(static_cast<int>(Load32U(b->qh)));
    const __m128i h1 = _mm_add_epi8(h0, _mm_add_epi8(h0, h0));
    const __m128i h2 = _mm_add_epi8(h1, _mm_add_epi8(h1, h1));
    const __m128i h3 = _mm_add_epi8(h2, _mm_add_epi8(h2, h2));
    const __m128i h =
        _mm_blend_epi32(_mm_blend_epi32(h0, h1, 0x2), _mm_blend_epi32(h2, h3, 0x8), 0xC);
    r.u[7] = TritsOf(_mm256_inserti128_si256(y, h, 1));
  }
}
// The ternary lane sums of iquant_blocks.h (IQLaneSums with offset 1): u times x per lane (int32
// lane q of a sub-block holds its elements 4q .. 4q + 3), minus bsums 2l and 2l + 1 in lane l.
[[gnu::always_inline]] inline __m256i IQLaneSums(const TQRegs& w, const BlockQ8_K& x) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  auto xs = [&x](int c) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * c));
  };
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 8; c += 2) {
    a0 = _mm256_dpbusd_epi32(a0, w.u[c], xs(c));
    a1 = _mm256_dpbusd_epi32(a1, w.u[c + 1], xs(c + 1));
  }
  return _mm256_sub_epi32(_mm256_add_epi32(a0, a1), _mm256_madd_epi16(bsums, ones16));
#else
  // word k of every sub-block holds its elements 2k, 2k + 1; summed over the 8 in int16: |word|
  // <= 8 * 2 * 3 * 127 = 6096, and minus bsums[k] (|bsums| <= 16 * 127) still inside int16
  __m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w.u[c], xs(c)));
  return _mm256_madd_epi16(_mm256_sub_epi16(s16, bsums), ones16);
#endif
}

// Tiles of up to MR activation rows x 1 weight row: each weight block decoded once per tile.
template <DType kType, class W, int MR>
struct IQMicro {
  using XBlock = BlockQ8_K;
  using WBlock = W;
  static constexpr int kBlock = ::llm::kQK_K;
  static constexpr int kMR = MR;
  static constexpr int kNR = 1;

  template <int TMR, int TNR>
  static void Tile(const XBlock* x, int64_t ldx, const WBlock* w, int64_t, int nb,
                   const float* bias, float* y, int64_t ldy) {
    static_assert(TNR == 1);
    __m256 acc[TMR];
    for (int i = 0; i < TMR; ++i) acc[i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
      PrefetchWeights(&w[b]);
      std::conditional_t<::llm::IsTernaryQuant(kType), TQRegs, IQRegs> r;
      DecodeIQRegs<kType>(&w[b], r);
      for (int i = 0; i < TMR; ++i) {
        const BlockQ8_K& xb = x[i * ldx + b];
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(r.f * xb.d), _mm256_cvtepi32_ps(IQLaneSums(r, xb)),
                                 acc[i]);
      }
    }
    for (int i = 0; i < TMR; ++i) {
      alignas(32) float a[8];
      _mm256_store_ps(a, acc[i]);
      const float sum = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
      y[i * ldy] = bias != nullptr ? sum + bias[0] : sum;
    }
  }
};

// The grid i-quants' panels in a kernel table, with tiles of MR x 1.
template <int MR>
void AddIQuantKernels(::llm::kernels::internal::QuantMatmulKernels& k) {
  using ::llm::kernels::internal::MatmulBlockPanel;
  namespace in = ::llm::kernels::internal;
  k.fn[static_cast<int>(DType::kIQ2_XXS)] =
      MatmulBlockPanel<IQMicro<DType::kIQ2_XXS, in::BlockIQ2_XXS, MR>>;
  k.fn[static_cast<int>(DType::kIQ2_XS)] =
      MatmulBlockPanel<IQMicro<DType::kIQ2_XS, in::BlockIQ2_XS, MR>>;
  k.fn[static_cast<int>(DType::kIQ2_S)] =
      MatmulBlockPanel<IQMicro<DType::kIQ2_S, in::BlockIQ2_S, MR>>;
  k.fn[static_cast<int>(DType::kIQ3_XXS)] =
      MatmulBlockPanel<IQMicro<DType::kIQ3_XXS, in::BlockIQ3_XXS, MR>>;
  k.fn[static_cast<int>(DType::kIQ3_S)] =
      MatmulBlockPanel<IQMicro<DType::kIQ3_S, in::BlockIQ3_S, MR>>;
  k.fn[static_cast<int>(DType::kIQ1_S)] =
      MatmulBlockPanel<IQMicro<DType::kIQ1_S, in::BlockIQ1_S, MR>>;
  k.fn[static_cast<int>(DType::kIQ1_M)] =
      MatmulBlockPanel<IQMicro<DType::kIQ1_M, in::BlockIQ1_M, MR>>;
  k.fn[static_cast<int>(DType::kTQ1_0)] =
      MatmulBlockPanel<IQMicro<DType::kTQ1_0, in::BlockTQ1_0, MR>>;
  k.fn[static_cast<int>(DType::kTQ2_0)] =
      MatmulBlockPanel<IQMicro<DType::kTQ2_0, in::BlockTQ2_0, MR>>;
}

}  // namespace qx
