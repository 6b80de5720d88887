// Float -> block format quantizers: llama.cpp's reference algorithms (ggml-quants.c's
// quantize_row_*_ref without an importance matrix), written again from their description:
// the legacy formats scale by the block's extreme value; the K-quants search each sub-block's
// scale (and min) for the least weighted squared error (make_qkx2_quants for Q2_K/Q4_K/Q5_K,
// make_qx_quants for Q6_K, make_q3_quants for Q3_K), then quantize the sub-block scales with a
// super-block scale and requantize the weights with the rounded scales.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cpu/q8_0.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: round half to even (for |v| < 2^22; larger values are clamped first).
int NearestInt(float v) {
  v = v > 4194303.0f ? 4194303.0f : v < -4194303.0f ? -4194303.0f : v;
  if (v != v) return 0;  // NaN
  float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}
// (int)v truncated toward zero, clamped to [lo, hi] (ggml's `(int8_t)(x + 8.5f)` then MIN).
int TruncClamp(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}
int Clamp(int v, int lo, int hi) {
  return std::max(lo, std::min(hi, v));
}

// The element with the largest magnitude (its sign kept), and that magnitude.
float SignedMax(const float* x, int n, float* amax_out) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  *amax_out = amax;
  return max;
}

// Legacy formats: d = max / -8 (-16) or (max - min) / 15 (31) with the min stored.
void QuantizeLegacy(DType t, const float* x, uint8_t* out) {
  const bool q5 = t == DType::kQ5_0 || t == DType::kQ5_1;
  const bool with_min = t == DType::kQ4_1 || t == DType::kQ5_1;
  const int top = q5 ? 31 : 15;
  float d, min = 0.0f;
  if (with_min) {
    float mx = -FLT_MAX;
    min = FLT_MAX;
    for (int i = 0; i < 32; ++i) {
      min = std::min(min, x[i]);
      mx = std::max(mx, x[i]);
    }
    d = (mx - min) / static_cast<float>(top);
  } else {
    float amax;
    d = SignedMax(x, 32, &amax) / (q5 ? -16.0f : -8.0f);
  }
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float bias = with_min ? 0.5f : (q5 ? 16.5f : 8.5f);
  uint8_t u[32];
  for (int i = 0; i < 32; ++i) u[i] = TruncClamp((x[i] - min) * id + bias, 0, top);
  const uint16_t d16 = F32ToF16(d), m16 = F32ToF16(min);
  uint8_t qs[16];
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    qs[i] = static_cast<uint8_t>((u[i] & 0xF) | ((u[i + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(u[i] >> 4) << i;
    qh |= static_cast<uint32_t>(u[i + 16] >> 4) << (i + 16);
  }
  size_t at = 0;
  std::memcpy(out + at, &d16, 2);
  at += 2;
  if (with_min) {
    std::memcpy(out + at, &m16, 2);
    at += 2;
  }
  if (q5) {
    std::memcpy(out + at, &qh, 4);
    at += 4;
  }
  std::memcpy(out + at, qs, 16);
}

// make_qkx2_quants: x ~ scale * L - min with L in [0, nmax], the weighted error (squared, or
// absolute with use_mad) minimised over nstep + 1 candidate scales around nmax / (max - min).
// Returns the scale; *neg_min = -min >= 0.
float ScaleMinSearch(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                     float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, n);
    *neg_min = -min;
    return 0.0f;
  }
  auto error = [&](float scale, float mn, const uint8_t* l) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * l[i] + mn - x[i];
      e += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  float iscale = nmax / (max - min), scale = 1 / iscale;
  for (int i = 0; i < n; ++i) L[i] = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
  float best = error(scale, min, L);
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float e = error(this_scale, this_min, aux);
    if (e < best) {
      std::memcpy(L, aux, n);
      best = e;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// make_qx_quants with rmse_type 1 (weights x^2): x ~ scale * (L - nmax), L in [0, 2 nmax), the
// scale searched over 19 candidates around -nmax / max (Q6_K).
float SymmetricSearch(int n, int nmax, const float* x, uint8_t* L) {
  float amax;
  const float max = SignedMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  auto sums = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
  };
  float iscale = -nmax / max, sumlx, suml2;
  sums(iscale, &sumlx, &suml2);
  assign(iscale);
  float scale = suml2 > 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// make_q3_quants with do_rmse: start from -nmax / max, then up to 5 passes moving single
// quants to the value that improves the weighted (x^2) fit. L in [0, 2 nmax).
float Q3Search(int n, int nmax, const float* x, uint8_t* L) {
  float amax;
  const float max = SignedMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  const float iscale = -nmax / max;
  int l[16];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    l[i] = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l[i];
    suml2 += w * l[i] * l[i];
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * l[i];
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * l[i] * l[i];
      const int nl = Clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (nl == l[i]) continue;
      slx += w * x[i] * nl;
      sl2 += w * nl * nl;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        l[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(l[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

// Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins (packed as get_scale_min_k4
// reads them), weights av|x| + |x|.
void QuantizeQ45K(bool q5, const float* x, uint8_t* out) {
  const int nmax = q5 ? 31 : 15;
  uint8_t L[kQK_K];
  float scales[8], mins[8], weights[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av + std::fabs(xs[l]);
    scales[j] = ScaleMinSearch(32, nmax, xs, weights, L + 32 * j, &mins[j], q5 ? -0.5f : -1.0f,
                               0.1f, q5 ? 15 : 20, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t packed[12] = {};
  for (int j = 0; j < 8; ++j) {
    const int ls = std::min(63, Clamp(NearestInt(inv_scale * scales[j]), 0, 255));
    const int lm = std::min(63, Clamp(NearestInt(inv_min * mins[j]), 0, 255));
    if (j < 4) {
      packed[j] = static_cast<uint8_t>(packed[j] | ls);
      packed[j + 4] = static_cast<uint8_t>(packed[j + 4] | lm);
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] = static_cast<uint8_t>(packed[j - 4] | ((ls >> 4) << 6));
      packed[j] = static_cast<uint8_t>(packed[j] | ((lm >> 4) << 6));
    }
  }
  const uint16_t d16 = F32ToF16(max_scale / 63.f), dmin16 = F32ToF16(max_min / 63.f);
  int16_t sc[16], mn[16];
  ScalesQ4K(packed, sc, mn);
  for (int j = 0; j < 8; ++j) {
    const float d = F16ToF32(d16) * sc[2 * j];
    if (d == 0.0f) continue;
    const float dm = F16ToF32(dmin16) * mn[2 * j];
    for (int i = 0; i < 32; ++i) {
      L[32 * j + i] = static_cast<uint8_t>(Clamp(NearestInt((x[32 * j + i] + dm) / d), 0, nmax));
    }
  }
  auto* b4 = reinterpret_cast<BlockQ4_K*>(out);
  auto* b5 = reinterpret_cast<BlockQ5_K*>(out);
  std::memcpy(out, &d16, 2);  // d, dmin, scales: same offsets in both
  std::memcpy(out + 2, &dmin16, 2);
  std::memcpy(b4->scales, packed, 12);
  uint8_t* qs = q5 ? b5->qs : b4->qs;
  if (q5) std::memset(b5->qh, 0, 32);
  for (int h = 0; h < 8; h += 2) {  // 64 weights: 32 low nibbles then 32 high nibbles
    for (int l = 0; l < 32; ++l) {
      const int lo = L[32 * h + l], hi = L[32 * h + 32 + l];
      qs[16 * h + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      if (q5)
        b5->qh[l] = static_cast<uint8_t>(b5->qh[l] | ((lo >> 4) << h) | ((hi >> 4) << (h + 1)));
    }
  }
}

void QuantizeQ6K(const float* x, BlockQ6_K* y) {
  uint8_t L[kQK_K];
  float scales[16], max_scale = 0, max_abs = 0;
  for (int g = 0; g < 16; ++g) {
    scales[g] = SymmetricSearch(16, 32, x + 16 * g, L + 16 * g);
    if (std::fabs(scales[g]) > max_abs) {
      max_abs = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  std::memset(y, 0, sizeof(*y));
  if (max_abs < kGroupMaxEps) return;
  const float iscale = -128.f / max_scale;
  y->d = F32ToF16(1 / iscale);
  for (int g = 0; g < 16; ++g) {
    y->scales[g] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[g])));
  }
  for (int g = 0; g < 16; ++g) {
    const float d = F16ToF32(y->d) * y->scales[g];
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      L[16 * g + i] = static_cast<uint8_t>(Clamp(NearestInt(x[16 * g + i] / d), -32, 31) + 32);
    }
  }
  for (int e = 0; e < kQK_K; ++e) {  // element e: chunk h = e / 32 = 4n + k, lane l = e % 32
    const int h = e / 32, l = e % 32, n = h / 4, k = h % 4;
    y->ql[64 * n + 32 * (k & 1) + l] |= static_cast<uint8_t>((L[e] & 0xF) << (4 * (k >> 1)));
    y->qh[32 * n + l] |= static_cast<uint8_t>((L[e] >> 4) << (2 * k));
  }
}

void QuantizeQ3K(const float* x, BlockQ3_K* y) {
  uint8_t L[kQK_K];
  float scales[16], max_scale = 0, amax = 0;
  for (int g = 0; g < 16; ++g) {
    scales[g] = Q3Search(16, 4, x + 16 * g, L + 16 * g);
    if (std::fabs(scales[g]) > amax) {
      amax = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  std::memset(y, 0, sizeof(*y));
  if (max_scale != 0.0f) {
    const float iscale = -32.f / max_scale;
    for (int g = 0; g < 16; ++g) {
      const int l = Clamp(NearestInt(iscale * scales[g]), -32, 31) + 32;
      if (g < 8) {
        y->scales[g] = static_cast<uint8_t>(l & 0xF);
      } else {
        y->scales[g - 8] = static_cast<uint8_t>(y->scales[g - 8] | ((l & 0xF) << 4));
      }
      y->scales[8 + g % 4] =
          static_cast<uint8_t>(y->scales[8 + g % 4] | ((l >> 4) << (2 * (g / 4))));
    }
    y->d = F32ToF16(1 / iscale);
  }
  int16_t sc[16], mn[16];
  ScalesQ3K(y->scales, sc, mn);
  for (int g = 0; g < 16; ++g) {
    const float d = F16ToF32(y->d) * sc[g];
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      L[16 * g + i] = static_cast<uint8_t>(Clamp(NearestInt(x[16 * g + i] / d), -4, 3) + 4);
    }
  }
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 32, l = e % 32;
    if (L[e] > 3) y->hmask[l] = static_cast<uint8_t>(y->hmask[l] | (1 << h));
    y->qs[32 * (h / 4) + l] =
        static_cast<uint8_t>(y->qs[32 * (h / 4) + l] | ((L[e] & 3) << (2 * (h % 4))));
  }
}

void QuantizeQ2K(const float* x, BlockQ2_K* y) {
  uint8_t L[kQK_K];
  float scales[16], mins[16], weights[16], max_scale = 0, max_min = 0;
  for (int g = 0; g < 16; ++g) {
    for (int i = 0; i < 16; ++i) weights[i] = std::fabs(x[16 * g + i]);
    scales[g] =
        ScaleMinSearch(16, 3, x + 16 * g, weights, L + 16 * g, &mins[g], -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[g]);
    max_min = std::max(max_min, mins[g]);
  }
  std::memset(y, 0, sizeof(*y));
  if (max_scale > 0) {
    const float iscale = 15.f / max_scale;
    for (int g = 0; g < 16; ++g) y->scales[g] = Clamp(NearestInt(iscale * scales[g]), 0, 15);
    y->d = F32ToF16(max_scale / 15.f);
  }
  if (max_min > 0) {
    const float iscale = 15.f / max_min;
    for (int g = 0; g < 16; ++g) {
      y->scales[g] =
          static_cast<uint8_t>(y->scales[g] | (Clamp(NearestInt(iscale * mins[g]), 0, 15) << 4));
    }
    y->dmin = F32ToF16(max_min / 15.f);
  }
  for (int g = 0; g < 16; ++g) {
    const float d = F16ToF32(y->d) * (y->scales[g] & 0xF);
    if (d == 0.0f) continue;
    const float dm = F16ToF32(y->dmin) * (y->scales[g] >> 4);
    for (int i = 0; i < 16; ++i) {
      L[16 * g + i] = static_cast<uint8_t>(Clamp(NearestInt((x[16 * g + i] + dm) / d), 0, 3));
    }
  }
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 32, l = e % 32;
    y->qs[32 * (h / 4) + l] =
        static_cast<uint8_t>(y->qs[32 * (h / 4) + l] | ((L[e] & 3) << (2 * (h % 4))));
  }
}

// The index of the IQ4_NL value nearest v (ties to the larger; the table is sorted).
int NearestIQ4NL(float v) {
  if (v <= kIQ4NLValues[0]) return 0;
  if (v >= kIQ4NLValues[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < kIQ4NLValues[mid] ? hi : lo) = mid;
  }
  return v - kIQ4NLValues[lo] < kIQ4NLValues[hi] - v ? lo : hi;
}

// The scale of 32 weights for IQ4_NL's values (ggml's search for files, as llama-quantize runs
// it; 0 for a block of zeros): a first scale maps the element of largest magnitude to the
// table's end; the least-squares scale of those indices (weights x^2) is then compared with 15
// others, 1 / d = (i - 127) / max for i in -7..7, keeping the one whose indices fit best.
float IQ4Scale(const float* x) {
  float amax;
  const float max = SignedMax(x, 32, &amax);
  if (amax < kGroupMaxEps) return 0.0f;
  // sum(w q x) and sum(w q^2) of the indices nearest x * id
  auto fit = [x](float id, float* sumqx, float* sumq2) {
    *sumqx = *sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = kIQ4NLValues[NearestIQ4NL(id * x[j])], w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  fit(1.0f / (-max / kIQ4NLValues[0]), &sumqx, &sumq2);
  float d = sumqx / sumq2, best = d * sumqx;
  for (int i = -7; i <= 7; ++i) {
    fit((static_cast<float>(i) + kIQ4NLValues[0]) / max, &sumqx, &sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 weights' nibbles at scale d (fp32): element i < 16 low nibble of qs[i], 16 + i high.
void IQ4Nibbles(const float* x, float d, uint8_t qs[16]) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(NearestIQ4NL(id * x[j]) | NearestIQ4NL(id * x[j + 16]) << 4);
  }
}

// IQ4_NL: the block's scale as fp16, the indices taken with it in fp32.
void QuantizeIQ4NL(const float* x, BlockIQ4_NL* y) {
  const float d = IQ4Scale(x);
  y->d = F32ToF16(d);
  IQ4Nibbles(x, d, y->qs);
}

// Q1_0 (ggml's quantize_row_q1_0_ref): d = the mean |x| of the 128 weights (summed in order,
// then divided), a weight's bit set where x >= 0 (-0 and +0 alike; NaN: clear).
void QuantizeQ1_0(const float* x, BlockQ1_0* y) {
  float sum_abs = 0.0f;
  for (int j = 0; j < 128; ++j) sum_abs += std::fabs(x[j]);
  y->d = F32ToF16(sum_abs / 128);
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int j = 0; j < 128; ++j) {
    if (x[j] >= 0.0f) y->qs[j / 8] = static_cast<uint8_t>(y->qs[j / 8] | (1u << (j % 8)));
  }
}

// ggml's best_index_mxfp4: the code of least |value * d - v|, the first on ties.
int BestE2M1(float v, float d) {
  int index = 0;
  float err = std::fabs(kMXFP4Values[0] * d - v);
  for (int i = 1; i < 16; ++i) {
    const float ei = std::fabs(kMXFP4Values[i] * d - v);
    if (ei < err) {
      index = i;
      err = ei;
    }
  }
  return index;
}

// MXFP4 (ggml's quantize_row_mxfp4_ref): e = floor(log2(amax)) - 2 + 127 (0 for a block of
// zeros; clamped to 0..254 where ggml's conversion to uint8_t would leave the range), then each
// weight's index of least |value * d - x|, the first on ties.
void QuantizeMXFP4(const float* x, BlockMXFP4* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int e = 0;
  if (amax > 0.0f && std::isfinite(amax)) {
    e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254);
  }
  y->e = static_cast<uint8_t>(e);
  const float d = E8M0Half(y->e);
  for (int j = 0; j < 16; ++j) {
    y->qs[j] = static_cast<uint8_t>(BestE2M1(x[j], d) | BestE2M1(x[j + 16], d) << 4);
  }
}

// ggml_fp32_to_ue4m3: 0 for x <= 0 (and NaN), x clamped to 448; below 2^-6 the subnormal codes
// round(x 2^9) (1..7, 0 below half of 2^-9); above, the fp32 exponent + 7 with 3 mantissa bits
// rounded half up, 0x7E (448) where the exponent reaches 15.
uint8_t Fp32ToUE4M3(float x) {
  if (!(x > 0.0f)) return 0;
  x = std::min(x, 448.0f);
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  int exp = static_cast<int>((bits >> 23) & 0xFF) - 127 + 7;
  if (exp <= 0) {
    const int man = std::min(static_cast<int>(x * 512.0f + 0.5f), 7);
    return man < 1 ? 0 : static_cast<uint8_t>(man);
  }
  if (exp >= 15) return 0x7E;
  int man = static_cast<int>((bits >> 20) & 7) + static_cast<int>((bits >> 19) & 1);
  if (man > 7) {
    man = 0;
    if (++exp >= 15) return 0x7E;
  }
  return static_cast<uint8_t>(exp << 3 | man);
}

// NVFP4 (ggml's quantize_row_nvfp4_ref): per 16 weights the scale Fp32ToUE4M3(amax / 6), then
// each weight's code of least |value * d - x| at d = UE4M3Half(scale), the first on ties.
void QuantizeNVFP4(const float* x, BlockNVFP4* y) {
  for (int s = 0; s < 4; ++s) {
    const float* xb = x + 16 * s;
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(xb[j]));
    y->d[s] = Fp32ToUE4M3(amax / 6.0f);
    const float d = UE4M3Half(y->d[s]);
    for (int j = 0; j < 8; ++j) {
      y->qs[8 * s + j] = static_cast<uint8_t>(BestE2M1(xb[j], d) | BestE2M1(xb[j + 8], d) << 4);
    }
  }
}

// IQ4_XS: each sub-block's IQ4_NL scale, then d = -(the scale of largest magnitude) / 32 and
// each sub-block's ls - 32 = its scale / d rounded into [-32, 31]; the indices are taken again
// with d * (ls - 32) in fp32 (ggml's order: d is stored as fp16 after that).
void QuantizeIQ4XS(const float* x, BlockIQ4_XS* y) {
  float scales[8], amax = 0.0f, max = 0.0f;
  for (int s = 0; s < 8; ++s) {
    scales[s] = IQ4Scale(x + 32 * s);
    if (std::fabs(scales[s]) > amax) {
      amax = std::fabs(scales[s]);
      max = scales[s];
    }
  }
  const float d = -max / 32.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = F32ToF16(d);
  y->scales_h = 0;
  std::memset(y->scales_l, 0, sizeof(y->scales_l));
  for (int s = 0; s < 8; ++s) {
    const int l = Clamp(NearestInt(id * scales[s]), -32, 31);
    IQ4Nibbles(x + 32 * s, d * static_cast<float>(l), y->qs + 16 * s);
    AddIQ4XSScale(*y, s, l + 32);
  }
}

}  // namespace

void QuantizeRow(DType t, const float* x, void* dst, int64_t k) {
  auto* out = static_cast<uint8_t*>(dst);
  const int bs = BlockSize(t);
  for (int64_t b = 0; b < k / bs; ++b) {
    const float* xb = x + b * bs;
    uint8_t* ob = out + b * BlockBytes(t);
    switch (t) {
      case DType::kQ8_0:
        QuantizeRowQ8_0(xb, kQ8BlockSize, reinterpret_cast<BlockQ8_0*>(ob));
        break;
      case DType::kQ4_0:
      case DType::kQ4_1:
      case DType::kQ5_0:
      case DType::kQ5_1:
        QuantizeLegacy(t, xb, ob);
        break;
      case DType::kQ2_K:
        QuantizeQ2K(xb, reinterpret_cast<BlockQ2_K*>(ob));
        break;
      case DType::kQ3_K:
        QuantizeQ3K(xb, reinterpret_cast<BlockQ3_K*>(ob));
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:
        QuantizeQ45K(t == DType::kQ5_K, xb, ob);
        break;
      case DType::kQ6_K:
        QuantizeQ6K(xb, reinterpret_cast<BlockQ6_K*>(ob));
        break;
      case DType::kIQ4_NL:
        QuantizeIQ4NL(xb, reinterpret_cast<BlockIQ4_NL*>(ob));
        break;
      case DType::kIQ4_XS:
        QuantizeIQ4XS(xb, reinterpret_cast<BlockIQ4_XS*>(ob));
        break;
      case DType::kMXFP4:
        QuantizeMXFP4(xb, reinterpret_cast<BlockMXFP4*>(ob));
        break;
      case DType::kQ1_0:
        QuantizeQ1_0(xb, reinterpret_cast<BlockQ1_0*>(ob));
        break;
      case DType::kNVFP4:
        QuantizeNVFP4(xb, reinterpret_cast<BlockNVFP4*>(ob));
        break;
      default:
        break;
    }
  }
}

}  // namespace llm::kernels::internal
