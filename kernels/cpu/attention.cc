// PagedAttention: splits the batch into tasks of (query rows of one sequence) x (q heads of one
// kv head), runs them on OpenMP threads with the best task kernel for this CPU. A query's result
// never depends on the other rows of a task or of the batch (see attention_impl.h), so the split
// and the thread count do not change any output bit.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/attention_kernel.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace internal {

int AvailableAttendKernels(AttendKernel out[3]) {
  __builtin_cpu_init();
  int n = 0;
  if (__builtin_cpu_supports("avx512f")) out[n++] = Avx512AttendKernel();
  if (__builtin_cpu_supports("avx2")) out[n++] = Avx2AttendKernel();
  out[n++] = GenericAttendKernel();
  return n;
}

namespace {

// Sequence that owns flat query row `row` (query_start is nondecreasing).
int SeqOfRow(const AttentionBatch& b, int row) {
  const int32_t* end = b.query_start + b.num_seqs + 1;
  return static_cast<int>(std::upper_bound(b.query_start, end, row) - b.query_start) - 1;
}

}  // namespace

void PagedAttentionWith(AttendFn fn, const float* q, const float* k_cache, const float* v_cache,
                        const AttentionBatch& batch, const AttentionParams& p, float* out) {
  if (batch.num_seqs <= 0 || p.head_dim > kAttnMaxHeadDim || p.block_size > kAttnMaxBlockSize) {
    return;
  }
  const int row0 = batch.query_start[0];
  const int rows = batch.query_start[batch.num_seqs] - row0;
  const int group = p.q_heads / p.kv_heads;
  const int heads_per = std::min(group, kAttnMaxVectors);
  const int head_tiles = (group + heads_per - 1) / heads_per;
  const int rows_per = kAttnMaxVectors / heads_per;
  const int row_tiles = (rows + rows_per - 1) / rows_per;
  const int64_t row_size = static_cast<int64_t>(p.q_heads) * p.head_dim;
  const int64_t tasks = static_cast<int64_t>(row_tiles) * p.kv_heads * head_tiles;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int rt = static_cast<int>(task / (p.kv_heads * head_tiles));
    const int rem = static_cast<int>(task % (p.kv_heads * head_tiles));
    AttendTask t{};
    t.row_size = row_size;
    t.kvh = rem / head_tiles;
    t.h0 = t.kvh * group + (rem % head_tiles) * heads_per;
    t.heads = std::min(heads_per, (t.kvh + 1) * group - t.h0);
    t.k_cache = k_cache;
    t.v_cache = v_cache;
    t.params = &p;
    // The row tile may span several sequences: one kernel call per sequence segment.
    const int end = std::min(row0 + rows, row0 + (rt + 1) * rows_per);
    for (int r = row0 + rt * rows_per; r < end;) {
      const int s = SeqOfRow(batch, r);
      const int seg_end = std::min(end, batch.query_start[s + 1]);
      const int q_len = batch.query_start[s + 1] - batch.query_start[s];
      t.q = q + r * row_size;
      t.out = out + r * row_size;
      t.rows = seg_end - r;
      t.pos0 = batch.context_len[s] - q_len + (r - batch.query_start[s]);
      t.table = batch.block_tables + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
      fn(t);
      r = seg_end;
    }
  }
}

}  // namespace internal

void PagedAttention(const float* q, const float* k_cache, const float* v_cache,
                    const AttentionBatch& batch, const AttentionParams& params, float* out) {
  static const internal::AttendFn fn = [] {
    internal::AttendKernel ks[3];
    internal::AvailableAttendKernels(ks);
    return ks[0].fn;
  }();
  internal::PagedAttentionWith(fn, q, k_cache, v_cache, batch, params, out);
}

}  // namespace llm::kernels
