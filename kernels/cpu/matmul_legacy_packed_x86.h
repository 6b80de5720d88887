// The matmul of the 32-block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4; IQ4_XS and
// Q1_0 per 32-weight sub-block) on packed
// weights (legacy_packed.h) for the AVX2 and AVX-512 translation units, included by
// matmul_quant_x86.h inside their anonymous namespace.
//
// Their order (quant_blocks.h) gives block b of a 16-block group integer lane b and float chain
// b % 16. Per group, output and weight row: the 16 integer sums start at -(offset * S_b) (Q4_0:
// 8, Q5_0: 16, from the -8 S_b prepared with the activations) or 0 (Q4_1, Q5_1) and take 8
// unsigned-by-signed 4-product dot steps (the weight's four 64-byte runs, low and high nibbles
// with their fifth bits added for Q5_0 / Q5_1, against the activations' 8 quads; Q8_0: its 8
// runs of signed bytes, see AddDotS8; IQ4_NL: Q4_0's nibbles made its table's signed values by
// a byte shuffle, then Q8_0's steps; MXFP4 likewise with its own table); then one
// conversion, one product of the 16 weight scales with the 16 activation scales, and one fma
// into the 16 chains (with a min: one more with the mins and S_b). The blocks of a short last
// group are widened with zero blocks (WidenLegacyGroup), whose lanes then add fma(0, 0, acc) =
// acc: a chain never holds -0 (it starts at +0, and a sum that cancels rounds to +0), so those
// lanes keep their bits.
//
// A Vec of 16 lanes is one 512-bit register with AVX-512 and two 256-bit halves with AVX2 (the
// integer dot steps are vpdpbusd with VNNI, else maddubs + madd, which never saturate here:
// quants below 32, activations within [-127, 127]).
#pragma once

namespace qx {

using ::llm::kernels::internal::kPackGroupBlocks;
using ::llm::kernels::internal::kPackGroupMaxBytes;
using ::llm::kernels::internal::PackedXGroup;
using ::llm::kernels::internal::PackedXGroups;

// The formats: block type, whether a weight is d * u + m (else d * (u - offset)), whether the
// quants have a fifth bit.
// Q8_0's quants are signed bytes, eight runs a group (kInt8). IQ4_NL's nibbles index a table of
// signed bytes (kLut): Q4_0's runs, Q8_0's arithmetic. IQ4_XS (kSuper) is IQ4_NL per 32-weight
// sub-block with the scales d * (ls - 32) of its super-blocks (legacy_packed.h). MXFP4 (kE8M0)
// is IQ4_NL with kMXFP4Values and the scales 2^(e - 128) of its exponent bytes. Q1_0 (kBits)
// takes its sign bits as byte masks, u = 2 where set (offset 1), and one fp16 d per 4 sub-blocks.
// NVFP4 (kNV) is MXFP4's table in Q4_0's runs with two sums a lane, the low nibbles' (a sub-block's
// first 16 weights) and the high ones', each with its UE4M3 scale.
template <class Block, DType kTypeV, bool kMinV, bool kFifthV, bool kInt8V = false,
          bool kLutV = false, bool kSuperV = false>
struct LegacyFormat {
  using B = Block;
  static constexpr DType kType = kTypeV;
  static constexpr bool kMin = kMinV, kFifth = kFifthV, kInt8 = kInt8V, kLut = kLutV;
  static constexpr bool kSuper = kSuperV;
  static constexpr bool kE8M0 = kTypeV == DType::kMXFP4;
  static constexpr bool kBits = kTypeV == DType::kQ1_0;  // sign bits as byte masks
  static constexpr bool kNV = kTypeV == DType::kNVFP4;   // two scales a sub-block
  static constexpr int kRuns = kInt8 ? 8 : 4;
  // bytes per 16 sub-blocks of 32 weights (a whole packed group)
  static constexpr int64_t kGroupBytes = kBits    ? 16 * 18 / 4
                                         : kNV    ? 16 * 18
                                         : kSuper ? 16 * ::llm::kernels::internal::kIQ4XSSubBytes
                                                  : 16 * static_cast<int64_t>(sizeof(Block));
};
using Q4_0F = LegacyFormat<BlockQ4_0, DType::kQ4_0, false, false>;
using Q4_1F = LegacyFormat<BlockQ4_1, DType::kQ4_1, true, false>;
using Q5_0F = LegacyFormat<BlockQ5_0, DType::kQ5_0, false, true>;
using Q5_1F = LegacyFormat<BlockQ5_1, DType::kQ5_1, true, true>;
using Q8_0F = LegacyFormat<BlockQ8_0, DType::kQ8_0, false, false, true>;
using IQ4_NLF = LegacyFormat<BlockIQ4_NL, DType::kIQ4_NL, false, false, false, true>;
using IQ4_XSF = LegacyFormat<BlockIQ4_XS, DType::kIQ4_XS, false, false, false, true, true>;
using MXFP4F = LegacyFormat<BlockMXFP4, DType::kMXFP4, false, false, false, true>;
using Q1_0F = LegacyFormat<BlockQ1_0, DType::kQ1_0, false, false>;
using NVFP4F = LegacyFormat<BlockNVFP4, DType::kNVFP4, false, false, false, true>;

// The 16 values of a table format (IQ4_NL's, or MXFP4's: kE8M0) as 16 bytes (a 128-bit lane's
// shuffle table), each xor 0x80 when `biased` (value + 128: BiasS8 folded into the table).
template <class F>
inline __m128i LutTable(bool biased) {
  __m128i t = _mm_loadu_si128(
      reinterpret_cast<const __m128i*>(F::kE8M0 || F::kNV ? kMXFP4Values : kIQ4NLValues));
  return biased ? _mm_xor_si128(t, _mm_set1_epi8(static_cast<char>(0x80))) : t;
}
// E8M0Half (quant_blocks.h) of dword lanes e (0..255): (e - 1) << 23, or 0x00200000 << e below 2.
inline __m256i E8M0HalfBits(__m256i e) {
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  return _mm256_blendv_epi8(normal, small, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e));
}

// A whole IQ4_XS group's 16 sub-block scales d * (ls - 32) as floats (exact: 11 x 6 bits), from
// its head (legacy_packed.h): d of super-block 0 and 1 (fp16) at bytes 0 and 2, the 16 6-bit ls
// from byte 4 (SixBitFieldWords), each widened to a dword and shifted there (AVX2 has no 16-bit
// variable shift); the fp16 d of super-block b / 8 goes to word b by a byte shuffle.
struct IQ4XSHeadWords {
  __m256i ls_lo, ls_hi;  // ls - 32 of sub-blocks 0..7, 8..15 as int32
  __m256i d;             // 16 words: d of b / 8 (fp16 bits)
};
inline IQ4XSHeadWords IQ4XSHead(const uint8_t* head) {
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(head)));
  const __m256i words = SixBitFieldWords(v);
  constexpr int s0 = SixBitFieldShift(0), s1 = SixBitFieldShift(1), s2 = SixBitFieldShift(2),
                s3 = SixBitFieldShift(3);
  const __m256i counts = _mm256_setr_epi32(s0, s1, s2, s3, s0, s1, s2, s3);
  auto field = [&counts](__m128i w) {
    const __m256i f = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu16_epi32(w), counts),
                                       _mm256_set1_epi32(0x3F));
    return _mm256_sub_epi32(f, _mm256_set1_epi32(32));
  };
  // d0 in words 0..7 (bytes 0, 1 of each 128-bit lane's copy), d1 in 8..15 (bytes 2, 3)
  const __m256i d_index = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                           3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return {field(_mm256_castsi256_si128(words)), field(_mm256_extracti128_si256(words, 1)),
          _mm256_shuffle_epi8(v, d_index)};
}

#if defined(__AVX512BW__)
// The GEMV's weight rows at once (MatmulBlockPanel; 8 measured slower than 4).
constexpr int kLegacyGemvStreams = 4;
struct Vi {
  __m512i v;
};
struct Vf {
  __m512 v;
};
[[gnu::always_inline]] inline Vi LoadI(const void* p) {
  return {_mm512_loadu_si512(p)};
}
[[gnu::always_inline]] inline Vf LoadF(const float* p) {
  return {_mm512_load_ps(p)};
}
[[gnu::always_inline]] inline Vi LowNibbles(Vi a) {
  return {_mm512_and_si512(a.v, _mm512_set1_epi8(0x0F))};
}
[[gnu::always_inline]] inline Vi HighNibbles(Vi a) {
  return {_mm512_and_si512(_mm512_srli_epi16(a.v, 4), _mm512_set1_epi8(0x0F))};
}
// u + 16 in the bytes whose bit is set in the 64-bit mask at p (a fifth bit).
[[gnu::always_inline]] inline Vi AddFifthBits(Vi u, const uint8_t* p) {
  uint64_t bits;
  std::memcpy(&bits, p, 8);
  return {_mm512_mask_add_epi8(u.v, _cvtu64_mask64(bits), u.v, _mm512_set1_epi8(0x10))};
}
// table[u] per byte (u < 16; table: 16 bytes, IQ4NLTable).
[[gnu::always_inline]] inline Vi Lookup(Vi u, __m128i table) {
  return {_mm512_shuffle_epi8(_mm512_broadcast_i32x4(table), u.v)};
}
[[gnu::always_inline]] inline Vi Add(Vi a, Vi b) {
  return {_mm512_add_epi32(a.v, b.v)};
}
[[gnu::always_inline]] inline Vi Times16(Vi a) {
  return {_mm512_slli_epi32(a.v, 4)};
}
// Signed-by-signed 4-product dot steps (Q8_0). With VNNI the weights are biased once (w + 128,
// unsigned) and the sums start at -128 * S (kS8ByBias); without it |w| times x signed by w, whose
// maddubs pairs stay below saturation (2 * 128 * 127).
#if defined(__AVX512VNNI__)
constexpr bool kS8ByBias = true;
[[gnu::always_inline]] inline Vi BiasS8(Vi w) {
  return {_mm512_xor_si512(w.v, _mm512_set1_epi8(static_cast<char>(0x80)))};
}
[[gnu::always_inline]] inline Vi AddDotS8(Vi acc, Vi w, Vi x) {
  return {_mm512_dpbusd_epi32(acc.v, w.v, x.v)};
}
#else
constexpr bool kS8ByBias = false;
[[gnu::always_inline]] inline Vi BiasS8(Vi w) {
  return w;
}
[[gnu::always_inline]] inline Vi AddDotS8(Vi acc, Vi w, Vi x) {
  const __m512i xs =
      _mm512_mask_sub_epi8(x.v, _mm512_movepi8_mask(w.v), _mm512_setzero_si512(), x.v);
  return {DotU8S8x512(acc.v, _mm512_abs_epi8(w.v), xs)};
}
#endif
[[gnu::always_inline]] inline Vi AddDot(Vi acc, Vi u, Vi x) {
  return {DotU8S8x512(acc.v, u.v, x.v)};
}
[[gnu::always_inline]] inline Vf HalfToFloat(const uint8_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
[[gnu::always_inline]] inline Vf IQ4XSScales(const uint8_t* head) {
  const IQ4XSHeadWords h = IQ4XSHead(head);
  const __m512i ls = _mm512_inserti64x4(_mm512_castsi256_si512(h.ls_lo), h.ls_hi, 1);
  return {_mm512_mul_ps(_mm512_cvtph_ps(h.d), _mm512_cvtepi32_ps(ls))};
}
// MXFP4: the 16 exponent bytes at p as 2^(e - 128) = 2^-128 * 2^e by vscalefps, exact (2^-128,
// subnormal, is an exact input and 2^-128 .. 2^127 exact results, with MXCSR's default of no
// DAZ / FTZ); 3 operations where E8M0HalfBits takes 6.
[[gnu::always_inline]] inline Vf E8M0Scales(const uint8_t* p) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {_mm512_scalef_ps(_mm512_set1_ps(0x1p-128f), _mm512_cvtepi32_ps(e))};
}
[[gnu::always_inline]] inline Vi Sub(Vi a, Vi b) {
  return {_mm512_sub_epi32(a.v, b.v)};
}
// NVFP4: the 16 UE4M3 bytes at p as UE4M3Half (quant_blocks.h): the float of exponent e + 119
// and mantissa m << 20, or m 2^-10 where e is 0; 0 for 0x7F.
[[gnu::always_inline]] inline Vf UE4M3Scales(const uint8_t* p) {
  const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i e = _mm512_and_si512(_mm512_srli_epi32(x, 3), _mm512_set1_epi32(0xF));
  const __m512i m = _mm512_and_si512(x, _mm512_set1_epi32(7));
  const __m512i normal = _mm512_or_si512(
      _mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(119)), 23), _mm512_slli_epi32(m, 20));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(0x1p-10f));
  const __m512 v = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()),
                                        _mm512_castsi512_ps(normal), sub);
  return {_mm512_maskz_mov_ps(_mm512_cmpneq_epi32_mask(x, _mm512_set1_epi32(0x7F)), v)};
}
// Q1_0: 2 in the bytes whose bit is set in the 64-bit mask at p, 0 elsewhere.
[[gnu::always_inline]] inline Vi TwosWhereBits(const uint8_t* p) {
  uint64_t bits;
  std::memcpy(&bits, p, 8);
  return {_mm512_maskz_mov_epi8(_cvtu64_mask64(bits), _mm512_set1_epi8(2))};
}
// a / 8 per dword lane (the -8 S of the activations made -S: exact).
[[gnu::always_inline]] inline Vi Div8(Vi a) {
  return {_mm512_srai_epi32(a.v, 3)};
}
// Q1_0: the 4 fp16 d at p, d of block b / 4 in lane b.
[[gnu::always_inline]] inline Vf Q1_0Scales(const uint8_t* p) {
  const __m512 d4 =
      _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  return {
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), d4)};
}
[[gnu::always_inline]] inline Vf Zero() {
  return {_mm512_setzero_ps()};
}
[[gnu::always_inline]] inline Vi ZeroI() {
  return {_mm512_setzero_si512()};
}
[[gnu::always_inline]] inline Vf Fma(Vf a, Vf b, Vf c) {
  return {_mm512_fmadd_ps(a.v, b.v, c.v)};
}
[[gnu::always_inline]] inline Vf Mul(Vf a, Vf b) {
  return {_mm512_mul_ps(a.v, b.v)};
}
// fma(s, float(l), acc) per lane.
[[gnu::always_inline]] inline Vf FmaConverted(Vf s, Vi l, Vf acc) {
  return {_mm512_fmadd_ps(s.v, _mm512_cvtepi32_ps(l.v), acc.v)};
}
// h8[l] = a[l] + a[l + 8]; the rest of the tree on 8 lanes.
inline __m256 Halves(Vf a) {
  return _mm256_add_ps(_mm512_castps512_ps256(a.v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a.v), 1)));
}
#else
constexpr int kLegacyGemvStreams = 1;  // 4 rows' registers in 256-bit halves would spill
struct Vi {
  __m256i lo, hi;
};
struct Vf {
  __m256 lo, hi;
};
[[gnu::always_inline]] inline Vi LoadI(const void* p) {
  const auto* q = static_cast<const uint8_t*>(p);
  return {Load32(q), Load32(q + 32)};
}
[[gnu::always_inline]] inline Vf LoadF(const float* p) {
  return {_mm256_load_ps(p), _mm256_load_ps(p + 8)};
}
[[gnu::always_inline]] inline Vi LowNibbles(Vi a) {
  const __m256i m = _mm256_set1_epi8(0x0F);
  return {_mm256_and_si256(a.lo, m), _mm256_and_si256(a.hi, m)};
}
[[gnu::always_inline]] inline Vi HighNibbles(Vi a) {
  const __m256i m = _mm256_set1_epi8(0x0F);
  return {_mm256_and_si256(_mm256_srli_epi16(a.lo, 4), m),
          _mm256_and_si256(_mm256_srli_epi16(a.hi, 4), m)};
}
[[gnu::always_inline]] inline Vi AddFifthBits(Vi u, const uint8_t* p) {
  return {_mm256_or_si256(u.lo, FifthBits(p)), _mm256_or_si256(u.hi, FifthBits(p + 4))};
}
[[gnu::always_inline]] inline Vi Lookup(Vi u, __m128i table) {
  const __m256i t = _mm256_broadcastsi128_si256(table);
  return {_mm256_shuffle_epi8(t, u.lo), _mm256_shuffle_epi8(t, u.hi)};
}
[[gnu::always_inline]] inline Vi Add(Vi a, Vi b) {
  return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)};
}
[[gnu::always_inline]] inline Vi Times16(Vi a) {
  return {_mm256_slli_epi32(a.lo, 4), _mm256_slli_epi32(a.hi, 4)};
}
constexpr bool kS8ByBias = false;  // see the AVX-512 helpers
[[gnu::always_inline]] inline Vi BiasS8(Vi w) {
  return w;
}
[[gnu::always_inline]] inline Vi AddDotS8(Vi acc, Vi w, Vi x) {
  return {_mm256_add_epi32(acc.lo, DotU8S8(_mm256_abs_epi8(w.lo), _mm256_sign_epi8(x.lo, w.lo))),
          _mm256_add_epi32(acc.hi, DotU8S8(_mm256_abs_epi8(w.hi), _mm256_sign_epi8(x.hi, w.hi)))};
}
[[gnu::always_inline]] inline Vi AddDot(Vi acc, Vi u, Vi x) {
  return {_mm256_add_epi32(acc.lo, DotU8S8(u.lo, x.lo)),
          _mm256_add_epi32(acc.hi, DotU8S8(u.hi, x.hi))};
}
[[gnu::always_inline]] inline Vf HalfToFloat(const uint8_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
}
[[gnu::always_inline]] inline Vf IQ4XSScales(const uint8_t* head) {
  const IQ4XSHeadWords h = IQ4XSHead(head);
  return {_mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h.d)), _mm256_cvtepi32_ps(h.ls_lo)),
          _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h.d, 1)),
                        _mm256_cvtepi32_ps(h.ls_hi))};
}
[[gnu::always_inline]] inline Vf E8M0Scales(const uint8_t* p) {
  const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {_mm256_castsi256_ps(E8M0HalfBits(_mm256_cvtepu8_epi32(e))),
          _mm256_castsi256_ps(E8M0HalfBits(_mm256_cvtepu8_epi32(_mm_srli_si128(e, 8))))};
}
[[gnu::always_inline]] inline Vi Sub(Vi a, Vi b) {
  return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)};
}
// 8 UE4M3 bytes (dword lanes x) as UE4M3Half, as the AVX-512 UE4M3Scales.
inline __m256 UE4M3Half8(__m256i x) {
  const __m256i e = _mm256_and_si256(_mm256_srli_epi32(x, 3), _mm256_set1_epi32(0xF));
  const __m256i m = _mm256_and_si256(x, _mm256_set1_epi32(7));
  const __m256i normal = _mm256_or_si256(
      _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(119)), 23), _mm256_slli_epi32(m, 20));
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(0x1p-10f));
  const __m256 v =
      _mm256_blendv_ps(_mm256_castsi256_ps(normal), sub,
                       _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256())));
  return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, _mm256_set1_epi32(0x7F))), v);
}
[[gnu::always_inline]] inline Vf UE4M3Scales(const uint8_t* p) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {UE4M3Half8(_mm256_cvtepu8_epi32(x)),
          UE4M3Half8(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8)))};
}
// 2 in byte i where bit i of `bits` is set: each byte of bits to 8 bytes, one bit each.
inline __m256i TwosWhereBits32(uint32_t bits) {
  const __m256i index = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                         2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_and_si256(
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), index), select);
  return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, select), _mm256_set1_epi8(2));
}
[[gnu::always_inline]] inline Vi TwosWhereBits(const uint8_t* p) {
  uint32_t lo, hi;
  std::memcpy(&lo, p, 4);
  std::memcpy(&hi, p + 4, 4);
  return {TwosWhereBits32(lo), TwosWhereBits32(hi)};
}
[[gnu::always_inline]] inline Vi Div8(Vi a) {
  return {_mm256_srai_epi32(a.lo, 3), _mm256_srai_epi32(a.hi, 3)};
}
[[gnu::always_inline]] inline Vf Q1_0Scales(const uint8_t* p) {
  const __m256 d4 =
      _mm256_castps128_ps256(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  return {_mm256_permutevar8x32_ps(d4, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
          _mm256_permutevar8x32_ps(d4, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3))};
}
[[gnu::always_inline]] inline Vf Zero() {
  return {_mm256_setzero_ps(), _mm256_setzero_ps()};
}
[[gnu::always_inline]] inline Vi ZeroI() {
  return {_mm256_setzero_si256(), _mm256_setzero_si256()};
}
[[gnu::always_inline]] inline Vf Fma(Vf a, Vf b, Vf c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
[[gnu::always_inline]] inline Vf Mul(Vf a, Vf b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
[[gnu::always_inline]] inline Vf FmaConverted(Vf s, Vi l, Vf acc) {
  return {_mm256_fmadd_ps(s.lo, _mm256_cvtepi32_ps(l.lo), acc.lo),
          _mm256_fmadd_ps(s.hi, _mm256_cvtepi32_ps(l.hi), acc.hi)};
}
inline __m256 Halves(Vf a) {
  return _mm256_add_ps(a.lo, a.hi);
}
#endif

// y = the tree of quant_blocks.h over the 16 chains.
inline float Reduce16(Vf a) {
  const __m256 h8 = Halves(a);
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

// F: Q4_0F ... Q8_0F (the format's block, whether it has a min, fifth bits, signed bytes).
template <class F, int kMRv, int kNRv>
struct PackedLegacyMicro {
  static constexpr int kMR = kMRv;
  static constexpr int kNR = kNRv;
  static constexpr DType kType = F::kType;
  static constexpr int64_t kGroupBytes = F::kGroupBytes;
  static constexpr int kGemvStreams = kLegacyGemvStreams;
  // Offsets in a whole packed group (legacy_packed.h): runs, fifth-bit masks, scales, mins.
  static constexpr int kMasks = F::kBits ? 0 : 64 * F::kRuns;
  static constexpr int kScales = kMasks + (F::kFifth || F::kBits ? 64 : 0);
  static constexpr int kMins = kScales + 32;
  // For MatmulBlockPanel (matmul_internal.h): x rows of PackedXGroups(nb) groups (MakePackedX),
  // weight rows of nb * BlockBytes bytes.
  static constexpr int kBlock = kQKLegacy;
  using XBlock = PackedXGroup;
  using WBlock = uint8_t;
  static constexpr int64_t XStride(int nb) { return PackedXGroups(nb); }
  static constexpr int64_t WStride(int nb) {
    return static_cast<int64_t>(nb) * kGroupBytes / kPackGroupBlocks;
  }

  // acc[i][j] += group g of activation rows x[i] times weight rows w[j] (whole-group layout).
  template <int MR, int NR>
  [[gnu::always_inline]] static inline void Group(Vf (&acc)[MR][NR],
                                                  const PackedXGroup* const (&x)[MR],
                                                  const uint8_t* const (&w)[NR]) {
    Vi l[MR][NR];
    [[maybe_unused]] Vi
        l_hi[MR][NR];  // NVFP4: the sums of the high nibbles (a sub-block's second half)
    for (int i = 0; i < MR; ++i) {
      Vi start = ZeroI();
      if constexpr (F::kNV) {
        Vi hi_start = ZeroI();
        if constexpr (kS8ByBias) {  // -128 S of each half
          const Vi half = LoadI(x[i]->half_start);
          start = Times16(half);
          hi_start = Times16(Sub(LoadI(x[i]->start), half));
        }
        for (int j = 0; j < NR; ++j) l_hi[i][j] = hi_start;
      } else if constexpr (F::kBits) {
        start = Div8(LoadI(x[i]->start));  // -S
      } else if constexpr (F::kInt8 || F::kLut) {
        if constexpr (kS8ByBias) start = Times16(LoadI(x[i]->start));  // -128 S
      } else if constexpr (!F::kMin) {
        start = LoadI(x[i]->start);                          // -8 S
        if constexpr (F::kFifth) start = Add(start, start);  // -16 S
      }
      for (int j = 0; j < NR; ++j) l[i][j] = start;
    }
    if constexpr (F::kInt8) {
      for (int r = 0; r < 8; ++r) {
        Vi q[NR];
        for (int j = 0; j < NR; ++j) q[j] = BiasS8(LoadI(w[j] + 64 * r));
        for (int i = 0; i < MR; ++i) {
          const Vi xr = LoadI(x[i]->q[r]);
          for (int j = 0; j < NR; ++j) l[i][j] = AddDotS8(l[i][j], q[j], xr);
        }
      }
    }
    if constexpr (F::kBits) {  // u = 2 where the bit is set: sum of (u - 1) x = -S + sum u x
      // A GEMV tile has one sum per lane: its 8 dot steps in two chains (the sum of integers is
      // the same in any order), or they wait on each other's latency (kernel_bench gemv in cache,
      // 2 threads: 17.8 -> 19.5-20.7 GB/s).
      constexpr int kChains = MR * NR <= 2 ? 2 : 1;
      Vi odd[MR][NR];
      for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < NR; ++j) odd[i][j] = ZeroI();
      }
      for (int r = 0; r < 8; ++r) {
        Vi u[NR];
        for (int j = 0; j < NR; ++j) u[j] = TwosWhereBits(w[j] + 8 * r);
        for (int i = 0; i < MR; ++i) {
          const Vi xr = LoadI(x[i]->q[r]);
          for (int j = 0; j < NR; ++j) {
            Vi& sum = kChains == 2 && r % 2 == 1 ? odd[i][j] : l[i][j];
            sum = AddDot(sum, u[j], xr);
          }
        }
      }
      if constexpr (kChains == 2) {
        for (int i = 0; i < MR; ++i) {
          for (int j = 0; j < NR; ++j) l[i][j] = Add(l[i][j], odd[i][j]);
        }
      }
    }
    for (int r = 0; r < (F::kInt8 || F::kBits ? 0 : 4); ++r) {
      Vi lo[NR], hi[NR];
      for (int j = 0; j < NR; ++j) {
        const Vi v = LoadI(w[j] + 64 * r);
        lo[j] = LowNibbles(v);
        hi[j] = HighNibbles(v);
        if constexpr (F::kFifth) {
          lo[j] = AddFifthBits(lo[j], w[j] + kMasks + 8 * (2 * r));
          hi[j] = AddFifthBits(hi[j], w[j] + kMasks + 8 * (2 * r + 1));
        }
      }
      if constexpr (F::kLut) {  // the table's signed values (biased where AddDotS8 wants)
        const __m128i table = LutTable<F>(kS8ByBias);
        for (int j = 0; j < NR; ++j) {
          lo[j] = Lookup(lo[j], table);
          hi[j] = Lookup(hi[j], table);
        }
      }
      for (int i = 0; i < MR; ++i) {
        const Vi xl = LoadI(x[i]->q[r]), xh = LoadI(x[i]->q[r + 4]);
        for (int j = 0; j < NR; ++j) {
          if constexpr (F::kNV) {
            l[i][j] = AddDotS8(l[i][j], lo[j], xl);
            l_hi[i][j] = AddDotS8(l_hi[i][j], hi[j], xh);
          } else if constexpr (F::kLut) {
            l[i][j] = AddDotS8(AddDotS8(l[i][j], lo[j], xl), hi[j], xh);
          } else {
            l[i][j] = AddDot(AddDot(l[i][j], lo[j], xl), hi[j], xh);
          }
        }
      }
    }
    if constexpr (F::kNV) {  // the two halves' products in turn, as the scalar reference
      for (int j = 0; j < NR; ++j) {
        const Vf d_lo = UE4M3Scales(w[j] + kScales), d_hi = UE4M3Scales(w[j] + kScales + 16);
        for (int i = 0; i < MR; ++i) {
          const Vf dx = LoadF(x[i]->d);
          acc[i][j] = FmaConverted(Mul(d_lo, dx), l[i][j], acc[i][j]);
          acc[i][j] = FmaConverted(Mul(d_hi, dx), l_hi[i][j], acc[i][j]);
        }
      }
      return;
    }
    for (int j = 0; j < NR; ++j) {
      Vf dw;
      if constexpr (F::kSuper) {
        dw = IQ4XSScales(w[j] + kScales);
      } else if constexpr (F::kBits) {
        dw = Q1_0Scales(w[j] + kScales);
      } else if constexpr (F::kE8M0) {
        dw = E8M0Scales(w[j] + kScales);
      } else {
        dw = HalfToFloat(w[j] + kScales);
      }
      for (int i = 0; i < MR; ++i) {
        const Vf dx = LoadF(x[i]->d);
        acc[i][j] = FmaConverted(Mul(dw, dx), l[i][j], acc[i][j]);
        if constexpr (F::kMin) {
          acc[i][j] = Fma(Mul(HalfToFloat(w[j] + kMins), dx), LoadF(x[i]->s), acc[i][j]);
        }
      }
    }
  }

  // MR activation rows (ldx groups apart) times NR weight rows (ldw bytes apart), nb blocks.
  template <int MR, int NR>
  static void Tile(const PackedXGroup* x, int64_t ldx, const uint8_t* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    Vf acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = Zero();
    }
    const int whole = nb / kPackGroupBlocks;
    const PackedXGroup* xg[MR];
    const uint8_t* wg[NR];
    for (int g = 0; g < whole; ++g) {
      for (int i = 0; i < MR; ++i) xg[i] = x + i * ldx + g;
      for (int j = 0; j < NR; ++j) {
        wg[j] = w + j * ldw + g * kGroupBytes;
        // (tiles of 2+ rows compute longer per byte: their own distance, packed_legacy_tiles)
        PrefetchAhead(wg[j], kGroupBytes,
                      MR > 1 ? ::llm::kernels::internal::g_prefetch.packed_legacy_tiles
                             : ::llm::kernels::internal::g_prefetch.packed_legacy,
                      ::llm::kernels::internal::g_prefetch.l2_ahead);
      }
      Group<MR, NR>(acc, xg, wg);
    }
    if (const int t = nb - whole * kPackGroupBlocks; t > 0) {
      alignas(64) uint8_t wide[NR][kPackGroupMaxBytes];
      for (int i = 0; i < MR; ++i) xg[i] = x + i * ldx + whole;
      for (int j = 0; j < NR; ++j) {
        ::llm::kernels::internal::WidenLegacyGroup(kType, w + j * ldw + whole * kGroupBytes, t,
                                                   wide[j]);
        wg[j] = wide[j];
      }
      Group<MR, NR>(acc, xg, wg);
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = Reduce16(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

// Weights in ggml's layout on this set: each panel's rows packed on the fly (a thread's buffer),
// then the packed panel. The CPU backend packs its weights once at load instead
// (PrepareMatmulWeight); this path serves weights that were not (tests, LLM_PACK_WEIGHTS=0).
template <class Micro>
void MatmulLegacyByPacking(const void* xv, int m, int k, const void* wv, int n0, int n1,
                           const float* bias, float* y, int ldy) {
  const size_t row = static_cast<size_t>(Micro::WStride(k / kQKLegacy));
  constexpr int kRows = 16;
  // A plain array, not a std::vector: no inline library function may be instantiated in an ISA
  // translation unit (matmul_internal.h). One per thread, kept for the thread's life.
  static thread_local uint8_t* packed = nullptr;
  static thread_local size_t capacity = 0;
  if (capacity < row * kRows) {
    delete[] packed;
    packed = new uint8_t[row * kRows];
    capacity = row * kRows;
  }
  for (int j0 = n0; j0 < n1; j0 += kRows) {
    const int j1 = n1 < j0 + kRows ? n1 : j0 + kRows;
    ::llm::kernels::internal::PackLegacyRows(
        Micro::kType, static_cast<const uint8_t*>(wv) + row * j0, j1 - j0, k, packed);
    MatmulBlockPanel<Micro>(xv, m, k, packed, 0, j1 - j0, bias != nullptr ? bias + j0 : nullptr,
                            y + j0, ldy);
  }
}

}  // namespace qx
