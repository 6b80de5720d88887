// The Q8_0 activation quantizer (kernels/cpu/q8_0.h), compiled without ISA flags: the same code
// feeds every ISA's Q8_0 matmul.
#include "kernels/cpu/q8_0.h"

#include <emmintrin.h>  // SSE2: part of every x86-64 CPU, so no ISA flag is needed

#include <cmath>

namespace llm::kernels::internal {

#if defined(__SSE2__)

// Four lanes at a time with the scalar version's exact results: max is exact and ignores NaN as
// std::fmax does (maxps returns its second operand, the running maximum, when the first is NaN),
// NaN products become 0 before the clamp, and cvtps2dq rounds half to even (the default MXCSR
// mode, as nearbyint). The scalar code called fmaxf and nearbyintf per element (7% of a Q8_0
// prefill).
void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  for (int b = 0; b < k / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    __m128 m = _mm_setzero_ps();
    for (int i = 0; i < kQ8BlockSize; i += 4) {
      m = _mm_max_ps(_mm_and_ps(_mm_loadu_ps(xb + i), abs_mask), m);
    }
    m = _mm_max_ps(_mm_movehl_ps(m, m), m);
    m = _mm_max_ps(_mm_shuffle_ps(m, m, 1), m);
    const float amax = _mm_cvtss_f32(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out[b].d = F32ToF16(d);
    const __m128 idv = _mm_set1_ps(id), lo = _mm_set1_ps(-127.0f), hi = _mm_set1_ps(127.0f);
    __m128i q32[kQ8BlockSize / 4];
    for (int i = 0; i < kQ8BlockSize / 4; ++i) {
      __m128 v = _mm_mul_ps(_mm_loadu_ps(xb + 4 * i), idv);
      v = _mm_and_ps(v, _mm_cmpord_ps(v, v));  // NaN -> 0
      q32[i] = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(v, lo), hi));
    }
    for (int i = 0; i < kQ8BlockSize / 16; ++i) {
      const __m128i q16a = _mm_packs_epi32(q32[4 * i], q32[4 * i + 1]);
      const __m128i q16b = _mm_packs_epi32(q32[4 * i + 2], q32[4 * i + 3]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16 * i), _mm_packs_epi16(q16a, q16b));
    }
  }
}

#else

void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  for (int b = 0; b < k / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kQ8BlockSize; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out[b].d = F32ToF16(d);
    for (int i = 0; i < kQ8BlockSize; ++i) {
      // nearbyint rounds half to even in the default rounding mode (_MM_ROUND_NEAREST). The
      // clamp only matters for non-finite input (inf * 0, NaN), which would otherwise be an
      // out-of-range conversion.
      float v = xb[i] * id;
      v = v >= -127.0f ? (v <= 127.0f ? v : 127.0f) : (v < -127.0f ? -127.0f : 0.0f);
      out[b].qs[i] = static_cast<int8_t>(std::nearbyint(v));
    }
  }
}

#endif

}  // namespace llm::kernels::internal
