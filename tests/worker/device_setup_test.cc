// engine.device and the GPU's KV cache sizing (worker/engine/device_setup.h), without a GPU: the
// arithmetic of vLLM's rule, the profiling batch, the profiling pass on the CPU backend with a
// stand-in for the device's memory figures, the agreement on the smallest block count, and the
// errors of engine.device cuda on a machine without CUDA.
#include "worker/engine/device_setup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu_ops.h"

namespace llm {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

TEST(KvBlocksFromDeviceMemory, FreeLessWhatUtilizationKeepsOut) {
  // 80 GiB GPU, 60 GiB free after weights and workspace, 0.9: 60 - 8 = 52 GiB for the cache.
  auto b = KvBlocksFromDeviceMemory(60 * kGiB, 80 * kGiB, 0.9, 2 * kMiB, 1);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, 52 * 512);
  // Utilization 1: everything free.
  b = KvBlocksFromDeviceMemory(60 * kGiB, 80 * kGiB, 1.0, 2 * kMiB, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 60 * 512);
  // Partial blocks are dropped.
  b = KvBlocksFromDeviceMemory(10 * kMiB + 5, 10 * kMiB, 1.0, 3 * kMiB, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 3);
}

TEST(KvBlocksFromDeviceMemory, NothingLeftNamesTheKey) {
  // 60 GiB free of 80 at 0.25: 60 - 60 = 0 left.
  auto b = KvBlocksFromDeviceMemory(60 * kGiB, 80 * kGiB, 0.25, kMiB, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("engine.gpu_memory_utilization"), std::string::npos)
      << b.status().ToString();
  b = KvBlocksFromDeviceMemory(1 * kGiB, 80 * kGiB, 0.5, kMiB, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
}

TEST(KvBlocksFromDeviceMemory, LessThanOneSequenceIsRefused) {
  // 10 blocks fit, one max_model_len sequence needs 11.
  auto b = KvBlocksFromDeviceMemory(10 * kMiB, 10 * kMiB, 1.0, kMiB, 11);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("engine.gpu_memory_utilization"), std::string::npos);
  EXPECT_NE(b.status().message().find("max_model_len"), std::string::npos);
  b = KvBlocksFromDeviceMemory(10 * kMiB, 10 * kMiB, 1.0, kMiB, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 10);
}

TEST(KvBlocksFromDeviceMemory, HugeCountsAreCappedExactlyRepresentable) {
  auto b = KvBlocksFromDeviceMemory(size_t{1} << 40, size_t{1} << 40, 1.0, 16, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 1 << 24);
  EXPECT_EQ(static_cast<int>(static_cast<float>(*b)), *b);
}

TEST(BlocksForOneSequence, RoundsUp) {
  EXPECT_EQ(BlocksForOneSequence(512, 16), 32);
  EXPECT_EQ(BlocksForOneSequence(513, 16), 33);
  EXPECT_EQ(BlocksForOneSequence(1, 16), 1);
}

TEST(ProfilingBatch, TheLargestStepWritingNothing) {
  ForwardBatch b;
  BuildProfilingBatch(2048, 256, 8192, 16, &b);
  EXPECT_EQ(b.num_tokens(), 2048);
  EXPECT_EQ(b.num_seqs(), 256);
  EXPECT_EQ(b.logit_rows.size(), 256u);
  for (int32_t s : b.slot_mapping) EXPECT_EQ(s, -1);
  for (int32_t t : b.block_tables) EXPECT_EQ(t, 0);
  ASSERT_EQ(b.query_start.size(), 257u);
  EXPECT_EQ(b.query_start.front(), 0);
  EXPECT_EQ(b.query_start.back(), 2048);
  EXPECT_EQ(b.max_blocks_per_seq, 1);  // 8 tokens each
  // Few sequences: each is capped at the context, so the budget may not be reached.
  BuildProfilingBatch(2048, 2, 512, 16, &b);
  EXPECT_EQ(b.num_tokens(), 1024);
  EXPECT_EQ(b.num_seqs(), 2);
  EXPECT_EQ(b.context_len, (std::vector<int32_t>{512, 512}));
  EXPECT_EQ(b.positions.back(), 511);
  EXPECT_EQ(b.max_blocks_per_seq, 32);
  EXPECT_EQ(b.block_tables.size(), 64u);
  EXPECT_EQ(b.logit_rows, (std::vector<int32_t>{511, 1023}));
  // Uneven split.
  BuildProfilingBatch(10, 4, 100, 4, &b);
  EXPECT_EQ(b.context_len, (std::vector<int32_t>{3, 3, 2, 2}));
  EXPECT_EQ(b.query_start, (std::vector<int32_t>{0, 3, 6, 8, 10}));
}

TEST(ProfileKvBlocks, RunsTheLargestStepThenAppliesTheRule) {
  const std::string dir = std::string(LLM_SHARED_DIR) + "/models/stories260K";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EngineSection e;
  e.block_size = 16;
  e.scheduler.max_num_batched_tokens = 300;
  e.scheduler.max_num_seqs = 4;
  e.gpu_memory_utilization = 0.5;
  int calls = 0;
  const MemoryInfoFn memory = [&]() -> StatusOr<kernels::DeviceMemoryInfo> {
    ++calls;
    return kernels::DeviceMemoryInfo{600 * kMiB, 1000 * kMiB};  // 100 MiB for the cache
  };
  auto blocks = ProfileKvBlocks(**w, kernels::CpuBackend(), nullptr, nullptr, e, 512, memory);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(calls, 1);
  auto exec = RankExecutor::Create(**w);
  ASSERT_TRUE(exec.ok());
  EXPECT_EQ(static_cast<size_t>(*blocks), 100 * kMiB / (*exec)->BlockBytes(16));

  // Memory the rule leaves nothing of: the error names the key.
  const MemoryInfoFn full = []() -> StatusOr<kernels::DeviceMemoryInfo> {
    return kernels::DeviceMemoryInfo{100 * kMiB, 1000 * kMiB};
  };
  blocks = ProfileKvBlocks(**w, kernels::CpuBackend(), nullptr, nullptr, e, 512, full);
  ASSERT_FALSE(blocks.ok());
  EXPECT_NE(blocks.status().message().find("engine.gpu_memory_utilization"), std::string::npos);

  // The memory figures' own error comes back.
  const MemoryInfoFn broken = []() -> StatusOr<kernels::DeviceMemoryInfo> {
    return FailedPrecondition("not a CUDA backend");
  };
  blocks = ProfileKvBlocks(**w, kernels::CpuBackend(), nullptr, nullptr, e, 512, broken);
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), StatusCode::kFailedPrecondition);
}

// Rank 0 of three whose other ranks report fixed block counts.
class ThreeRanks final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 3; }
  void AllReduceSum(float*, size_t) override { ADD_FAILURE(); }
  void Gather(const float* send, size_t count, float* recv, int root) override {
    EXPECT_EQ(count, 1u);
    EXPECT_EQ(root, 0);
    recv[0] = send[0];
    recv[1] = 700;
    recv[2] = 650;
    ++gathers;
  }
  void Broadcast(std::vector<uint8_t>& bytes, int root) override {
    EXPECT_EQ(root, 0);
    broadcast = bytes;
  }
  void Send(const float*, size_t, int) override { ADD_FAILURE(); }
  void Recv(float*, size_t, int) override { ADD_FAILURE(); }
  int StartRecv(float*, size_t, int) override { return 0; }
  void WaitRecv(int) override {}
  int gathers = 0;
  std::vector<uint8_t> broadcast;
};

TEST(MinOverRanks, EveryRankGetsTheSmallest) {
  EXPECT_EQ(MinOverRanks(nullptr, 42), 42);
  LocalCommunicator one;
  EXPECT_EQ(MinOverRanks(&one, 42), 42);
  ThreeRanks three;
  EXPECT_EQ(MinOverRanks(&three, 800), 650);
  EXPECT_EQ(three.gathers, 1);
  EXPECT_EQ(std::string(three.broadcast.begin(), three.broadcast.end()), "650");
  EXPECT_EQ(MinOverRanks(&three, 600), 600);
}

TEST(EngineBackend, CpuIsTheCpuBackend) {
  EngineSection e;
  auto b = EngineBackend(e);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, &kernels::CpuBackend());
  e.device = "tpu";
  b = EngineBackend(e);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("engine.device"), std::string::npos);
}

// engine.huge_pages reaches the CPU backend when it is chosen (the coordinator, every follower,
// llm-bench and llm-generate get their backend here).
TEST(EngineBackend, CpuTakesEngineHugePages) {
  const std::string thp = kernels::TransparentHugePageMode();
  const bool usable = thp == "always" || thp == "madvise";
  EngineSection e;
  e.huge_pages = "off";
  ASSERT_TRUE(EngineBackend(e).ok());
  EXPECT_FALSE(kernels::CpuHugePages());
  e.huge_pages = "auto";
  ASSERT_TRUE(EngineBackend(e).ok());
  EXPECT_EQ(kernels::CpuHugePages(), usable) << "THP mode '" << thp << "'";
}

TEST(EngineBackend, CudaWithoutAGpuSaysWhy) {
  if (kernels::CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  EngineSection e;
  e.device = "cuda";
  auto b = EngineBackend(e);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("engine.device 'cuda'"), std::string::npos)
      << b.status().ToString();
  EXPECT_NE(
      b.status().message().find(kernels::CudaCompiled() ? "no CUDA device" : "no CUDA backend"),
      std::string::npos)
      << b.status().ToString();
}

}  // namespace
}  // namespace llm
