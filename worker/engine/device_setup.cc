#include "worker/engine/device_setup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu_ops.h"

namespace llm {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kMaxBlocks = 1 << 24;  // exact as a float (MinOverRanks)

std::string MiB(double bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(0);
  s << bytes / kMiB << " MiB";
  return s.str();
}

}  // namespace

StatusOr<kernels::Backend*> EngineBackend(const EngineSection& engine) {
  if (engine.device == "cpu") {
    kernels::SetCpuHugePages(engine.huge_pages != "off");
    return &kernels::CpuBackend();
  }
  if (engine.device != "cuda") {
    return InvalidArgument("engine.device '" + engine.device + "': must be cpu or cuda");
  }
  const std::string key = "engine.device 'cuda': ";
  if (!kernels::CudaCompiled()) {
    return Unavailable(key +
                       "this build has no CUDA backend (nvcc was not found when CMake configured "
                       "it, or -DLLM_ENABLE_CUDA=OFF; install the CUDA toolkit and rebuild, or "
                       "use engine.device cpu)");
  }
  const int count = kernels::CudaDeviceCount();
  if (count <= 0) {
    return Unavailable(key +
                       "no CUDA device is visible to this process (no GPU, no driver, or "
                       "CUDA_VISIBLE_DEVICES hides them; nvidia-smi lists what the driver sees)");
  }
  StatusOr<int> device = kernels::DeviceForLocalRank(count);
  if (!device.ok()) return device.status().WithContext(key + "choosing this rank's GPU");
  StatusOr<kernels::Backend*> backend = kernels::CudaBackend(*device);
  if (!backend.ok()) {
    return backend.status().WithContext(key + "GPU " + std::to_string(*device) + " of " +
                                        std::to_string(count));
  }
  spdlog::info("engine.device cuda: GPU {} of {} on this host ({} backend)", *device, count,
               (*backend)->caps().name);
  // A step waiting on a collective whose peer stopped fails as the MPI ranks' waits do.
  kernels::SetCudaWaitTimeout(**backend, engine.rank_timeout_s);
  return backend;
}

Status PlaceWeightsFor(const EngineSection& engine, ModelWeights& weights,
                       kernels::Backend& backend) {
  // On a backend of host memory the model reads the host views, except the matmul weights the
  // backend gives a layout of its own (Backend::PrepareMatmulWeightInto: the CPU's
  // packed 32-block formats, Q4_0 ... Q8_0, and F16 / BF16 rows in groups of 4).
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = PlaceWeights(weights, backend);
  if (!s.ok()) {
    return s.WithContext("engine.device '" + engine.device + "': placing the weights on the " +
                         backend.caps().name + " backend");
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t bytes = 0;
  for (const kernels::Buffer& b : weights.placed) bytes += b.bytes();
  if (!backend.caps().host_memory) {
    spdlog::info("weights placed on the {} backend: {} in {:.2f} s", backend.caps().name,
                 MiB(static_cast<double>(bytes)), secs);
  } else if (bytes > 0) {
    // AnonHugePages: what the kernel backed with huge pages, which may be less than was advised
    // (its free memory is fragmented) or nothing (THP off, engine.huge_pages off).
    spdlog::info(
        "matmul weights repacked or copied for the {} backend: {} in {:.2f} s; {} of the "
        "process in huge pages (engine.huge_pages {})",
        backend.caps().name, MiB(static_cast<double>(bytes)), secs,
        MiB(static_cast<double>(kernels::AnonHugePageBytes())),
        kernels::CpuHugePages()      ? "auto"
        : engine.huge_pages == "off" ? "off"
                                     : "auto, THP off");
  }
  return Status::Ok();
}

StatusOr<int> KvBlocksFromDeviceMemory(size_t free_bytes, size_t total_bytes, double utilization,
                                       size_t block_bytes, int min_blocks) {
  if (block_bytes == 0) return InvalidArgument("a KV block of 0 bytes");
  const double reserved = (1.0 - utilization) * static_cast<double>(total_bytes);
  const double kv_bytes = static_cast<double>(free_bytes) - reserved;
  std::ostringstream u;
  u << utilization;
  const std::string figures = "the device has " + MiB(static_cast<double>(free_bytes)) +
                              " free of " + MiB(static_cast<double>(total_bytes)) +
                              " after the weights and the workspace, and engine.gpu_memory_"
                              "utilization " +
                              u.str() + " keeps " + MiB(reserved) + " out of reach";
  if (kv_bytes <= 0) {
    return ResourceExhausted("no memory is left for the KV cache: " + figures +
                             "; raise engine.gpu_memory_utilization, or use more GPUs "
                             "(engine.tensor_parallel_size) or a smaller model");
  }
  const double blocks = std::floor(kv_bytes / static_cast<double>(block_bytes));
  if (blocks < min_blocks) {
    return ResourceExhausted(
        "the KV cache would hold " + std::to_string(static_cast<int64_t>(blocks)) + " blocks of " +
        std::to_string(block_bytes) + " bytes, fewer than the " + std::to_string(min_blocks) +
        " one max_model_len sequence needs: " + figures +
        "; raise engine.gpu_memory_utilization or lower model.max_model_len");
  }
  return static_cast<int>(std::min<double>(blocks, kMaxBlocks));
}

int BlocksForOneSequence(int max_model_len, int block_size) {
  return (max_model_len + block_size - 1) / block_size;
}

void BuildProfilingBatch(int max_tokens, int max_seqs, int max_model_len, int block_size,
                         ForwardBatch* b) {
  b->Clear();
  max_tokens = std::max(1, max_tokens);
  max_model_len = std::max(1, max_model_len);
  // As many sequences as the budget allows, each no longer than the context.
  const int64_t cap = static_cast<int64_t>(std::max(1, max_seqs)) * max_model_len;
  const int tokens = static_cast<int>(std::min<int64_t>(max_tokens, cap));
  const int seqs = std::min(std::max(1, max_seqs), tokens);
  const int per = tokens / seqs, extra = tokens % seqs;
  b->query_start.assign(1, 0);  // as Clear() leaves it
  int longest = 0;
  for (int s = 0; s < seqs; ++s) {
    const int len = per + (s < extra ? 1 : 0);
    for (int p = 0; p < len; ++p) {
      b->token_ids.push_back(0);
      b->positions.push_back(p);
      b->slot_mapping.push_back(-1);
    }
    b->query_start.push_back(b->query_start.back() + len);
    b->context_len.push_back(len);
    b->logit_rows.push_back(b->query_start.back() - 1);
    longest = std::max(longest, len);
  }
  b->max_blocks_per_seq = BlocksForOneSequence(longest, block_size);
  b->block_tables.assign(static_cast<size_t>(seqs) * b->max_blocks_per_seq, 0);
}

DType ResolveKvCacheDtype(const EngineSection& engine, const ModelWeights& weights,
                          const kernels::BackendCaps& caps) {
  if (engine.kv_cache_dtype != "auto") return engine.kv_cache_element_type();
  if (!caps.SupportsKvCacheDtype(DType::kF16)) return DType::kF32;
  bool below_32_bits = false;
  weights.ForEachWeight([&](const std::string&, const Weight& w) {
    below_32_bits = below_32_bits || (!w.empty() && w.format != DType::kF32);
  });
  return below_32_bits ? DType::kF16 : DType::kF32;
}

const char* KvCacheDtypeName(DType resolved) {
  return resolved == DType::kF16 ? "float16" : "float32";
}

std::string KvCacheDtypeLogName(const EngineSection& engine, DType resolved) {
  return std::string(KvCacheDtypeName(resolved)) +
         (engine.kv_cache_dtype == "auto" ? " (auto)" : "");
}

StatusOr<int> ProfileKvBlocks(const ModelWeights& weights, kernels::Backend& backend,
                              Communicator* tp, Communicator* pipeline, const EngineSection& engine,
                              int max_model_len, const MemoryInfoFn& memory_info) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<RankExecutor> executor,
                       weights.pipeline.num_stages > 1
                           ? RankExecutor::Create(weights, backend, tp, pipeline)
                           : RankExecutor::Create(weights, backend, tp));
  const int block_size = engine.block_size;
  const DType kv_dtype = ResolveKvCacheDtype(engine, weights, backend.caps());
  LLM_RETURN_IF_ERROR(executor->AllocateCache(1, block_size, kv_dtype));  // read, never written
  BuildProfilingBatch(engine.scheduler.max_num_batched_tokens, engine.scheduler.max_num_seqs,
                      max_model_len, block_size, &executor->batch());
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<const float*> logits = executor->Execute();
  if (!logits.ok()) {
    return logits.status().WithContext("the profiling forward pass of " +
                                       std::to_string(executor->batch().num_tokens()) +
                                       " tokens (engine.max_num_batched_tokens)");
  }
  LLM_RETURN_IF_ERROR(backend.Synchronize());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LLM_ASSIGN_OR_RETURN(const kernels::DeviceMemoryInfo mem, memory_info());
  const size_t block_bytes = executor->BlockBytes(block_size, kv_dtype);
  StatusOr<int> blocks =
      KvBlocksFromDeviceMemory(mem.free_bytes, mem.total_bytes, engine.gpu_memory_utilization,
                               block_bytes, BlocksForOneSequence(max_model_len, block_size));
  if (!blocks.ok()) return blocks.status();
  spdlog::info(
      "KV cache sizing: profiling pass of {} tokens in {:.2f} s; {} free of {} -> {} blocks of "
      "{} bytes on this rank (engine.gpu_memory_utilization {})",
      executor->batch().num_tokens(), secs, MiB(static_cast<double>(mem.free_bytes)),
      MiB(static_cast<double>(mem.total_bytes)), *blocks, block_bytes,
      engine.gpu_memory_utilization);
  return blocks;
}

int MinOverRanks(Communicator* host_comm, int mine) {
  if (host_comm == nullptr || host_comm->world_size() == 1) return mine;
  const int n = host_comm->world_size();
  const float send = static_cast<float>(mine);
  std::vector<float> all(static_cast<size_t>(n), 0.0f);
  host_comm->Gather(&send, 1, all.data(), 0);
  int least = mine;
  if (host_comm->rank() == 0) {
    for (float v : all) least = std::min(least, static_cast<int>(v));
  }
  std::vector<uint8_t> bytes;
  if (host_comm->rank() == 0) {
    const std::string s = std::to_string(least);
    bytes.assign(s.begin(), s.end());
  }
  host_comm->Broadcast(bytes, 0);
  return std::stoi(std::string(bytes.begin(), bytes.end()));
}

}  // namespace llm
