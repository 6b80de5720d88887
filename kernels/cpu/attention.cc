// PagedAttention: splits the batch into tasks of (query rows of one sequence) x (q heads of one
// kv head), runs them on OpenMP threads with the best task kernel for this CPU. A query's result
// never depends on the other rows of a task or of the batch (see attention_impl.h), so the split
// and the thread count do not change any output bit.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

#include "kernels/cpu/attention_kernel.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace internal {

int AvailableAttendKernels(AttendKernel out[3]) {
  __builtin_cpu_init();
  int n = 0;
  if (__builtin_cpu_supports("avx512f")) out[n++] = Avx512AttendKernel();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
    out[n++] = Avx2AttendKernel();
  }
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

AttendFn PickAttendKernel(const AttendKernel* ks, int n, const char* want) {
  if (want == nullptr) return ks[0].fn;
  std::string names;
  for (int i = 0; i < n; ++i) {
    if (std::strcmp(ks[i].isa, want) == 0) return ks[i].fn;
    names += std::string(names.empty() ? "" : ", ") + ks[i].isa;
  }
  std::fprintf(
      stderr, "LLM_ATTENTION_ISA: '%.64s' is not available on this CPU (available: %s); using %s\n",
      want, names.c_str(), ks[0].isa);
  return ks[0].fn;
}

// How a batch is cut into tasks: every task has rows_per rows of one sequence (fewer at the end of
// a sequence), kv_per kv heads and heads_per q heads of each of them.
struct Split {
  int heads_per, head_tiles, kv_per, kv_tiles, rows_per;
};

// Decode rows share nothing with each other, so a task takes several kv heads (a cache row's heads
// are contiguous: whole blocks stream from memory) as long as every thread gets a task. (Four
// tasks a thread, the rule before, cut one sequence's task to one kv head: its rows are
// kv_heads * head_dim floats apart, 4 KiB for Llama-3-8B, and a stride of a page defeats the
// hardware prefetcher: one sequence at 4096 keys took 3.0-5.5 ms a layer against 2.2-2.7 now,
// 2 threads.) Prefill rows of one sequence share every K/V block, so a task takes several rows.
Split ChooseSplit(const AttentionBatch& batch, const AttentionParams& p, int rows) {
  Split sp{};
  const int group = p.q_heads / p.kv_heads;
  sp.heads_per = std::min(group, kAttnMaxVectors);
  sp.head_tiles = (group + sp.heads_per - 1) / sp.heads_per;
  sp.kv_per = sp.head_tiles > 1 ? 1 : std::min(p.kv_heads, kAttnMaxVectors / sp.heads_per);
  const bool decode_heavy = rows < 2 * batch.num_seqs;
  if (!decode_heavy) sp.kv_per = 1;
  const int64_t want_tasks = omp_get_max_threads();
  while (sp.kv_per > 1 &&
         static_cast<int64_t>(rows) * ((p.kv_heads + sp.kv_per - 1) / sp.kv_per) < want_tasks) {
    sp.kv_per = (sp.kv_per + 1) / 2;
  }
  // A half cache's task widens a block of its kv heads into a per-thread buffer: keep that
  // within 1 MiB (nothing changes an output but the buffer's size).
  while (p.kv_dtype == DType::kF16 && sp.kv_per > 1 && WidenedFloats(p, sp.kv_per) > (1 << 18)) {
    sp.kv_per = (sp.kv_per + 1) / 2;
  }
  sp.kv_tiles = (p.kv_heads + sp.kv_per - 1) / sp.kv_per;
  sp.rows_per = std::max(1, kAttnMaxVectors / (sp.heads_per * sp.kv_per));
  return sp;
}

void PagedAttentionWith(AttendFn fn, const float* q, const void* k_cache, const void* v_cache,
                        const AttentionBatch& batch, const AttentionParams& p, float* out) {
  if (batch.num_seqs <= 0 || p.head_dim > kAttnMaxHeadDim || p.block_size > kAttnMaxBlockSize ||
      (p.kv_dtype != DType::kF32 && p.kv_dtype != DType::kF16)) {
    return;
  }
  const int row0 = batch.query_start[0];
  const int rows = batch.query_start[batch.num_seqs] - row0;
  const int group = p.q_heads / p.kv_heads;
  const Split sp = ChooseSplit(batch, p, rows);
  const int64_t row_size = static_cast<int64_t>(p.q_heads) * p.head_dim;
  const int per_row = sp.kv_tiles * sp.head_tiles;
  // One task index per (row, kv tile, head tile), kv tile varying fastest so that threads work on
  // the same sequence's cache blocks at the same time. Only the first row of each tile of
  // rows_per rows of a sequence does work (a tile never spans two sequences).
  const int64_t tasks = static_cast<int64_t>(rows) * per_row;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int r = row0 + static_cast<int>(task / per_row);
    const int s = SeqOfRow(batch, r);
    const int in_seq = r - batch.query_start[s];
    if (in_seq % sp.rows_per != 0) continue;
    const int q_len = batch.query_start[s + 1] - batch.query_start[s];
    const int rem = static_cast<int>(task % per_row);
    AttendTask t{};
    t.q = q + r * row_size;
    t.out = out + r * row_size;
    t.row_size = row_size;
    t.rows = std::min(sp.rows_per, q_len - in_seq);
    t.kv0 = (rem / sp.head_tiles) * sp.kv_per;
    t.nkv = std::min(sp.kv_per, p.kv_heads - t.kv0);
    t.h_off = (rem % sp.head_tiles) * sp.heads_per;
    t.heads = std::min(sp.heads_per, group - t.h_off);
    t.pos0 = batch.context_len[s] - q_len + in_seq;
    t.table = batch.block_tables + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
    t.k_cache = k_cache;
    t.v_cache = v_cache;
    t.params = &p;
    if (p.kv_dtype == DType::kF16) {
      thread_local std::vector<float> widened;
      const size_t need = static_cast<size_t>(WidenedFloats(p, t.nkv));
      if (widened.size() < need) widened.resize(need);
      t.widened = widened.data();
    }
    fn(t);
  }
}

}  // namespace internal

void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                    const AttentionBatch& batch, const AttentionParams& params, float* out) {
  static const internal::AttendFn fn = [] {
    internal::AttendKernel ks[3];
    const int n = internal::AvailableAttendKernels(ks);
    return internal::PickAttendKernel(ks, n, std::getenv("LLM_ATTENTION_ISA"));
  }();
  internal::PagedAttentionWith(fn, q, k_cache, v_cache, batch, params, out);
}

}  // namespace llm::kernels
