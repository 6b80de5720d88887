// Plain scalar references for every op in kernels/cpu_ops.h, written for clarity, not speed.
// They accumulate in double where it matters and take the same arguments as the fast ops, so a
// test can call both on the same inputs. Single-threaded; never used on the serving path.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels::ref {

// Reads element i of a table stored as `type` and widens it to float.
float LoadAsF32(const void* data, DType type, int64_t i);

void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y);
// Q8_0 weights as ggml multiplies them: x quantized to Q8_0 blocks (amax / 127 scale as fp16,
// round half to even), exact integer block dot products, accumulated in double. (Matmul with
// Q8_0 instead multiplies the dequantized weights by the unrounded x.)
void MatmulQ8Activations(const float* x, int m, int k, const void* w, int n, const float* bias,
                         float* y);
void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out);
void Rope(float* x, const int32_t* positions, int tokens, int heads, const RopeLayout& layout,
          const float* inv_freq);
void SiluMul(const float* gate, const float* up, int64_t count, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out);
void Embedding(const int32_t* ids, int tokens, const void* table, DType table_type, int rows,
               int dim, int first_id, float* out);
void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                     const int32_t* slot_mapping, int block_size, float* k_cache, float* v_cache);
// Materialises every score of a query row, then a two-pass softmax in double.
void PagedAttention(const float* q, const float* k_cache, const float* v_cache,
                    const AttentionBatch& batch, const AttentionParams& params, float* out);

}  // namespace llm::kernels::ref
