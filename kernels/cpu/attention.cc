// PagedAttention: splits the batch into tasks of (query rows of one sequence) x (q heads of one
// kv head), runs them on OpenMP threads with the best task kernel for this CPU. A query's result
// never depends on the other rows of a task or of the batch (see attention_impl.h), so the split
// and the thread count do not change any output bit; nor does cutting a long decode row's keys
// into segments computed by several threads (RunTasks).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
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
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("fma")) {
    out[n++] = Avx2AttendKernel();
  }
  out[n++] = GenericAttendKernel();
  return n;
}

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
// are contiguous: whole blocks stream from memory) as long as every thread gets a task, a decode
// row counting one task per segment of its keys (RunTasks). (Four tasks a thread, the
// rule before, cut one sequence's task to one kv head: its rows are kv_heads * head_dim floats
// apart, 4 KiB for Llama-3-8B, and a stride of a page defeats the hardware prefetcher: one
// sequence at 4096 keys took 3.0-5.5 ms a layer against 2.2-2.7 with two tasks of four kv heads,
// and 2.1-2.5 with one task of eight cut into 16 segments, 2 threads.) Prefill rows of one
// sequence share every K/V block, so a task takes several rows.
Split ChooseSplit(const AttentionBatch& batch, const AttentionParams& p, int rows) {
  Split sp{};
  const int group = p.q_heads / p.kv_heads;
  sp.heads_per = std::min(group, kAttnMaxVectors);
  sp.head_tiles = (group + sp.heads_per - 1) / sp.heads_per;
  sp.kv_per = sp.head_tiles > 1 ? 1 : std::min(p.kv_heads, kAttnMaxVectors / sp.heads_per);
  const bool decode_heavy = rows < 2 * batch.num_seqs;
  if (!decode_heavy) sp.kv_per = 1;
  const int64_t want_tasks = omp_get_max_threads();
  if (sp.kv_per > 1 &&
      static_cast<int64_t>(rows) * ((p.kv_heads + sp.kv_per - 1) / sp.kv_per) < want_tasks) {
    int64_t units = 0;  // rows, a decode row counting its segments
    for (int s = 0; s < batch.num_seqs; ++s) {
      const int q_len = batch.query_start[s + 1] - batch.query_start[s];
      units += q_len == 1 ? SegmentCount(batch.context_len[s] - 1, p.block_size) : q_len;
    }
    while (sp.kv_per > 1 && units * ((p.kv_heads + sp.kv_per - 1) / sp.kv_per) < want_tasks) {
      sp.kv_per = (sp.kv_per + 1) / 2;
    }
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

namespace {

// Everything a task is cut from.
struct TaskSource {
  const float* q;
  const void* k_cache;
  const void* v_cache;
  const AttentionBatch* batch;
  const AttentionParams* p;
  float* out;
  Split sp;
  int per_row;  // tasks per row: kv tiles x head tiles
};

// The task of flat row r (the first of its tile of rows) and index `rem` within the row.
AttendTask MakeTask(const TaskSource& src, int r, int s, int rem) {
  const AttentionBatch& batch = *src.batch;
  const AttentionParams& p = *src.p;
  const Split& sp = src.sp;
  const int64_t row_size = static_cast<int64_t>(p.q_heads) * p.head_dim;
  const int in_seq = r - batch.query_start[s];
  const int q_len = batch.query_start[s + 1] - batch.query_start[s];
  AttendTask t{};
  t.q = src.q + r * row_size;
  t.out = src.out + r * row_size;
  t.row_size = row_size;
  t.rows = std::min(sp.rows_per, q_len - in_seq);
  t.kv0 = (rem / sp.head_tiles) * sp.kv_per;
  t.nkv = std::min(sp.kv_per, p.kv_heads - t.kv0);
  t.h_off = (rem % sp.head_tiles) * sp.heads_per;
  t.heads = std::min(sp.heads_per, p.q_heads / p.kv_heads - t.h_off);
  t.pos0 = batch.context_len[s] - q_len + in_seq;
  t.table = batch.block_tables + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
  t.k_cache = src.k_cache;
  t.v_cache = src.v_cache;
  t.params = &p;
  t.mode = AttendMode::kWhole;
  return t;
}

// Runs task t (kWhole or kSegments) on this thread, with this thread's buffer for a half cache.
void RunTask(AttendFn fn, AttendTask& t) {
  if (t.params->kv_dtype == DType::kF16) {
    thread_local std::vector<float> widened;
    const size_t need = static_cast<size_t>(WidenedFloats(*t.params, t.nkv));
    if (widened.size() < need) widened.resize(need);
    t.widened = widened.data();
  }
  fn(t);
}

// Keys each of a task's vectors sees, summed: its share of the work.
int64_t TaskWork(const AttendTask& t) {
  const int window = t.params->sliding_window;
  int64_t keys = 0;
  for (int r = 0; r < t.rows; ++r) {
    const int seen = t.pos0 + r + 1;
    keys += window > 0 && window < seen ? window : seen;
  }
  return keys * t.nkv * t.heads;
}

// Runs every task of the batch: (row tile, kv tile, head tile) in order, kv tile varying fastest
// so that threads work on the same sequence's cache blocks at the same time. A one-row task with
// more than its fair share of the step's work (one sequence decoding, few kv heads as in MQA, or
// one long context among short ones) would keep one thread busy while the others wait: its keys
// are cut into its segments, one job each, spread over the threads with the other tasks; then
// each such task folds its segments' states.
void RunTasks(AttendFn fn, const TaskSource& src) {
  const AttentionBatch& batch = *src.batch;
  const int threads = omp_get_max_threads();
  bool may_cut = threads > 1;  // only a context past one segment can be cut
  bool long_row = false;
  for (int s = 0; s < batch.num_seqs && may_cut && !long_row; ++s) {
    long_row = batch.context_len[s] > kAttnSegmentKeys;
  }
  may_cut = may_cut && long_row;
  struct Job {
    int task, seg;  // seg < 0: the whole task
  };
  // The calling thread's, reused across calls; the team reads them through these references (a
  // thread_local named inside the parallel region would be each thread's own).
  thread_local std::vector<AttendTask> tasks_of_caller;
  thread_local std::vector<int64_t> work_of_caller;
  thread_local std::vector<Job> jobs_of_caller;
  thread_local std::vector<std::pair<int, int64_t>> split_of_caller;
  std::vector<AttendTask>& tasks = tasks_of_caller;
  std::vector<int64_t>& work = work_of_caller;
  std::vector<Job>& jobs = jobs_of_caller;
  std::vector<std::pair<int, int64_t>>& split = split_of_caller;  // cut tasks, states' offsets
  tasks.clear();
  work.clear();
  jobs.clear();
  split.clear();
  int64_t total = 0;
  for (int s = 0; s < batch.num_seqs; ++s) {
    for (int r = batch.query_start[s]; r < batch.query_start[s + 1]; r += src.sp.rows_per) {
      for (int rem = 0; rem < src.per_row; ++rem) {
        tasks.push_back(MakeTask(src, r, s, rem));
        if (may_cut) {
          work.push_back(TaskWork(tasks.back()));
          total += work.back();
        }
      }
    }
  }
  int64_t partial_floats = 0;
  const int64_t state = StateFloats(*src.p);
  for (int i = 0; i < static_cast<int>(tasks.size()); ++i) {
    const AttendTask& t = tasks[i];
    const int segments = may_cut && t.rows == 1 ? SegmentCount(t.pos0, src.p->block_size) : 1;
    if (segments < 2 || work[i] * threads <= total) {
      jobs.push_back({i, -1});
      continue;
    }
    split.emplace_back(i, partial_floats);
    partial_floats += segments * static_cast<int64_t>(t.nkv) * t.heads * state;
    for (int j = 0; j < segments; ++j) jobs.push_back({i, j});
  }
  thread_local std::vector<float> partials_of_caller;
  std::vector<float>& partials = partials_of_caller;
  if (partials.size() < static_cast<size_t>(partial_floats)) partials.resize(partial_floats);
  for (const auto& [i, offset] : split) tasks[i].partial = partials.data() + offset;
  const int64_t njobs = static_cast<int64_t>(jobs.size());
#pragma omp parallel for schedule(dynamic, 1) if (njobs > 1)
  for (int64_t j = 0; j < njobs; ++j) {
    AttendTask t = tasks[jobs[j].task];
    if (jobs[j].seg >= 0) {
      t.mode = AttendMode::kSegments;
      t.seg_lo = jobs[j].seg;
      t.seg_hi = jobs[j].seg + 1;
    }
    RunTask(fn, t);
  }
  const int nsplit = static_cast<int>(split.size());
#pragma omp parallel for schedule(static) if (nsplit > 1)
  for (int i = 0; i < nsplit; ++i) {
    AttendTask t = tasks[split[i].first];
    t.mode = AttendMode::kFinish;
    fn(t);
  }
}

}  // namespace

void PagedAttentionWith(AttendFn fn, const float* q, const void* k_cache, const void* v_cache,
                        const AttentionBatch& batch, const AttentionParams& p, float* out) {
  if (batch.num_seqs <= 0 || p.head_dim > kAttnMaxHeadDim || p.block_size > kAttnMaxBlockSize ||
      (p.kv_dtype != DType::kF32 && p.kv_dtype != DType::kF16)) {
    return;
  }
  const int row0 = batch.query_start[0];
  const int rows = batch.query_start[batch.num_seqs] - row0;
  TaskSource src{q, k_cache, v_cache, &batch, &p, out, ChooseSplit(batch, p, rows), 0};
  src.per_row = src.sp.kv_tiles * src.sp.head_tiles;
  RunTasks(fn, src);
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
