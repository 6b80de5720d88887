// The CUDA backend's element-wise, normalisation, RoPE, embedding and cache-write kernels. Each
// thread's indices come from kernels/cuda/index_math.h (tested on the CPU); the arithmetic follows
// the CPU kernels (kernels/cpu) in float32, with the standard (not the fast-math) libm functions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/index_math.h"
#include "kernels/cuda/launch.h"

namespace llm::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += partial[w];
  return total;
}

// One block per row.
__global__ void RmsNormKernel(const float* x, const float* w, int dim, float eps, float* out) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += x[base + i] * x[base + i];
  const float inv = rsqrtf(BlockSum(sum) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) out[base + i] = x[base + i] * inv * w[i];
}

// residual += x, then out = RmsNorm(residual); one block per row. Each thread re-reads the
// residual elements it wrote itself, so no barrier is needed between the passes.
__global__ void AddRmsNormKernel(float* residual, const float* x, const float* w, int dim,
                                 float eps, float* out) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float r = residual[base + i] + x[base + i];
    residual[base + i] = r;
    sum += r * r;
  }
  const float inv = rsqrtf(BlockSum(sum) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    out[base + i] = residual[base + i] * inv * w[i];
  }
}

// One thread per (token, head, pair).
__global__ void RopeKernel(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
                           int rotary_dim, bool interleaved, float mscale, const float* inv_freq) {
  const int half = rotary_dim / 2;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= static_cast<int64_t>(tokens) * heads * half) return;
  const int i = static_cast<int>(id % half);
  const int64_t th = id / half;  // token * heads + head
  const int t = static_cast<int>(th / heads);
  const float angle = static_cast<float>(positions[t]) * inv_freq[i];
  const float cs = cosf(angle) * mscale, sn = sinf(angle) * mscale;
  const LanePair p = RopeLanes(i, rotary_dim, interleaved);
  float* v = x + th * head_dim;
  const float x0 = v[p.a], x1 = v[p.b];
  v[p.a] = x0 * cs - x1 * sn;
  v[p.b] = x1 * cs + x0 * sn;
}

__global__ void SiluMulKernel(const float* gate, const float* up, int64_t count, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void GeluTanhMulKernel(const float* gate, const float* up, int64_t count, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float g = gate[i];
  out[i] = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
}

__global__ void ScaleKernel(float* x, float s, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] *= s;
}

__global__ void AddKernel(float* x, const float* y, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += y[i];
}

__global__ void AddBiasKernel(float* x, const float* bias, int64_t count, int cols) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += bias[i % cols];
}

// One block per source row; destination rows are distinct within a call, so no atomics.
__global__ void ScatterAddRowsKernel(const float* src, const int32_t* rows, const float* scale,
                                     int cols, float* dst) {
  const int i = blockIdx.x;
  float* d = dst + static_cast<int64_t>(rows[i]) * cols;
  const float* s = src + static_cast<int64_t>(i) * cols;
  const float f = scale[i];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) d[c] += f * s[c];
}

__global__ void GatherRowsKernel(const float* src, const int32_t* rows, int cols, float* dst) {
  const int i = blockIdx.x;
  const float* s = src + static_cast<int64_t>(rows[i]) * cols;
  float* d = dst + static_cast<int64_t>(i) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

__device__ float LoadAsFloat(const void* table, DType format, int64_t i) {
  switch (format) {
    case DType::kF16:
      return __half2float(static_cast<const __half*>(table)[i]);
    case DType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(table)[i]);
    default:
      return static_cast<const float*>(table)[i];
  }
}

// One block per token.
__global__ void EmbeddingKernel(const int32_t* ids, const void* table, DType format, int rows,
                                int cols, int first_id, float* out) {
  const int t = blockIdx.x;
  const int64_t row = EmbeddingRow(ids[t], first_id, rows);
  float* o = out + static_cast<int64_t>(t) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    o[c] = row < 0 ? 0.0f : LoadAsFloat(table, format, row * cols + c);
  }
}

// One block per (token, kv head).
__global__ void ReshapeAndCacheKernel(const float* k, const float* v, int kv_heads, int head_dim,
                                      const int32_t* slot_mapping, float* k_cache, float* v_cache) {
  const int t = blockIdx.x, h = blockIdx.y;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;  // padding: nothing to store
  const int64_t src = (static_cast<int64_t>(t) * kv_heads + h) * head_dim;
  const int64_t dst = CacheOffset(slot, kv_heads, head_dim, h);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    k_cache[dst + d] = k[src + d];
    v_cache[dst + d] = v[src + d];
  }
}

__global__ void ConvertKernel(const float* x, int64_t count, DType to, void* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  if (to == DType::kF16) {
    static_cast<__half*>(out)[i] = __float2half_rn(x[i]);
  } else {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x[i]);
  }
}

unsigned Blocks(int64_t count) {
  return static_cast<unsigned>(GridFor(count, kThreads));
}

// Threads for a kernel walking `cols` columns of a row: a multiple of 32, at most kThreads.
int RowThreads(int cols) {
  const int t = static_cast<int>(GridFor(cols, kWarp)) * kWarp;
  return t < kThreads ? t : kThreads;
}

}  // namespace

void LaunchRmsNorm(cudaStream_t stream, const float* x, const float* weight, int rows, int dim,
                   float eps, float* out) {
  if (rows <= 0 || dim <= 0) return;
  RmsNormKernel<<<rows, kThreads * 4, 0, stream>>>(x, weight, dim, eps, out);
}

void LaunchAddRmsNorm(cudaStream_t stream, float* residual, const float* x, const float* weight,
                      int rows, int dim, float eps, float* out) {
  if (rows <= 0 || dim <= 0) return;
  AddRmsNormKernel<<<rows, kThreads * 4, 0, stream>>>(residual, x, weight, dim, eps, out);
}

void LaunchRope(cudaStream_t stream, float* x, const int32_t* positions, int tokens, int heads,
                const RopeLayout& layout, const float* inv_freq) {
  const int half = layout.rotary_dim / 2;
  if (tokens <= 0 || heads <= 0 || half <= 0 || layout.rotary_dim % 2 != 0 ||
      layout.rotary_dim > layout.head_dim) {
    return;  // the CPU kernel's precondition; the model never asks for it
  }
  const int64_t n = static_cast<int64_t>(tokens) * heads * half;
  RopeKernel<<<Blocks(n), kThreads, 0, stream>>>(x, positions, tokens, heads, layout.head_dim,
                                                 layout.rotary_dim, layout.interleaved,
                                                 layout.mscale, inv_freq);
}

void LaunchSiluMul(cudaStream_t stream, const float* gate, const float* up, int64_t count,
                   float* out) {
  if (count > 0) SiluMulKernel<<<Blocks(count), kThreads, 0, stream>>>(gate, up, count, out);
}

void LaunchGeluTanhMul(cudaStream_t stream, const float* gate, const float* up, int64_t count,
                       float* out) {
  if (count > 0) GeluTanhMulKernel<<<Blocks(count), kThreads, 0, stream>>>(gate, up, count, out);
}

void LaunchScale(cudaStream_t stream, float* x, float s, int64_t count) {
  if (count > 0) ScaleKernel<<<Blocks(count), kThreads, 0, stream>>>(x, s, count);
}

void LaunchAdd(cudaStream_t stream, float* x, const float* y, int64_t count) {
  if (count > 0) AddKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, count);
}

void LaunchAddBias(cudaStream_t stream, float* x, const float* bias, int rows, int cols) {
  const int64_t count = static_cast<int64_t>(rows) * cols;
  if (count > 0) AddBiasKernel<<<Blocks(count), kThreads, 0, stream>>>(x, bias, count, cols);
}

void LaunchScatterAddRows(cudaStream_t stream, const float* src, const int32_t* rows,
                          const float* scale, int count, int cols, float* dst) {
  if (count <= 0 || cols <= 0) return;
  ScatterAddRowsKernel<<<count, RowThreads(cols), 0, stream>>>(src, rows, scale, cols, dst);
}

void LaunchGatherRows(cudaStream_t stream, const float* src, const int32_t* rows, int count,
                      int cols, float* dst) {
  if (count <= 0 || cols <= 0) return;
  GatherRowsKernel<<<count, RowThreads(cols), 0, stream>>>(src, rows, cols, dst);
}

void LaunchEmbedding(cudaStream_t stream, const int32_t* ids, int tokens, const void* table,
                     DType format, int rows, int cols, int first_id, float* out) {
  if (tokens <= 0 || cols <= 0) return;
  EmbeddingKernel<<<tokens, RowThreads(cols), 0, stream>>>(ids, table, format, rows, cols, first_id,
                                                           out);
}

void LaunchReshapeAndCache(cudaStream_t stream, const float* k, const float* v, int tokens,
                           int kv_heads, int head_dim, const int32_t* slot_mapping,
                           int /*block_size*/, float* k_cache, float* v_cache) {
  if (tokens <= 0 || kv_heads <= 0 || head_dim <= 0) return;
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(kv_heads));
  ReshapeAndCacheKernel<<<grid, RowThreads(head_dim), 0, stream>>>(k, v, kv_heads, head_dim,
                                                                   slot_mapping, k_cache, v_cache);
}

void LaunchConvert(cudaStream_t stream, const float* x, int64_t count, DType to, void* out) {
  if (count > 0) ConvertKernel<<<Blocks(count), kThreads, 0, stream>>>(x, count, to, out);
}

}  // namespace llm::kernels::cuda
