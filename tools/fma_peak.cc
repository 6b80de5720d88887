// F32 FMA peak: see fma_peak.h.
#include "tools/fma_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llm_bench {
namespace {

// Enough independent chains to cover the FMA latency on every pipe (4 cycles x 2 pipes on Zen
// 4/5 and recent Xeons: 8; 12 leaves room), each a multiply by ~1 plus a small add so the
// values stay finite. FLOPs per thread: iters * kChains * lanes * 2.
constexpr int kChains = 12;
constexpr long kIters = 16'000'000;  // ~22 ms a pass at 4.3 GHz
volatile float g_sink;               // the chains' sums are stored: not optimized away

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float Chains512(long iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(1.0f + 1e-7f * i);
  const __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-8f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float v[16];
  _mm512_store_ps(v, s);
  float sum = 0;
  for (float e : v) sum += e;
  return sum;
}

__attribute__((target("avx2,fma"))) float Chains256(long iters) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(1.0f + 1e-7f * i);
  const __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-8f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  float sum = 0;
  for (float e : v) sum += e;
  return sum;
}
#endif

}  // namespace

double FmaPeakGflops() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool wide = __builtin_cpu_supports("avx512f");
  if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
  const int lanes = wide ? 16 : 8;
  double best = 0;
  float sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    int threads = 1;
#pragma omp parallel reduction(+ : sink)
    {
#pragma omp single
      threads = omp_get_num_threads();
      sink += wide ? Chains512(kIters) : Chains256(kIters);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * kChains * lanes * kIters * threads / s / 1e9);
  }
  g_sink = sink;
  return best;
#else
  return 0;
#endif
}

}  // namespace llm_bench
