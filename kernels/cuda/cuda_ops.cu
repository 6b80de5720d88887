#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/index_math.h"
#include "kernels/cuda_ops.h"

namespace llm::kernels::cuda {

namespace {

Status FromCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

// One block per row: a block-wide sum of squares, then the scaled write.
__global__ void RmsNormKernel(const float* x, const float* w, int dim, float eps, float* out) {
  extern __shared__ float partial[];
  const float* row = x + static_cast<long>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += row[i] * row[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / dim + eps);
  float* o = out + static_cast<long>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = row[i] * inv * w[i];
}

__global__ void SiluMulKernel(const float* gate, const float* up, long count, float* out) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void AddBiasKernel(float* y, const float* bias, long rows, int n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * n) y[i] += bias[i % n];
}

cublasHandle_t Handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) h = nullptr;
    return h;
  }();
  return handle;
}

}  // namespace

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

StatusOr<void*> Malloc(size_t bytes) {
  void* p = nullptr;
  LLM_RETURN_IF_ERROR(FromCuda(cudaMalloc(&p, bytes), "cudaMalloc"));
  return p;
}

void Free(void* device_ptr) {
  cudaFree(device_ptr);
}

Status CopyToDevice(void* dst, const void* src, size_t bytes) {
  return FromCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

Status CopyToHost(void* dst, const void* src, size_t bytes) {
  return FromCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

Status RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) {
  constexpr int kThreads = 256;
  RmsNormKernel<<<rows, kThreads, kThreads * sizeof(float)>>>(x, weight, dim, eps, out);
  return FromCuda(cudaGetLastError(), "RmsNorm launch");
}

Status SiluMul(const float* gate, const float* up, long count, float* out) {
  constexpr int kThreads = 256;
  SiluMulKernel<<<GridFor(count, kThreads), kThreads>>>(gate, up, count, out);
  return FromCuda(cudaGetLastError(), "SiluMul launch");
}

Status Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
              float* y) {
  if (w_type != DType::kF32) {
    return Unimplemented(std::string("CUDA Matmul: weights of type ") + DTypeName(w_type));
  }
  if (Handle() == nullptr) return Unavailable("cuBLAS could not be initialised");
  // Row-major y[m,n] = x[m,k]·W[n,k]^T is column-major Y[n,m] = W^T[n,k]·X[k,m].
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasSgemm(Handle(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha,
                                       static_cast<const float*>(w), k, x, k, &beta, y, n);
  if (s != CUBLAS_STATUS_SUCCESS) return Internal("cublasSgemm failed: " + std::to_string(s));
  if (bias != nullptr) {
    constexpr int kThreads = 256;
    AddBiasKernel<<<GridFor(static_cast<long>(m) * n, kThreads), kThreads>>>(y, bias, m, n);
  }
  return FromCuda(cudaDeviceSynchronize(), "Matmul");
}

}  // namespace llm::kernels::cuda
