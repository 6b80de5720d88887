// CUDA kernels behind a plain C++ interface (no CUDA types here, so any module may include it).
// Built only when CMake finds nvcc (LLM_HAVE_CUDA); the functions operate on device pointers
// on the default stream and return a Status instead of aborting on a CUDA error.
// The index math is in kernels/cuda/index_math.h (__host__ __device__), tested on the CPU.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "common/status.h"

namespace llm::kernels::cuda {

// Number of usable GPUs; 0 when there is no device or no driver (never an error).
int DeviceCount();

StatusOr<void*> Malloc(size_t bytes);
void Free(void* device_ptr);
Status CopyToDevice(void* dst, const void* src, size_t bytes);
Status CopyToHost(void* dst, const void* src, size_t bytes);

// Same contracts as kernels/cpu_ops.h, on device memory.
Status RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out);
Status SiluMul(const float* gate, const float* up, long count, float* out);
// y[m, n] = x[m, k] · W[n, k]^T (+ bias) with cuBLAS; F32 weights (F16/BF16 come later).
Status Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
              float* y);

}  // namespace llm::kernels::cuda
