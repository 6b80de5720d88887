// CPU compute kernels: the small set of ops a transformer forward pass needs.
// Every op has a plain scalar reference in kernels/reference_ops.h that the tests compare with.
// All activations are float32, row-major. Weights may be F32, F16 or BF16.
// Threading: ops that are worth it run on OpenMP threads (omp_set_num_threads decides how many);
// none allocates memory on the heap, so a steady-state forward step allocates nothing.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llm::kernels {

// y[m, n] = x[m, k] · W[n, k]^T (+ bias[n] when bias != nullptr).
// W is row-major [n, k] in `w_type` (the layout of a Hugging Face nn.Linear weight).
// Accumulates in float32 (16-bit weights are widened exactly). Batch invariant: a row of y is
// bitwise the same whatever m, the row's index in x and the number of threads (k is never split).
// x and y must not overlap.
void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y);

// out[t, :] = x[t, :] / sqrt(mean(x^2) + eps) * (weight_offset + weight[:]), for t < rows.
// weight_offset is 0 for Llama-style RMSNorm and 1 for Gemma's (1 + w). In place is allowed.
void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float weight_offset,
             float* out);

// Rotary embedding, in place, on x[t, head, :head_dim] for `heads` heads per token.
// Only the first rotary_dim dims rotate. inv_freq has rotary_dim / 2 entries.
// Precondition: 0 < rotary_dim <= head_dim and rotary_dim <= 512 (otherwise x is left as is).
// interleaved = false: rotate-half pairs (i, i + rotary_dim/2) (Hugging Face / NEOX);
// interleaved = true: pairs (2i, 2i + 1) (GPT-J / llama.cpp's llama arch).
void Rope(float* x, const int32_t* positions, int tokens, int heads, int head_dim, int rotary_dim,
          const float* inv_freq, bool interleaved);

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i], gate_up is [tokens, 2 * inter].
void SiluAndMul(const float* gate_up, int tokens, int inter, float* out);
// Same with tanh-approximated GELU (Gemma's gelu_pytorch_tanh).
void GeluTanhAndMul(const float* gate_up, int tokens, int inter, float* out);

// out[t, :] = table[ids[t], :] * scale. table is [vocab, dim] in `table_type`.
// Ids outside [0, vocab) give a zero row (they are rejected before reaching here).
void Embedding(const int32_t* ids, int tokens, const void* table, DType table_type, int vocab,
               int dim, float scale, float* out);

// Numerically stable softmax over each row, in place. A row that is all -inf becomes all zeros.
void Softmax(float* x, int rows, int cols);

// Writes each new token's K and V into the paged cache. Cache layout:
// [num_blocks, block_size, kv_heads, head_dim]. Token t goes to slot slot_mapping[t]
// (block = slot / block_size, offset = slot % block_size); a negative slot is skipped (padding).
void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                     const int32_t* slot_mapping, int block_size, float* k_cache, float* v_cache);

// A flat varlen batch: sequence s owns query rows [query_start[s], query_start[s + 1]) and has
// context_len[s] tokens in the cache including those new rows, so its query row j sits at
// position context_len[s] - q_len + j and attends causally to positions <= its own.
// block_tables is [num_seqs, max_blocks_per_seq]: logical block i of sequence s is physical
// block block_tables[s * max_blocks_per_seq + i].
struct AttentionBatch {
  int num_seqs = 0;
  const int32_t* query_start = nullptr;  // num_seqs + 1 entries
  const int32_t* context_len = nullptr;  // num_seqs entries
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
};

struct AttentionParams {
  int q_heads = 0;
  int kv_heads = 0;  // q_heads % kv_heads == 0 (GQA/MQA)
  int head_dim = 0;
  int block_size = 16;
  float scale = 1.0f;       // applied to q·k
  int sliding_window = 0;   // > 0: query at p sees keys at p - window < j <= p
  float logit_softcap = 0;  // > 0: s = softcap * tanh(s / softcap) after scaling
};

// out[t, h, :] = softmax_j(scale * q[t, h] · K[j, h / group]) · V[j, h / group] over the keys the
// query may see. q and out are [total_query_rows, q_heads, head_dim].
// Preconditions: head_dim <= 512 and block_size <= 256 (otherwise nothing is written); every
// block a query needs is in its table. query_start values index rows of q and out directly.
// Uses about 100 KB of stack per thread (no heap).
// Batch invariant: a query row's output is bitwise the same whatever else is in the batch, how
// its sequence's queries were chunked, and the thread count (keys are visited in a fixed order).
void PagedAttention(const float* q, const float* k_cache, const float* v_cache,
                    const AttentionBatch& batch, const AttentionParams& params, float* out);

// Names the SIMD path Matmul uses on this CPU ("avx512", "avx2-fma", "scalar"): the best one the
// CPU has, or the one named by the environment variable LLM_MATMUL_ISA if the CPU has it.
// Results differ between paths in the last bits (lane count, FMA); on one machine they are fixed.
const char* MatmulIsa();

}  // namespace llm::kernels
