// Exact int8 dot products on 256-bit vectors for the x86 block-format micro-kernels, included
// (through matmul_quant_x86.h) into each ISA translation unit's anonymous
// namespace. With AVX-512 VNNI (the TU compiled with -mavx512vnni) a product is one vpdpbusd /
// vpdpwssd; otherwise maddubs then madd. Every caller keeps maddubs' int16 pair sums below
// saturation (|pair| <= 2 * 128 * 127), and int32 lanes cannot overflow, so both paths give the
// same integers and every ISA the same bits.
#pragma once

#include <immintrin.h>

// Lane g (of 8 int32) = sum of u[4g + t] * s[4g + t], t = 0..3 (u unsigned, s signed bytes).
inline __m256i DotU8S8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// acc + lane g of (u * s pair sums) weighted by the int16 scales: lane g adds
// scales[2g] * (u[4g] s[4g] + u[4g+1] s[4g+1]) + scales[2g+1] * (u[4g+2] s[4g+2] + ...).
inline __m256i AddScaledDotU8S8(__m256i acc, __m256i u, __m256i s, __m256i scales) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), scales);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales));
#endif
}

#if defined(__AVX512BW__)
// acc + DotU8S8 on 512-bit vectors (16 int32 lanes).
inline __m512i DotU8S8x512(__m512i acc, __m512i u, __m512i s) {
#if defined(__AVX512VNNI__)
  return _mm512_dpbusd_epi32(acc, u, s);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

// AddScaledDotU8S8 on 512-bit vectors (the AVX-512 GEMV kernels, matmul_kquant_gemv512.h).
inline __m512i AddScaledDotU8S8x512(__m512i acc, __m512i u, __m512i s, __m512i scales) {
#if defined(__AVX512VNNI__)
  return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, s), scales);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), scales));
#endif
}
#endif
