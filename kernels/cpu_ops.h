// CPU compute kernels: the small set of ops a transformer forward pass needs.
// Every op has a plain scalar reference in kernels/reference_ops.h that the tests compare with.
// All activations are float32, row-major. Weights may be F32, F16, BF16 or a block format
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K; Matmul, Embedding). The CPU backend
// (kernels/backend.h) is a thin layer over these functions. Threading: ops that are worth it run on
// OpenMP threads (omp_set_num_threads decides how many); none allocates memory on the heap, so a
// steady-state forward step allocates nothing.
#pragma once

#include <cstdint>

#include <string>

#include "common/dtype.h"
#include "common/status.h"
#include "kernels/backend.h"

namespace llm::kernels {

// y[m, n] = x[m, k] · W[n, k]^T (+ bias[n] when bias != nullptr).
// W is row-major [n, k] in `w_type` (the layout of a Hugging Face nn.Linear weight).
// Accumulates in float32 (16-bit weights are widened exactly). Block-format weights (k a multiple
// of the block size, each row k / BlockSize blocks) are multiplied as ggml does: the rows of x
// are quantized to Q8_0 (Q8_0 and the legacy formats) or Q8_K (K-quants) and the blocks' integer
// dot products are exact (kernels/cpu/q8_0.h, quant_blocks.h); every ISA gives the same bits. Batch
// invariant: a row of y is bitwise the same whatever m, the row's index in x and the number of
// threads (k is never split). x and y must not overlap.
void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y);

// Several matmuls of the same input rows (q, k and v; gate and up): for each job,
// y[m, n] = x[m, k] · W^T (+ bias), each bitwise what Matmul gives. The input is quantized once
// per form the weights need, and all the jobs' panels share one parallel loop, so the threads
// meet at one barrier instead of one per matmul (where a thread slowed by its memory channel
// or another process holds the others). Jobs beyond kMaxSameInputJobs run in further groups.
struct MatmulJob {
  const void* w;
  DType type;
  int n;
  const float* bias;  // may be null
  float* y;
};
constexpr int kMaxSameInputJobs = 4;
void MatmulSameInput(const float* x, int m, int k, const MatmulJob* jobs, int count);

// The layout the matmul kernels in use read `t` fastest in: DType::kQ4_0Packed ... kQ8_0Packed
// for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; for F16 / BF16 kF16RowPanels / kBF16RowPanels on the AVX-512
// and AVX2 sets (f16_row_panels.h), kF16Packed / kBF16Packed with LLM_F16_ROW_PANELS=0 or with
// the AMX tiles on (LLM_AMX_F16); kQ3_KPacked for Q3_K on the AVX-512 sets; for Q1_0
// kQ1_0RowPanels where the set has its table GEMV (AVX-512 VNNI with VBMI and BITALG;
// q1_0_row_panels.h), else (and with LLM_Q1_0_ROW_PANELS=0) kQ1_0Packed; all unless
// LLM_PACK_WEIGHTS=0; else `t` itself.
// Matmul accepts the packed layouts on every kernel set (a set without a packed panel unpacks
// them per panel).
DType MatmulPackedFormat(DType t);
// Repacks rows of F16, BF16, Q3_K, Q1_0 or the 32-block formats into the layout
// MatmulPackedFormat(t) names (kernels/cpu/f16_row_panels.h, f16_packed.h, kquant_packed.h,
// legacy_packed.h, q1_0_row_panels.h), on OpenMP threads.
void PackRows(DType t, const void* src, int64_t rows, int cols, void* dst);

// Block formats (Q8_0, Q4_0 ... Q6_K; cols a multiple of BlockSize(t)), row by row:
// QuantizeRows runs llama.cpp's reference quantizers on float rows (on OpenMP threads),
// DequantizeRows ggml's dequantizers; FillRandomBlocks writes `blocks` blocks of random quants
// with small scales (dummy weights of a quantized model; the same seed gives the same bytes).
void QuantizeRows(DType t, const float* x, int64_t rows, int64_t cols, void* dst);
void DequantizeRows(DType t, const void* src, int64_t rows, int64_t cols, float* dst);
void FillRandomBlocks(DType t, uint64_t seed, void* dst, int64_t blocks);

// out[t, :] = x[t, :] / sqrt(mean(x^2) + eps) * weight[:], for t < rows. In place is allowed.
void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out);
// residual[t] += x[t], then out[t] = RmsNorm(residual[t]) (the same bits as Add then RmsNorm).
void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim, float eps,
                float* out);

// Rotary embedding, in place, on x[t, head, :layout.head_dim] for `heads` heads per token: the
// first layout.rotary_dim lanes rotate in rotate-half pairs (i, i + rotary_dim / 2) (Hugging
// Face / NEOX) or, interleaved, (2i, 2i + 1) (GLM); the others pass through. inv_freq has
// rotary_dim / 2 entries. Precondition: 0 < rotary_dim <= head_dim <= kMaxHeadDim, rotary_dim
// even (otherwise x is left as is).
void Rope(float* x, const int32_t* positions, int tokens, int heads, const RopeLayout& layout,
          const float* inv_freq);

// out[t, :] = table[ids[t] - first_id, :], table is [rows, dim] in `table_type`.
// Ids outside [first_id, first_id + rows) give a zero row (a vocab-parallel shard's foreign ids).
void Embedding(const int32_t* ids, int tokens, const void* table, DType table_type, int rows,
               int dim, int first_id, float* out);

// dst[i, :] = src[rows[i], :] for i < count.
void GatherRows(const float* src, const int32_t* rows, int count, int cols, float* dst);

// Writes each new token's K and V into the paged cache. Cache layout:
// [num_blocks, block_size, kv_heads, head_dim]. Token t goes to slot slot_mapping[t]
// (block = slot / block_size, offset = slot % block_size); a negative slot is skipped (padding).
void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                     const int32_t* slot_mapping, int block_size, float* k_cache, float* v_cache);
// The same into a cache of IEEE half floats, each value rounded to nearest even (F32ToF16).
void ReshapeAndCacheF16(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                        const int32_t* slot_mapping, int block_size, uint16_t* k_cache,
                        uint16_t* v_cache);

// The CPU kernels' limits (kernels/backend.h reports them as capabilities).
constexpr int kMaxHeadDim = 512;
constexpr int kMaxBlockSize = 256;

// out[t, h, :] = softmax_j(scale * q[t, h] · K[j, h / group]) · V[j, h / group] over the keys the
// query may see (AttentionBatch in kernels/backend.h). q and out are
// [total_query_rows, q_heads, head_dim].
// Preconditions: head_dim <= kMaxHeadDim and block_size <= kMaxBlockSize (otherwise nothing is
// written); every block a query needs is in its table. query_start values index rows of q and
// out directly. Uses about 100 KB of stack per thread (no heap).
// Batch invariant: a query row's output is bitwise the same whatever else is in the batch, how
// its sequence's queries were chunked, and the thread count (keys are visited in a fixed order).
// The caches hold params.kv_dtype elements: float, or IEEE half (uint16_t). Half values are
// widened exactly, so a half cache gives bitwise the output of a float cache holding the same
// (rounded) values. A half cache takes a per-thread buffer of one block's K and V rows.
void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                    const AttentionBatch& batch, const AttentionParams& params, float* out);

// out[i] = silu(gate[i]) * up[i] for i < count (gate and up computed by separate matmuls).
void SiluMul(const float* gate, const float* up, int64_t count, float* out);
// out = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * up
void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out);
void Scale(float* x, float s, int64_t count);
void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count, int cols,
                    float* dst);
// x[i] += y[i] (residual connections).
void Add(float* x, const float* y, int64_t count);
// x[r, :] += bias[:] for r < rows.
void AddBias(float* x, const float* bias, int rows, int cols);

// Names the SIMD path Matmul uses on this CPU ("avx512-amx", "avx512-vnni", "avx512", "avx2-fma",
// "scalar"): the best one the CPU has, or the one named by the environment variable LLM_MATMUL_ISA
// if the CPU has it. Results differ between paths in the last bits (lane count, FMA); on one
// machine they are fixed.
const char* MatmulIsa();
// From how many input rows that path runs F16 / BF16 weights on AMX-BF16 tiles: 0 never (the
// default), 1 at every batch size (LLM_AMX_F16=1: batch-invariant), more (LLM_AMX_F16=batched)
// from that many rows on, so that a row's last bits depend on the size of its batch.
int MatmulFloatTilesMinM();
// Chooses the SIMD path by name ("avx512-amx", "avx512-vnni", "avx512", "avx2-fma", "scalar") or
// "auto" (the best one, or LLM_MATMUL_ISA's); InvalidArgument naming engine.matmul_isa when the CPU
// lacks it. Call at start-up, before the first Matmul.
Status SelectMatmulIsa(const std::string& isa);

}  // namespace llm::kernels
