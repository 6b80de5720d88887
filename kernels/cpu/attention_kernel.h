// PagedAttention internals: the per-task kernel, compiled once per ISA (attention_generic.cc,
// attention_avx2.cc, attention_avx512.cc) from attention_impl.h, and picked at run time.
// The kernel fuses every product into its sum (FMA; not the generic kernel compiled for an x86
// without it, see AttendKernel::fused) and never reassociates (explicit lanes, fixed reduction
// trees, libm exp), so every ISA with FMA gives bitwise the same result.
#pragma once

#include <cstdint>

#include "kernels/cpu_ops.h"

namespace llm::kernels::internal {

constexpr int kAttnMaxHeadDim = kMaxHeadDim;
constexpr int kAttnMaxBlockSize = kMaxBlockSize;
constexpr int kAttnMaxVectors = 32;  // (query row, q head) pairs per task; they share K/V loads

// A query's keys are taken in segments of whole cache blocks at fixed positions: each segment's
// softmax state (max, sum, weighted values) starts afresh, and the states are folded from the
// first segment to the last. The segments depend only on the query's position and the block
// size, so a decode row with more than its thread's share of a step's attention (one sequence,
// few kv heads, or a long context among short ones) can have its segments computed by different
// threads and folded after, with the bits of a row computed whole.
// Segments have at least kAttnSegmentKeys keys, and a query at most kAttnMaxSegments of them.
constexpr int kAttnSegmentKeys = 256;
constexpr int kAttnMaxSegments = 64;

// Cache blocks per segment for a query at position `pos`. (static: the ISA-flagged units compile
// it too, and the linker must not pick their copy for this one.)
static inline int SegmentBlocks(int pos, int block_size) {
  const int min_blocks = kAttnSegmentKeys > block_size ? kAttnSegmentKeys / block_size : 1;
  const int need = (pos / block_size + kAttnMaxSegments) / kAttnMaxSegments;  // ceil(blocks / max)
  return need > min_blocks ? need : min_blocks;
}

// Segments of a query at position `pos`: those of blocks 0 .. its own.
static inline int SegmentCount(int pos, int block_size) {
  return (pos / block_size) / SegmentBlocks(pos, block_size) + 1;
}

// What a task computes: its vectors' outputs (kWhole); or, for a task of one row, the states of
// segments [seg_lo, seg_hi) only, stored to `partial` (kSegments); or the outputs from the states
// of every segment in `partial` (kFinish).
enum class AttendMode { kWhole, kSegments, kFinish };

// Query rows [0, rows) of one sequence (consecutive positions), kv heads [kv0, kv0 + nkv), and of
// each kv head's group of q heads the `heads` heads from h_off on:
// rows * nkv * heads <= kAttnMaxVectors.
struct AttendTask {
  const float* q;    // q of the first row (all heads)
  float* out;        // out of the first row (all heads)
  int64_t row_size;  // q_heads * head_dim
  int rows;
  int kv0;
  int nkv;
  int h_off;
  int heads;
  int pos0;  // position of the first row; row r sits at pos0 + r
  const int32_t* table;
  const void* k_cache;  // params->kv_dtype elements: float or IEEE half (uint16_t)
  const void* v_cache;
  const AttentionParams* params;
  // Half caches, for a kernel without F16C: room for one block's K rows, then its V rows, of the
  // task's kv heads (2 * block_size * nkv * head_dim floats), widened there before use.
  float* widened;
  AttendMode mode;
  int seg_lo, seg_hi;  // kSegments
  // kSegments / kFinish: segment j's state of vector v at (j * vectors + v) * StateFloats(p).
  float* partial;
};

// Floats of one vector's segment state: max, sum, then head_dim weighted-value sums.
static inline int64_t StateFloats(const AttentionParams& p) {
  return 2 + static_cast<int64_t>(p.head_dim);
}

// Floats of AttendTask::widened a task of `nkv` kv heads needs.
inline int64_t WidenedFloats(const AttentionParams& p, int nkv) {
  return 2 * static_cast<int64_t>(p.block_size) * nkv * p.head_dim;
}

using AttendFn = void (*)(const AttendTask& task);

struct AttendKernel {
  const char* isa;
  AttendFn fn;
  // Products fused into their sums (FMA): every fused kernel gives bitwise the same result. Only
  // the generic kernel on an x86 CPU without FMA is not (attention_impl.h, kFused).
  bool fused;
};

AttendKernel GenericAttendKernel();
AttendKernel Avx2AttendKernel();    // only when the CPU has AVX2, F16C and FMA
AttendKernel Avx512AttendKernel();  // only when the CPU has AVX-512 F

// The kernels this CPU can run, best first (at most 3); returns how many.
int AvailableAttendKernels(AttendKernel out[3]);
// The kernel of ks[0 .. n) named `want` (LLM_ATTENTION_ISA: avx512, avx2 or generic, for
// benchmarks of other CPUs' paths); ks[0] when want is null, and when no kernel has that name
// (after a message on stderr).
AttendFn PickAttendKernel(const AttendKernel* ks, int n, const char* want);
// PagedAttention with a given kernel (PagedAttention uses the best available one).
void PagedAttentionWith(AttendFn fn, const float* q, const void* k_cache, const void* v_cache,
                        const AttentionBatch& batch, const AttentionParams& params, float* out);

}  // namespace llm::kernels::internal
