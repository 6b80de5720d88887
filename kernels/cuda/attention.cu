// Paged attention on the GPU for decode and prefill chunks alike: a flat varlen batch of query
// rows (causal, GQA, sliding window, soft-cap), K/V read through the block tables.
//
// One thread block per (query row, query head, split-K partition); its warps take the
// partition's keys kKeysPerWarpStep at a time, round-robin (index_math.h): a warp loads the K and
// V rows of its step's keys together, so their memory latencies overlap, the lanes hold
// head_dim / 32 lanes of q and of the output accumulator, warp reductions form the q·k, and an
// online softmax (index_math.h SoftmaxAdd) folds the keys' V rows in, in key order. The warps'
// states are merged in shared memory (SoftmaxMerge). With one partition the block writes the
// output; with several (flash-decoding: equal shares of the keys the query sees, whenever the
// (row, head) pairs alone would not fill the GPU) it writes its partial state and a second
// kernel merges the partitions in order. Every index and softmax step is an index_math.h
// function, composed on the CPU the same way by tests/kernels/cuda_index_math_test.cc.
#include <cstdint>

#include "kernels/cuda/index_math.h"
#include "kernels/cuda/launch.h"

namespace llm::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarps = 4;

struct AttentionArgs {
  const float* q;
  const float* k_cache;
  const float* v_cache;
  const int32_t* query_start;
  const int32_t* context_len;
  const int32_t* block_tables;
  int num_seqs;
  int max_blocks_per_seq;
  int q_heads;
  int kv_heads;
  int head_dim;
  int block_size;
  float scale;
  int sliding_window;
  float softcap;
  int partitions;
  int min_partition_keys;
  float* out;
  float* workspace;  // partitions > 1: [rows, heads, partitions, head_dim + 2]
};

__device__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// kLanes = ceil(head_dim / 32): the q and accumulator lanes each thread holds.
template <int kLanes>
__global__ void __launch_bounds__(kWarps* kWarp) PagedAttentionKernel(AttentionArgs a) {
  const int row = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int d_model = a.head_dim;
  const int s = SequenceOfRow(a.query_start, a.num_seqs, row);
  const int pos = QueryPosition(a.query_start, a.context_len, s, row);
  const KeyRange visible = VisibleKeys(pos, a.sliding_window);
  // A share past the keys this row sees: nothing to write, the merge skips it (uniform over
  // the block, so no thread is left at the barrier below).
  if (part >= UsedPartitions(visible, a.partitions, a.min_partition_keys)) return;
  const KeyRange keys = PartitionKeys(visible, part, a.partitions, a.min_partition_keys);
  const int kvh = h / (a.q_heads / a.kv_heads);
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;

  float qv[kLanes], acc[kLanes];
  const float* qrow = a.q + (static_cast<int64_t>(row) * a.q_heads + h) * d_model;
#pragma unroll
  for (int i = 0; i < kLanes; ++i) {
    const int d = lane + i * kWarp;
    qv[i] = d < d_model ? qrow[d] : 0.0f;
    acc[i] = 0.0f;
  }
  SoftmaxState st;
  constexpr int kStep = kKeysPerWarpStep;
  for (int j0 = keys.begin + warp * kStep; j0 < keys.end; j0 += kWarps * kStep) {
    int64_t off[kStep];
    float dot[kStep], vrow[kStep][kLanes];
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      off[u] = j0 + u < keys.end
                   ? CacheOffset(SlotOf(table, j0 + u, a.block_size), a.kv_heads, d_model, kvh)
                   : -1;
    }
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      dot[u] = 0.0f;
#pragma unroll
      for (int i = 0; i < kLanes; ++i) {
        const int d = lane + i * kWarp;
        const bool in = off[u] >= 0 && d < d_model;
        if (in) dot[u] += qv[i] * a.k_cache[off[u] + d];
        vrow[u][i] = in ? a.v_cache[off[u] + d] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kStep; ++u) dot[u] = WarpSum(dot[u]);
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      if (off[u] < 0) continue;
      float weight;
      const float rescale = SoftmaxAdd(st, AttentionScore(dot[u], a.scale, a.softcap), &weight);
#pragma unroll
      for (int i = 0; i < kLanes; ++i) acc[i] = acc[i] * rescale + weight * vrow[u][i];
    }
  }

  // Merge the warps' states in warp order.
  extern __shared__ float smem[];  // [kWarps][head_dim + 2]
  float* mine = smem + warp * (d_model + 2);
#pragma unroll
  for (int i = 0; i < kLanes; ++i) {
    const int d = lane + i * kWarp;
    if (d < d_model) mine[d] = acc[i];
  }
  if (lane == 0) {
    mine[d_model] = st.max;
    mine[d_model + 1] = st.sum;
  }
  __syncthreads();
  if (warp != 0) return;
  for (int w = 1; w < kWarps; ++w) {
    const float* other = smem + w * (d_model + 2);
    SoftmaxState b;
    b.max = other[d_model];
    b.sum = other[d_model + 1];
    float fa, fb;
    SoftmaxMerge(st, b, &fa, &fb);
#pragma unroll
    for (int i = 0; i < kLanes; ++i) {
      const int d = lane + i * kWarp;
      if (d < d_model) acc[i] = acc[i] * fa + other[d] * fb;
    }
  }
  const int64_t pair = static_cast<int64_t>(row) * a.q_heads + h;
  if (a.partitions == 1) {
#pragma unroll
    for (int i = 0; i < kLanes; ++i) {
      const int d = lane + i * kWarp;
      if (d < d_model) a.out[pair * d_model + d] = SoftmaxOutput(st, acc[i]);
    }
    return;
  }
  float* partial = a.workspace + (pair * a.partitions + part) * (d_model + 2);
#pragma unroll
  for (int i = 0; i < kLanes; ++i) {
    const int d = lane + i * kWarp;
    if (d < d_model) partial[d] = acc[i];
  }
  if (lane == 0) {
    partial[d_model] = st.max;
    partial[d_model + 1] = st.sum;
  }
}

// One block per (row, head): merges the partitions that hold keys (UsedPartitions: a short
// context fills only the first of many) in order, one thread per output lane.
__global__ void MergePartitionsKernel(AttentionArgs a) {
  const int row = blockIdx.x;
  const int64_t pair = static_cast<int64_t>(row) * a.q_heads + blockIdx.y;
  const int s = SequenceOfRow(a.query_start, a.num_seqs, row);
  const int pos = QueryPosition(a.query_start, a.context_len, s, row);
  const int used =
      UsedPartitions(VisibleKeys(pos, a.sliding_window), a.partitions, a.min_partition_keys);
  const int head_dim = a.head_dim;
  const float* base = a.workspace + pair * a.partitions * (head_dim + 2);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    SoftmaxState st;
    float acc = 0.0f;
    for (int p = 0; p < used; ++p) {
      const float* part = base + static_cast<int64_t>(p) * (head_dim + 2);
      SoftmaxState b;
      b.max = part[head_dim];
      b.sum = part[head_dim + 1];
      float fa, fb;
      SoftmaxMerge(st, b, &fa, &fb);
      acc = acc * fa + part[d] * fb;
    }
    a.out[pair * head_dim + d] = SoftmaxOutput(st, acc);
  }
}

template <int kLanes>
void Launch(cudaStream_t stream, const dim3& grid, const AttentionArgs& a) {
  const size_t smem = sizeof(float) * kWarps * (a.head_dim + 2);
  PagedAttentionKernel<kLanes><<<grid, kWarps * kWarp, smem, stream>>>(a);
}

}  // namespace

void LaunchPagedAttention(cudaStream_t stream, const float* q, const float* k_cache,
                          const float* v_cache, const AttentionBatch& batch,
                          const AttentionParams& params, int partitions, int min_partition_keys,
                          float* workspace, float* out) {
  const int tokens = batch.num_tokens;
  if (tokens <= 0 || batch.num_seqs <= 0 || params.q_heads <= 0 || params.kv_heads <= 0 ||
      params.q_heads % params.kv_heads != 0 || params.head_dim <= 0 || params.head_dim > 512) {
    return;  // outside the backend's caps: the model checks them at start-up
  }
  AttentionArgs a{q,
                  k_cache,
                  v_cache,
                  batch.query_start,
                  batch.context_len,
                  batch.block_tables,
                  batch.num_seqs,
                  batch.max_blocks_per_seq,
                  params.q_heads,
                  params.kv_heads,
                  params.head_dim,
                  params.block_size,
                  params.scale,
                  params.sliding_window,
                  params.softcap,
                  partitions < 1 ? 1 : partitions,
                  min_partition_keys,
                  out,
                  workspace};
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(params.q_heads),
                  static_cast<unsigned>(a.partitions));
  const int lanes = (params.head_dim + kWarp - 1) / kWarp;
  if (lanes <= 2) {
    Launch<2>(stream, grid, a);
  } else if (lanes <= 4) {
    Launch<4>(stream, grid, a);
  } else if (lanes <= 8) {
    Launch<8>(stream, grid, a);
  } else {
    Launch<16>(stream, grid, a);
  }
  if (a.partitions > 1) {
    const dim3 merge_grid(static_cast<unsigned>(tokens), static_cast<unsigned>(params.q_heads));
    const int threads = params.head_dim < 256 ? ((params.head_dim + 31) / 32) * 32 : 256;
    MergePartitionsKernel<<<merge_grid, threads, 0, stream>>>(a);
  }
}

}  // namespace llm::kernels::cuda
