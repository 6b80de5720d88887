// Matmul: picks the micro-kernel for this CPU once, then splits the output features (n) into
// panels across OpenMP threads. k is never split, so each element's reduction is fixed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace internal {

int AvailableMatmulKernels(const MatmulKernels* out[3]) {
  __builtin_cpu_init();
  int n = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    out[n++] = &Avx512MatmulKernels();
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    out[n++] = &Avx2MatmulKernels();
  }
  out[n++] = &ScalarMatmulKernels();
  return n;
}

// Weight rows per parallel work item. Small enough to load-balance n = 2048 over 16 threads,
// large enough that a panel is many cache lines of weights.
constexpr int kPanelRows = 16;

void MatmulWith(const MatmulKernels& ks, const float* x, int m, int k, const void* w, DType w_type,
                int n, const float* bias, float* y) {
  if (m <= 0 || n <= 0) return;
  const MatmulPanelFn fn = w_type == DType::kF32   ? ks.f32
                           : w_type == DType::kF16 ? ks.f16
                                                   : ks.bf16;
  const int panels = (n + kPanelRows - 1) / kPanelRows;
  const bool parallel = static_cast<int64_t>(m) * n * k >= (1 << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int p = 0; p < panels; ++p) {
    fn(x, m, k, w, p * kPanelRows, std::min(n, (p + 1) * kPanelRows), bias, y, n);
  }
}

}  // namespace internal

namespace {

const internal::MatmulKernels& SelectKernels() {
  const internal::MatmulKernels* avail[3];
  const int count = internal::AvailableMatmulKernels(avail);
  if (const char* want = std::getenv("LLM_MATMUL_ISA")) {
    for (int i = 0; i < count; ++i) {
      if (std::strcmp(avail[i]->isa, want) == 0) return *avail[i];
    }
  }
  return *avail[0];
}

const internal::MatmulKernels& Kernels() {
  static const internal::MatmulKernels& kernels = SelectKernels();
  return kernels;
}

}  // namespace

void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y) {
  internal::MatmulWith(Kernels(), x, m, k, w, w_type, n, bias, y);
}

const char* MatmulIsa() {
  return Kernels().isa;
}

}  // namespace llm::kernels
