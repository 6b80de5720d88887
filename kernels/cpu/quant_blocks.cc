// The decoded forms of the block formats (quant_blocks.h), ggml's dequantizers and the Q8_K
// activation quantizer. Compiled without ISA flags.
#include <cmath>
#include <cstring>

#include "kernels/cpu/q8_0.h"
#include "kernels/cpu/quant_blocks.h"

#include "kernels/cpu/iquant_blocks.h"

#if defined(__SSE2__)
#include <emmintrin.h>  // SSE2: part of every x86-64 CPU, so no ISA flag is needed
#endif

namespace llm::kernels::internal {
namespace {

uint32_t Bits32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Low nibbles of qs[0..15] are elements 0..15, high nibbles 16..31; bit e of qh is the fifth bit.
void LegacyQuants(const uint8_t* qs, const uint8_t* qh, uint8_t u[32]) {
  const uint32_t h = qh != nullptr ? Bits32(qh) : 0;
  for (int i = 0; i < 16; ++i) {
    u[i] = static_cast<uint8_t>((qs[i] & 0xF) | (((h >> i) & 1) << 4));
    u[i + 16] = static_cast<uint8_t>((qs[i] >> 4) | (((h >> (i + 16)) & 1) << 4));
  }
}

// IQ4_NL's (or MXFP4's) 16 bytes of nibbles (Q4_0's order) as their table values + 128.
void IQ4Quants(const uint8_t* qs, uint8_t u[32], const int8_t* values = kIQ4NLValues) {
  for (int i = 0; i < 16; ++i) {
    u[i] = static_cast<uint8_t>(values[qs[i] & 0xF] + 128);
    u[i + 16] = static_cast<uint8_t>(values[qs[i] >> 4] + 128);
  }
}

// Element 32h + l of the formats that store 2-bit fields of 32-byte rows: (q[32n + l] >> 2j) & 3
// with n = h / 4, j = h % 4 (Q2_K, Q3_K).
int TwoBit(const uint8_t* qs, int e) {
  const int h = e / 32, l = e % 32;
  return (qs[32 * (h / 4) + l] >> (2 * (h % 4))) & 3;
}

}  // namespace

void DecodeLegacy(DType t, const void* block, DecodedLegacy* out) {
  switch (t) {
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(block);
      *out = DecodedLegacy{F16ToF32(b->d), 0.0f, 8, false, {}};
      LegacyQuants(b->qs, nullptr, out->u);
      break;
    }
    case DType::kQ4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(block);
      *out = DecodedLegacy{F16ToF32(b->d), F16ToF32(b->m), 0, true, {}};
      LegacyQuants(b->qs, nullptr, out->u);
      break;
    }
    case DType::kQ5_0: {
      const auto* b = static_cast<const BlockQ5_0*>(block);
      *out = DecodedLegacy{F16ToF32(b->d), 0.0f, 16, false, {}};
      LegacyQuants(b->qs, b->qh, out->u);
      break;
    }
    case DType::kQ5_1: {
      const auto* b = static_cast<const BlockQ5_1*>(block);
      *out = DecodedLegacy{F16ToF32(b->d), F16ToF32(b->m), 0, true, {}};
      LegacyQuants(b->qs, b->qh, out->u);
      break;
    }
    case DType::kQ8_0: {  // u = q + 128, so u - 128 = q
      const auto* b = static_cast<const BlockQ8_0*>(block);
      *out = DecodedLegacy{F16ToF32(b->d), 0.0f, 128, false, {}};
      for (int e = 0; e < kQKLegacy; ++e) out->u[e] = static_cast<uint8_t>(b->qs[e] + 128);
      break;
    }
    case DType::kIQ4_NL: {  // u = value + 128, as Q8_0's
      const auto* b = static_cast<const BlockIQ4_NL*>(block);
      *out = DecodedLegacy{F16ToF32(b->d), 0.0f, 128, false, {}};
      IQ4Quants(b->qs, out->u);
      break;
    }
    case DType::kMXFP4: {  // likewise, d = 2^(e - 128)
      const auto* b = static_cast<const BlockMXFP4*>(block);
      *out = DecodedLegacy{E8M0Half(b->e), 0.0f, 128, false, {}};
      IQ4Quants(b->qs, out->u, kMXFP4Values);
      break;
    }
    default:
      *out = DecodedLegacy{};
      break;
  }
}

void DecodeIQ4XSSub(const BlockIQ4_XS& b, int s, DecodedLegacy* out) {
  *out = DecodedLegacy{F16ToF32(b.d) * static_cast<float>(IQ4XSScale(b, s)), 0.0f, 128, false, {}};
  IQ4Quants(b.qs + 16 * s, out->u);
}

void DecodeQ1_0Sub(const BlockQ1_0& b, int s, DecodedLegacy* out) {
  *out = DecodedLegacy{F16ToF32(b.d), 0.0f, 1, false, {}};
  for (int e = 0; e < kQKLegacy; ++e) {
    const int j = kQKLegacy * s + e;
    out->u[e] = static_cast<uint8_t>(2 * ((b.qs[j / 8] >> (j % 8)) & 1));
  }
}

void DecodeNVFP4Sub(const BlockNVFP4& b, int s, DecodedNVFP4* out) {
  for (int h = 0; h < 2; ++h) {
    const int sub = 2 * s + h;
    out->d[h] = UE4M3Half(b.d[sub]);
    for (int j = 0; j < 8; ++j) {
      const uint8_t q = b.qs[8 * sub + j];
      out->v[16 * h + j] = kMXFP4Values[q & 0xF];
      out->v[16 * h + j + 8] = kMXFP4Values[q >> 4];
    }
  }
}

void DecodeK(DType t, const void* block, DecodedK* out) {
  switch (t) {
    case DType::kQ2_K: {
      const auto* b = static_cast<const BlockQ2_K*>(block);
      out->d = F16ToF32(b->d);
      out->dmin = F16ToF32(b->dmin);
      ScalesQ2K(b->scales, out->sc, out->mn);
      for (int e = 0; e < kQK_K; ++e) out->u[e] = static_cast<uint8_t>(TwoBit(b->qs, e));
      break;
    }
    case DType::kQ3_K: {
      const auto* b = static_cast<const BlockQ3_K*>(block);
      out->d = out->dmin = F16ToF32(b->d);
      ScalesQ3K(b->scales, out->sc, out->mn);
      for (int e = 0; e < kQK_K; ++e) {
        const int high = (b->hmask[e % 32] >> (e / 32)) & 1;
        out->u[e] = static_cast<uint8_t>(TwoBit(b->qs, e) | (high << 2));
      }
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool q5 = t == DType::kQ5_K;
      const auto* b4 = static_cast<const BlockQ4_K*>(block);
      const auto* b5 = static_cast<const BlockQ5_K*>(block);
      const uint8_t* qs = q5 ? b5->qs : b4->qs;
      out->d = F16ToF32(b4->d);  // d, dmin, scales sit at the same offsets in both
      out->dmin = F16ToF32(b4->dmin);
      ScalesQ4K(b4->scales, out->sc, out->mn);
      for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 32, l = e % 32;
        int u = (qs[32 * (h / 2) + l] >> (4 * (h % 2))) & 0xF;
        if (q5) u |= ((b5->qh[l] >> h) & 1) << 4;
        out->u[e] = static_cast<uint8_t>(u);
      }
      break;
    }
    case DType::kQ6_K: {
      const auto* b = static_cast<const BlockQ6_K*>(block);
      out->d = out->dmin = F16ToF32(b->d);
      ScalesQ6K(b->scales, out->sc, out->mn);
      for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 32, l = e % 32, n = h / 4, k = h % 4;
        const int lo = (b->ql[64 * n + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0xF;
        const int hi = (b->qh[32 * n + l] >> (2 * k)) & 3;
        out->u[e] = static_cast<uint8_t>(lo | (hi << 4));
      }
      break;
    }
    default:
      break;
  }
}

// ggml's dequantize_row_* formulas (the float operations in ggml's order).
void DequantizeRow(DType t, const void* src, float* dst, int64_t k) {
  const auto* base = static_cast<const uint8_t*>(src);
  const int64_t nb = k / BlockSize(t);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = base + i * BlockBytes(t);
    if (t == DType::kQ8_0) {
      uint16_t d;
      std::memcpy(&d, blk, 2);
      for (int e = 0; e < 32; ++e) {
        dst[32 * i + e] = static_cast<float>(static_cast<int8_t>(blk[2 + e])) * F16ToF32(d);
      }
    } else if (DecodesAsIQ(t)) {
      DequantizeIQ(t, blk, dst + kQK_K * i);
    } else if (t == DType::kIQ4_XS) {  // ggml: dl = d * (ls - 32), y = dl * value
      for (int s = 0; s < 8; ++s) {
        DecodedLegacy w;
        DecodeIQ4XSSub(*reinterpret_cast<const BlockIQ4_XS*>(blk), s, &w);
        for (int e = 0; e < kQKLegacy; ++e) {
          dst[kQK_K * i + kQKLegacy * s + e] = static_cast<float>(w.u[e] - w.offset) * w.d;
        }
      }
    } else if (t == DType::kNVFP4) {  // ggml: y = value * d per 16 weights
      for (int s = 0; s < 2; ++s) {
        DecodedNVFP4 w;
        DecodeNVFP4Sub(*reinterpret_cast<const BlockNVFP4*>(blk), s, &w);
        for (int e = 0; e < kQKLegacy; ++e) {
          dst[64 * i + kQKLegacy * s + e] = static_cast<float>(w.v[e]) * w.d[e / 16];
        }
      }
    } else if (t == DType::kQ1_0) {  // ggml: bit ? d : -d
      const auto& b = *reinterpret_cast<const BlockQ1_0*>(blk);
      const float d = F16ToF32(b.d);
      for (int j = 0; j < 128; ++j) dst[128 * i + j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : -d;
    } else if (!IsKQuant(t)) {
      DecodedLegacy w;
      DecodeLegacy(t, blk, &w);
      for (int e = 0; e < kQKLegacy; ++e) {
        float* y = dst + kQKLegacy * i + e;
        *y = w.has_min ? static_cast<float>(w.u[e]) * w.d + w.m
                       : static_cast<float>(w.u[e] - w.offset) * w.d;
      }
    } else {
      DecodedK w;
      DecodeK(t, blk, &w);
      float* y = dst + kQK_K * i;
      for (int e = 0; e < kQK_K; ++e) {
        const int g = e / 16;
        switch (t) {
          case DType::kQ3_K:  // dl * (q - 4), dl = d * (scale - 32)
          case DType::kQ6_K:  // d * scale * (q - 32)
            y[e] = w.d * static_cast<float>(w.sc[g]) *
                   static_cast<float>(w.u[e] - (t == DType::kQ3_K ? 4 : 32));
            break;
          default:  // Q2_K, Q4_K, Q5_K: (d * scale) * q - dmin * min
            y[e] = w.d * static_cast<float>(w.sc[g]) * static_cast<float>(w.u[e]) -
                   w.dmin * static_cast<float>(w.mn[g]);
            break;
        }
      }
    }
  }
}

void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out) {
  for (int b = 0; b < k / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    BlockQ8_K& y = out[b];
    float amax = 0.0f, max = 0.0f;
#if defined(__SSE2__)
    // ggml's scan (the scalar loop below) keeps the first element of the largest magnitude,
    // skipping NaN. The same here in two passes: the largest magnitude (maxps returns its second
    // operand, the running maximum, when the first is NaN; max is exact), then the first element
    // that has it. The scalar scan, a compare and branch per element on one chain, was 4% of a
    // Q4_K_M prefill profile.
    {
      const __m128 sign = _mm_set1_ps(-0.0f);
      __m128 m[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
      for (int e = 0; e < kQK_K; e += 16) {
        for (int i = 0; i < 4; ++i) {
          m[i] = _mm_max_ps(_mm_andnot_ps(sign, _mm_loadu_ps(xb + e + 4 * i)), m[i]);
        }
      }
      __m128 v = _mm_max_ps(_mm_max_ps(m[0], m[1]), _mm_max_ps(m[2], m[3]));
      v = _mm_max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
      v = _mm_max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
      amax = _mm_cvtss_f32(v);
      if (amax > 0.0f) {
        for (int e = 0; e < kQK_K; e += 4) {
          const int hit = _mm_movemask_ps(
              _mm_cmpeq_ps(_mm_andnot_ps(sign, _mm_loadu_ps(xb + e)), _mm_set1_ps(amax)));
          if (hit != 0) {
            max = xb[e + __builtin_ctz(static_cast<unsigned>(hit))];
            break;
          }
        }
      }
    }
#else
    for (int e = 0; e < kQK_K; ++e) {
      const float ax = std::fabs(xb[e]);
      if (ax > amax) {
        amax = ax;
        max = xb[e];
      }
    }
#endif
    if (!(amax > 0.0f) || !std::isfinite(amax)) {  // zeros (and non-finite rows) give zeros
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float iscale = -127.0f / max;
#if defined(__SSE2__)
    // Four lanes at a time, exactly the scalar loop below: cvtps2dq rounds half to even (the
    // default MXCSR mode, as nearbyint) and |iscale * x| <= 127 (+ rounding), so the saturating
    // packs are the clamp; NaN elements become 0 first. The scalar loop was 2% of a Q4_K decode.
    const __m128 is = _mm_set1_ps(iscale);
    for (int e = 0; e < kQK_K; e += 16) {
      __m128i q32[4];
      for (int i = 0; i < 4; ++i) {
        __m128 v = _mm_mul_ps(_mm_loadu_ps(xb + e + 4 * i), is);
        v = _mm_and_ps(v, _mm_cmpord_ps(v, v));
        q32[i] = _mm_cvtps_epi32(v);
      }
      const __m128i q8 =
          _mm_packs_epi16(_mm_packs_epi32(q32[0], q32[1]), _mm_packs_epi32(q32[2], q32[3]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs + e), q8);
      // Sum of the 16 int8: sign-extend to int16 pairs, madd with ones, fold.
      const __m128i lo = _mm_srai_epi16(_mm_unpacklo_epi8(q8, q8), 8);
      const __m128i hi = _mm_srai_epi16(_mm_unpackhi_epi8(q8, q8), 8);
      __m128i s32 = _mm_madd_epi16(_mm_add_epi16(lo, hi), _mm_set1_epi16(1));
      s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, _MM_SHUFFLE(1, 0, 3, 2)));
      s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, _MM_SHUFFLE(2, 3, 0, 1)));
      y.bsums[e / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(s32));
    }
#else
    for (int e = 0; e < kQK_K; ++e) {
      // nearbyint rounds half to even, as ggml's nearest_int; |iscale * x| <= 127.
      const float v = std::nearbyint(iscale * xb[e]);
      y.qs[e] = static_cast<int8_t>(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
    }
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int e = 0; e < 16; ++e) s += y.qs[16 * g + e];
      y.bsums[g] = static_cast<int16_t>(s);
    }
#endif
    y.d = 1.0f / iscale;
  }
}

}  // namespace llm::kernels::internal
