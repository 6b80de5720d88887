// Index math and per-element arithmetic shared by the CUDA kernels (kernels/cuda/*.cu) and their
// CPU tests (tests/kernels/cuda_index_math_test.cc): every offset a kernel computes, and the
// online-softmax steps of paged attention, are these functions, so a CPU test that composes
// them as the kernel does checks the kernel's logic without a GPU.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define LLM_HOST_DEVICE __host__ __device__
#else
#define LLM_HOST_DEVICE
#endif

namespace llm::kernels::cuda {

// Blocks of `threads` needed to cover `count` items.
LLM_HOST_DEVICE inline int64_t GridFor(int64_t count, int threads) {
  return (count + threads - 1) / threads;
}

// The physical KV-cache slot of token position `pos` through a block table.
LLM_HOST_DEVICE inline int64_t SlotOf(const int32_t* block_table, int pos, int block_size) {
  return static_cast<int64_t>(block_table[pos / block_size]) * block_size + pos % block_size;
}

// Element offset of (slot, kv head) in a cache laid out [num_blocks, block_size, kv_heads,
// head_dim]: a slot is block * block_size + offset, so slots are consecutive rows.
LLM_HOST_DEVICE inline int64_t CacheOffset(int64_t slot, int kv_heads, int head_dim, int head) {
  return (slot * kv_heads + head) * head_dim;
}

// The sequence owning flat query row `row`: the s with query_start[s] <= row <
// query_start[s + 1] (binary search; query_start is non-decreasing with num_seqs + 1 entries).
// Empty sequences (no rows) are never returned.
LLM_HOST_DEVICE inline int SequenceOfRow(const int32_t* query_start, int num_seqs, int row) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Token position of flat query row `row` of sequence `s`: its new rows are the last q_len of
// context_len[s] tokens.
LLM_HOST_DEVICE inline int QueryPosition(const int32_t* query_start, const int32_t* context_len,
                                         int s, int row) {
  const int q_len = query_start[s + 1] - query_start[s];
  return context_len[s] - q_len + (row - query_start[s]);
}

// A half-open range of key positions [begin, end).
struct KeyRange {
  int begin = 0;
  int end = 0;
  LLM_HOST_DEVICE bool empty() const { return end <= begin; }
};

// Keys a query at `pos` attends to: causal, and with a sliding window the last `window`
// positions only (p - window < j <= p).
LLM_HOST_DEVICE inline KeyRange VisibleKeys(int pos, int sliding_window) {
  KeyRange r;
  r.end = pos + 1;
  r.begin = sliding_window > 0 && pos - sliding_window + 1 > 0 ? pos - sliding_window + 1 : 0;
  return r;
}

// Split-K (flash-decoding): partition p covers positions [p * tokens, (p + 1) * tokens); the
// part of `visible` inside it (possibly empty).
LLM_HOST_DEVICE inline KeyRange PartitionKeys(KeyRange visible, int partition,
                                              int partition_tokens) {
  KeyRange r;
  const int lo = partition * partition_tokens, hi = lo + partition_tokens;
  r.begin = visible.begin > lo ? visible.begin : lo;
  r.end = visible.end < hi ? visible.end : hi;
  return r;
}

// Partitions needed for contexts of at most `max_context` tokens (at least 1).
LLM_HOST_DEVICE inline int NumPartitions(int max_context, int partition_tokens) {
  const int n = (max_context + partition_tokens - 1) / partition_tokens;
  return n > 0 ? n : 1;
}

// Split-K partitions for one attention launch: one (each block walks all its keys) when the
// (row, head) pairs alone fill the GPU (`sm_count` multiprocessors, a few blocks each) or when
// the partials would need more than `max_workspace_floats`; otherwise enough partitions of
// `partition_tokens` to cover the longest possible context.
LLM_HOST_DEVICE inline int ChoosePartitions(int tokens, int heads, int head_dim, int max_context,
                                            int sm_count, int partition_tokens,
                                            int64_t max_workspace_floats) {
  const int64_t pairs = static_cast<int64_t>(tokens) * heads;
  if (pairs >= 4LL * sm_count) return 1;
  const int n = NumPartitions(max_context, partition_tokens);
  if (n <= 1) return 1;
  if (pairs * n * (head_dim + 2) > max_workspace_floats) return 1;
  return n;
}

// Floats of split-K partials for `partitions` > 1: per (row, head, partition) the head_dim
// accumulator, the max and the sum.
LLM_HOST_DEVICE inline int64_t AttentionWorkspaceFloats(int tokens, int heads, int head_dim,
                                                        int partitions) {
  return partitions <= 1 ? 0 : static_cast<int64_t>(tokens) * heads * partitions * (head_dim + 2);
}

// The two lanes RoPE pair i rotates: rotate-half pairs (i, i + rotary_dim / 2), interleaved
// (GPT-J, GLM) pairs (2i, 2i + 1).
struct LanePair {
  int a = 0;
  int b = 0;
};
LLM_HOST_DEVICE inline LanePair RopeLanes(int i, int rotary_dim, bool interleaved) {
  LanePair p;
  if (interleaved) {
    p.a = 2 * i;
    p.b = 2 * i + 1;
  } else {
    p.a = i;
    p.b = i + rotary_dim / 2;
  }
  return p;
}

// The table row of token id `id` in a vocab shard holding ids [first_id, first_id + rows); -1
// for an id outside it (its embedding row is zero on this rank).
LLM_HOST_DEVICE inline int64_t EmbeddingRow(int32_t id, int first_id, int rows) {
  const int64_t r = static_cast<int64_t>(id) - first_id;
  return r >= 0 && r < rows ? r : -1;
}

// A score as attention uses it: scaled, then soft-capped (Gemma 2) when softcap > 0.
LLM_HOST_DEVICE inline float AttentionScore(float dot, float scale, float softcap) {
  float s = dot * scale;
  if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;
  return s;
}

// Online softmax over a stream of scores: max so far, sum of exp(score - max), and the output
// accumulator (weighted V rows, held by the caller) rescaled whenever the max grows.
struct SoftmaxState {
  float max = -INFINITY;
  float sum = 0.0f;
};

// Adds a score: returns the factor the accumulator must be multiplied by before adding
// `*weight` times the score's V row.
LLM_HOST_DEVICE inline float SoftmaxAdd(SoftmaxState& st, float score, float* weight) {
  const float new_max = score > st.max ? score : st.max;
  const float rescale = st.max == -INFINITY ? 0.0f : expf(st.max - new_max);
  *weight = expf(score - new_max);
  st.sum = st.sum * rescale + *weight;
  st.max = new_max;
  return rescale;
}

// Merges partial state `b` into `a` (split-K partitions): returns the factors for a's and b's
// accumulators (acc = acc_a * fa + acc_b * fb). An empty partition (max = -inf) weighs 0.
LLM_HOST_DEVICE inline void SoftmaxMerge(SoftmaxState& a, const SoftmaxState& b, float* fa,
                                         float* fb) {
  const float m = a.max > b.max ? a.max : b.max;
  *fa = a.max == -INFINITY ? 0.0f : expf(a.max - m);
  *fb = b.max == -INFINITY ? 0.0f : expf(b.max - m);
  a.sum = a.sum * *fa + b.sum * *fb;
  a.max = m;
}

// The output of a finished state: acc / sum, or 0 when the query saw no key.
LLM_HOST_DEVICE inline float SoftmaxOutput(const SoftmaxState& st, float acc) {
  return st.sum > 0.0f ? acc / st.sum : 0.0f;
}

}  // namespace llm::kernels::cuda
