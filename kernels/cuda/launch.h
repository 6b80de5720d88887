// Host-side launchers of the CUDA kernels, each enqueued on `stream` (internal to kernels/cuda:
// this header names CUDA types). Contracts are those of the kernels::Backend op of the same name
// (kernels/backend.h); pointers are device memory. A launcher only enqueues: launch errors are
// picked up by the backend (cudaGetLastError) after the call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/backend.h"

namespace llm::kernels::cuda {

void LaunchRmsNorm(cudaStream_t stream, const float* x, const float* weight, int rows, int dim,
                   float eps, float* out);
void LaunchAddRmsNorm(cudaStream_t stream, float* residual, const float* x, const float* weight,
                      int rows, int dim, float eps, float* out);
void LaunchRope(cudaStream_t stream, float* x, const int32_t* positions, int tokens, int heads,
                const RopeLayout& layout, const float* inv_freq);
void LaunchSiluMul(cudaStream_t stream, const float* gate, const float* up, int64_t count,
                   float* out);
void LaunchGeluTanhMul(cudaStream_t stream, const float* gate, const float* up, int64_t count,
                       float* out);
void LaunchScale(cudaStream_t stream, float* x, float s, int64_t count);
void LaunchAdd(cudaStream_t stream, float* x, const float* y, int64_t count);
void LaunchAddBias(cudaStream_t stream, float* x, const float* bias, int rows, int cols);
void LaunchScatterAddRows(cudaStream_t stream, const float* src, const int32_t* rows,
                          const float* scale, int count, int cols, float* dst);
void LaunchGatherRows(cudaStream_t stream, const float* src, const int32_t* rows, int count,
                      int cols, float* dst);
// F32, F16 or BF16 tables.
void LaunchEmbedding(cudaStream_t stream, const int32_t* ids, int tokens, const void* table,
                     DType format, int rows, int cols, int first_id, float* out);
void LaunchReshapeAndCache(cudaStream_t stream, const float* k, const float* v, int tokens,
                           int kv_heads, int head_dim, const int32_t* slot_mapping, int block_size,
                           float* k_cache, float* v_cache);
// out[i] = x[i] rounded to `to` (F16 or BF16), for the tensor-core GEMM's activation operand.
void LaunchConvert(cudaStream_t stream, const float* x, int64_t count, DType to, void* out);

// Paged attention with `partitions` split-K partitions of at least `min_partition_keys` keys
// (index_math.h ChoosePartitions, PartitionKeys); `workspace` holds AttentionWorkspaceFloats(...)
// floats when partitions > 1.
void LaunchPagedAttention(cudaStream_t stream, const float* q, const float* k_cache,
                          const float* v_cache, const AttentionBatch& batch,
                          const AttentionParams& params, int partitions, int min_partition_keys,
                          float* workspace, float* out);

}  // namespace llm::kernels::cuda
