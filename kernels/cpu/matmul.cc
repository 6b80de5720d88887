// Matmul: picks the micro-kernel for this CPU once, then splits the output features (n) into
// panels across OpenMP threads. k is never split, so each element's reduction is fixed.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace internal {

int AvailableMatmulKernels(const MatmulKernels* out[kMaxMatmulIsas]) {
  __builtin_cpu_init();
  int n = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    if (__builtin_cpu_supports("avx512vnni")) out[n++] = &Avx512VnniMatmulKernels();
    out[n++] = &Avx512MatmulKernels();
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    out[n++] = &Avx2MatmulKernels();
  }
  out[n++] = &ScalarMatmulKernels();
  return n;
}

void PairChunksQ8K(BlockQ8_K* x, int nb) {
  for (int b = 0; b < nb; ++b) {
    for (int half = 0; half < 2; ++half) {
      int8_t* q = x[b].qs + 128 * half;
      int8_t c1[32];
      std::memcpy(c1, q + 32, 32);
      std::memcpy(q + 32, q + 64, 32);
      std::memcpy(q + 64, c1, 32);
    }
  }
}

// Weight rows per parallel work item. Small enough to load-balance n = 2048 over 16 threads,
// large enough that a panel is many cache lines of weights.
constexpr int kPanelRows = 16;

namespace {

// Q8_0 weights: the input rows are quantized to Q8_0 first (into a per-thread buffer that only
// grows), then each panel runs on them.
void MatmulQ8_0(const MatmulKernels& ks, const float* x, int m, int k, const void* w, int n,
                const float* bias, float* y) {
  static thread_local std::vector<BlockQ8_0> xq;
  const int nb = k / kQ8BlockSize;
  const size_t blocks = static_cast<size_t>(m) * nb;
  if (xq.size() < blocks) xq.resize(blocks);
  BlockQ8_0* q = xq.data();
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * k >= (1 << 16))
  for (int i = 0; i < m; ++i) {
    QuantizeRowQ8_0(x + static_cast<int64_t>(i) * k, k, q + static_cast<int64_t>(i) * nb);
  }
  const int panels = (n + kPanelRows - 1) / kPanelRows;
  const bool parallel = static_cast<int64_t>(m) * n * k >= (1 << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int p = 0; p < panels; ++p) {
    ks.q8_0(q, m, k, w, p * kPanelRows, std::min(n, (p + 1) * kPanelRows), bias, y, n);
  }
}

// The other block formats: the input rows are quantized to Q8_0 (legacy formats) or Q8_K
// (K-quants) first, as ggml's vec_dot_type, then each panel runs on them.
void MatmulBlocks(const MatmulKernels& ks, const float* x, int m, int k, const void* w, DType type,
                  int n, const float* bias, float* y) {
  static thread_local std::vector<BlockQ8_0> xq0;
  static thread_local std::vector<BlockQ8_K> xqk;
  const bool kquant = IsKQuant(type);
  const int nb = k / BlockSize(type);
  const size_t blocks = static_cast<size_t>(m) * nb;
  std::vector<BlockQ8_0>& q0 = xq0;
  std::vector<BlockQ8_K>& qk = xqk;
  if (kquant && qk.size() < blocks) qk.resize(blocks);
  if (!kquant && q0.size() < blocks) q0.resize(blocks);
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * k >= (1 << 16))
  for (int i = 0; i < m; ++i) {
    const float* xr = x + static_cast<int64_t>(i) * k;
    if (kquant) {
      QuantizeRowQ8_K(xr, k, qk.data() + static_cast<int64_t>(i) * nb);
    } else {
      QuantizeRowQ8_0(xr, k, q0.data() + static_cast<int64_t>(i) * nb);
    }
  }
  if (m == 1 && ks.quant->gemv_pairs_chunks[static_cast<int>(type)]) PairChunksQ8K(qk.data(), nb);
  const void* xq = kquant ? static_cast<const void*>(qk.data()) : q0.data();
  const MatmulBlockPanelFn fn = ks.quant->fn[static_cast<int>(type)];
  const int panels = (n + kPanelRows - 1) / kPanelRows;
  const bool parallel = static_cast<int64_t>(m) * n * k >= (1 << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int p = 0; p < panels; ++p) {
    fn(xq, m, k, w, p * kPanelRows, std::min(n, (p + 1) * kPanelRows), bias, y, n);
  }
}

}  // namespace

void MatmulWith(const MatmulKernels& ks, const float* x, int m, int k, const void* w, DType w_type,
                int n, const float* bias, float* y) {
  if (m <= 0 || n <= 0) return;
  if (w_type == DType::kQ8_0) {
    MatmulQ8_0(ks, x, m, k, w, n, bias, y);
    return;
  }
  if (IsBlockFormat(w_type)) {
    MatmulBlocks(ks, x, m, k, w, w_type, n, bias, y);
    return;
  }
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
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int count = internal::AvailableMatmulKernels(avail);
  if (const char* want = std::getenv("LLM_MATMUL_ISA")) {
    for (int i = 0; i < count; ++i) {
      if (std::strcmp(avail[i]->isa, want) == 0) return *avail[i];
    }
  }
  return *avail[0];
}

// Chosen once (SelectMatmulIsa, or on first use); the pointer is published atomically.
std::atomic<const internal::MatmulKernels*> g_kernels{nullptr};

const internal::MatmulKernels& Kernels() {
  const internal::MatmulKernels* k = g_kernels.load(std::memory_order_acquire);
  if (k == nullptr) {
    const internal::MatmulKernels* chosen = &SelectKernels();
    g_kernels.compare_exchange_strong(k, chosen, std::memory_order_acq_rel);
    k = g_kernels.load(std::memory_order_acquire);
  }
  return *k;
}

}  // namespace

Status SelectMatmulIsa(const std::string& isa) {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int count = internal::AvailableMatmulKernels(avail);
  if (isa == "auto") {
    g_kernels.store(&SelectKernels(), std::memory_order_release);
    return Status::Ok();
  }
  std::string names;
  for (int i = 0; i < count; ++i) {
    if (isa == avail[i]->isa) {
      g_kernels.store(avail[i], std::memory_order_release);
      return Status::Ok();
    }
    names += std::string(names.empty() ? "" : ", ") + avail[i]->isa;
  }
  return InvalidArgument("engine.matmul_isa '" + isa +
                         "' is not available on this CPU (available: " + names + ", auto)");
}

void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y) {
  internal::MatmulWith(Kernels(), x, m, k, w, w_type, n, bias, y);
}

const char* MatmulIsa() {
  return Kernels().isa;
}

}  // namespace llm::kernels
