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

// Keys each warp of an attention block takes per step, loaded together so that their memory
// latencies overlap: warp w takes keys [begin + w * kKeysPerWarpStep, + kKeysPerWarpStep),
// then the same kWarps * kKeysPerWarpStep further on, and so on (each in increasing order).
constexpr int kKeysPerWarpStep = 4;

// Keys per split-K share of a row that sees `len` keys: equal shares of the keys the query
// actually sees (not of the longest context the launch allows, which a recorded decode graph
// pads to max_model_len), at least `min_keys` each, so that a short context uses few partitions
// and the rest are empty.
LLM_HOST_DEVICE inline int ShareKeys(int len, int partitions, int min_keys) {
  const int chunk = partitions > 1 ? (len + partitions - 1) / partitions : len;
  return chunk < min_keys ? min_keys : chunk;
}

// Partition `partition` of `partitions` split-K partitions of the visible keys (ShareKeys each).
LLM_HOST_DEVICE inline KeyRange PartitionKeys(KeyRange visible, int partition, int partitions,
                                              int min_keys) {
  const int len = visible.end > visible.begin ? visible.end - visible.begin : 0;
  const int chunk = ShareKeys(len, partitions, min_keys);
  const int64_t lo = visible.begin + static_cast<int64_t>(partition) * chunk;
  const int64_t hi = lo + chunk;
  KeyRange r;
  r.begin = lo < visible.end ? static_cast<int>(lo) : visible.end;
  r.end = hi < visible.end ? static_cast<int>(hi) : visible.end;
  return r;
}

// How many of `partitions` PartitionKeys shares of `visible` hold keys (the first ones; the rest
// are empty, and the merge of the partials skips them).
LLM_HOST_DEVICE inline int UsedPartitions(KeyRange visible, int partitions, int min_keys) {
  const int len = visible.end > visible.begin ? visible.end - visible.begin : 0;
  const int chunk = ShareKeys(len, partitions, min_keys);
  if (chunk <= 0) return 1;
  const int used = (len + chunk - 1) / chunk;
  return used < 1 ? 1 : (used > partitions ? partitions : used);
}

// Partitions of at least `min_keys` keys needed for contexts of at most `max_context` tokens
// (at least 1).
LLM_HOST_DEVICE inline int NumPartitions(int max_context, int min_keys) {
  const int n = (max_context + min_keys - 1) / min_keys;
  return n > 0 ? n : 1;
}

// Split-K partitions for one attention launch. A block's warps walk its keys one step after
// another, so a block with many keys is slow however many blocks run beside it: the (row, head)
// pairs are split until about 16 blocks per multiprocessor exist (`sm_count` of them), at most
// kMaxPartitions and no more than contexts of `max_context` tokens fill with `min_keys` keys
// each, and no more than the partials fit in `max_workspace_floats`. One when the pairs alone
// fill the GPU (a prefill chunk).
constexpr int kMaxPartitions = 64;
LLM_HOST_DEVICE inline int ChoosePartitions(int tokens, int heads, int head_dim, int max_context,
                                            int sm_count, int min_keys,
                                            int64_t max_workspace_floats) {
  const int64_t pairs = static_cast<int64_t>(tokens) * heads;
  const int64_t target = 16LL * sm_count;
  if (pairs <= 0 || pairs >= target) return 1;
  int64_t n = (target + pairs - 1) / pairs;
  const int fill = NumPartitions(max_context, min_keys);
  if (n > fill) n = fill;
  if (n > kMaxPartitions) n = kMaxPartitions;
  const int64_t fit = max_workspace_floats / (pairs * (head_dim + 2));
  if (n > fit) n = fit;
  return n > 1 ? static_cast<int>(n) : 1;
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
