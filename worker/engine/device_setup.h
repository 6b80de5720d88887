// Where a rank's forward pass runs (engine.device) and, on a GPU, how large its KV cache is
// (engine.gpu_memory_utilization, vLLM's rule). Shared by rank 0 (worker/coordinator) and the
// followers (worker/engine/follower.cc), and by the tools. No MPI here: the caller passes the
// host-memory communicator on which the ranks agree on the cache size.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "common/config_sections.h"
#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/cuda_backend.h"
#include "worker/model/communicator.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_executor.h"

namespace llm {

// The backend of engine.device: the CPU backend for "cpu" (with engine.huge_pages applied:
// kernels::SetCpuHugePages); for "cuda" the CUDA backend on the
// GPU of this process's local rank (DeviceForLocalRank(CudaDeviceCount())). Errors start with
// "engine.device 'cuda': " and give the reason (a build without CUDA, no CUDA device visible, a
// bad local-rank variable, the device's own error). Logs the device chosen.
StatusOr<kernels::Backend*> EngineBackend(const EngineSection& engine);

// The element type of the KV cache (engine.kv_cache_dtype) for these weights on this backend:
// float16 or float32 as configured (a backend without that cache type refuses it in
// AllocateCache, naming the key). "auto" follows the model, as vLLM's auto (the model's dtype)
// and llama.cpp's F16 cache do: float16 where the backend keeps a half cache and some tensor is
// stored in fewer than 32 bits (F16, BF16 or a block format), float32 for a float32 model.
// Rank 0 decides; the start message carries its choice to the other ranks.
DType ResolveKvCacheDtype(const EngineSection& engine, const ModelWeights& weights,
                          const kernels::BackendCaps& caps);

// engine.kv_cache_dtype's name of a resolved type: "float16" or "float32" (Admin.Stats).
const char* KvCacheDtypeName(DType resolved);
// The same plus " (auto)" when engine.kv_cache_dtype left the choice to ResolveKvCacheDtype:
// for logs and reports.
std::string KvCacheDtypeLogName(const EngineSection& engine, DType resolved);

// PlaceWeights on a backend whose memory is not host memory (a no-op otherwise), with the
// megabytes and the time logged; errors name engine.device.
Status PlaceWeightsFor(const EngineSection& engine, ModelWeights& weights,
                       kernels::Backend& backend);

// vLLM's rule: the bytes the KV cache may take are what is free on the device after the
// weights and the workspace of the largest step, less the share of the device's total memory
// that engine.gpu_memory_utilization keeps out of reach:
//   kv_bytes = free_bytes - (1 - utilization) * total_bytes,  blocks = kv_bytes / block_bytes.
// ResourceExhausted naming engine.gpu_memory_utilization when kv_bytes <= 0 or the blocks are
// fewer than `min_blocks` (one max_model_len sequence). At most 1 << 24 blocks (so that the
// count travels exactly as a float between ranks). Pure arithmetic.
StatusOr<int> KvBlocksFromDeviceMemory(size_t free_bytes, size_t total_bytes, double utilization,
                                       size_t block_bytes, int min_blocks);

// Blocks of `block_size` tokens needed by one sequence of `max_model_len` tokens.
int BlocksForOneSequence(int max_model_len, int block_size);

// The batch of the largest step the scheduler can make: `max_tokens` tokens over at most
// `max_seqs` sequences of at most `max_model_len` tokens, each sampling its last row; every
// slot_mapping entry is -1 (nothing is written to the cache) and every block table entry 0.
void BuildProfilingBatch(int max_tokens, int max_seqs, int max_model_len, int block_size,
                         ForwardBatch* batch);

using MemoryInfoFn = std::function<StatusOr<kernels::DeviceMemoryInfo>()>;

// This rank's KV blocks on a device (engine.device cuda, neither engine.kv_cache_blocks nor
// engine.kv_cache_mib set): runs one forward pass of the largest step on a RankExecutor of
// `weights` (already placed on `backend`; `tp` and `pipeline` as for RankExecutor::Create),
// which grows the workspace to its steady-state size, reads the device's memory with
// `memory_info` while that workspace is held, then applies KvBlocksFromDeviceMemory with this
// rank's block bytes. Every rank of the engine must call it together (the pass runs the
// collectives of a step). Logs the figures.
StatusOr<int> ProfileKvBlocks(const ModelWeights& weights, kernels::Backend& backend,
                              Communicator* tp, Communicator* pipeline, const EngineSection& engine,
                              int max_model_len, const MemoryInfoFn& memory_info);

// The smallest of every rank's `mine` (each rank holds the same block ids, so the engine can
// use no more than its tightest rank): Gather to rank 0, then Broadcast. `host_comm` joins
// every rank of the engine and works on host memory (MPI); nullptr: one rank. Every rank must
// call it together.
int MinOverRanks(Communicator* host_comm, int mine);

}  // namespace llm
