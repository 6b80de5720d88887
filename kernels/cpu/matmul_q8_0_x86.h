// The x86 Q8_0 micro-kernel (256-bit integer dot products, ggml's AVX2 vec_dot_q8_0_q8_0), for
// the TUs compiled with AVX2 or AVX-512 flags: each includes this header inside its own anonymous
// namespace, so no code compiled for one ISA is shared with another TU. Only the tile shape
// differs (AVX-512 has 32 vector registers); the float operations are those of q8_0.h, the same
// in every tile and on every path.
//
// Per block: |w| (unsigned) times x signed by w (_mm256_sign_epi8) with DotU8S8 (maddubs/madd, or
// VNNI's vpdpbusd) gives the 8 int32 group sums exactly (|w| <= 128 and |x| <= 127, so the int16
// pair sums cannot saturate), then acc = fma(d_w * d_x, float(sums), acc). The weight rows are
// prefetched 2 KiB ahead (PrefetchWeights): on an Intel Xeon with AMX (28 Nov 2026) the 2-thread
// Q8_0 GEMV from DRAM went from 10 to 18 GB/s with it, TinyLlama Q8_0 decode from 9 to 22-23
// tok/s.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/int8_dot_x86.h"
#include "kernels/cpu/q8_0.h"

template <int kMRv, int kNRv>
struct Q8X86Micro {
  static constexpr int kMR = kMRv;
  static constexpr int kNR = kNRv;

  static float ReduceAdd(__m256 v) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
  }
  static __m256i Load(const ::llm::kernels::internal::BlockQ8_0& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  static float Scale(const ::llm::kernels::internal::BlockQ8_0& b) {
    return _cvtsh_ss(b.d);  // exact
  }

  template <int MR, int NR>
  static void Tile(const ::llm::kernels::internal::BlockQ8_0* x, int64_t ldx,
                   const ::llm::kernels::internal::BlockQ8_0* w, int64_t ldw, int nb,
                   const float* bias, float* y, int64_t ldy) {
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; ++b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
      // vpdpbusd multiplies unsigned by signed bytes without int16 pair sums, so x can be made
      // unsigned once per row (x + 128 = x ^ 0x80) and w used as it is: per product one vpdpbusd
      // started from -128 * (w's group sums), which w's row pays once for the MR rows of x.
      __m256i wq[NR], base[NR];
      __m256 dw[NR];  // scales broadcast: one vector multiply per product gives d_w * d_x
      const __m256i bias128 = _mm256_set1_epi8(static_cast<char>(0x80));
      for (int j = 0; j < NR; ++j) {
        PrefetchWeights(&w[j * ldw + b]);
        wq[j] = Load(w[j * ldw + b]);
        base[j] = _mm256_sub_epi32(_mm256_setzero_si256(), DotU8S8(bias128, wq[j]));
        dw[j] = _mm256_set1_ps(Scale(w[j * ldw + b]));
      }
      for (int i = 0; i < MR; ++i) {
        const __m256i xu = _mm256_xor_si256(Load(x[i * ldx + b]), bias128);
        const __m256 dx = _mm256_set1_ps(Scale(x[i * ldx + b]));
        for (int j = 0; j < NR; ++j) {
          const __m256i sums = _mm256_dpbusd_epi32(base[j], xu, wq[j]);
          acc[i][j] =
              _mm256_fmadd_ps(_mm256_mul_ps(dw[j], dx), _mm256_cvtepi32_ps(sums), acc[i][j]);
        }
      }
#else
      __m256i wq[NR], wa[NR];
      __m256 dw[NR];  // scales broadcast: one vector multiply per product gives d_w * d_x
      for (int j = 0; j < NR; ++j) {
        PrefetchWeights(&w[j * ldw + b]);
        wq[j] = Load(w[j * ldw + b]);
        wa[j] = _mm256_abs_epi8(wq[j]);  // -128 becomes 0x80 = 128 as unsigned: still exact
        dw[j] = _mm256_set1_ps(Scale(w[j * ldw + b]));
      }
      for (int i = 0; i < MR; ++i) {
        const __m256i xq = Load(x[i * ldx + b]);
        const __m256 dx = _mm256_set1_ps(Scale(x[i * ldx + b]));
        for (int j = 0; j < NR; ++j) {
          const __m256i sums = DotU8S8(wa[j], _mm256_sign_epi8(xq, wq[j]));
          acc[i][j] =
              _mm256_fmadd_ps(_mm256_mul_ps(dw[j], dx), _mm256_cvtepi32_ps(sums), acc[i][j]);
        }
      }
#endif
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = ReduceAdd(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};
