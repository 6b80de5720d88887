// engine.device cuda where no GPU can be used (this build without CUDA, or a host without a
// device): the worker ends at start-up, within a bounded time, with exit status 1 and a log
// line naming engine.device and the reason; never a crash or a hang. On a host with a GPU
// (label gpu: tests/gpu/) the same flag serves.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <string>

#include "kernels/cuda_backend.h"
#include "tests/coordinator/coordinator_client.h"
#include "tests/coordinator/worker_process.h"

namespace llm::testing {
namespace {

TEST(CudaDevice, WithoutAGpuTheWorkerStopsAtStartUpNamingTheKey) {
  LLM_REQUIRE_SHARED("models/stories260K");
  if (kernels::CudaDeviceCount() > 0) GTEST_SKIP() << "this host has a CUDA device";
  const auto t0 = std::chrono::steady_clock::now();
  WorkerProcess worker(StoriesFlags({"--engine.device", "cuda"}));
  ASSERT_TRUE(worker.WaitExit(60)) << "still running after 60 s:\n" << worker.Log();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 60);
  const int status = *worker.exit_status();
  ASSERT_TRUE(WIFEXITED(status)) << "not a clean exit (signal " << WTERMSIG(status) << "):\n"
                                 << worker.Log();
  EXPECT_EQ(WEXITSTATUS(status), 1) << worker.Log();
  const std::string log = worker.Log();
  EXPECT_NE(log.find("engine.device 'cuda'"), std::string::npos) << log;
  // Either reason, depending on how this binary was built.
  EXPECT_NE(log.find(kernels::CudaCompiled() ? "no CUDA device" : "no CUDA backend"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("coordinator serving"), std::string::npos) << log;
}

TEST(CudaDevice, BadGpuMemoryUtilizationIsAConfigError) {
  LLM_REQUIRE_SHARED("models/stories260K");
  WorkerProcess worker(
      StoriesFlags({"--engine.device", "cuda", "--engine.gpu_memory_utilization", "0"}));
  ASSERT_TRUE(worker.WaitExit(30)) << worker.Log();
  const int status = *worker.exit_status();
  ASSERT_TRUE(WIFEXITED(status)) << worker.Log();
  EXPECT_NE(WEXITSTATUS(status), 0) << worker.Log();
  EXPECT_NE(worker.Log().find("engine.gpu_memory_utilization"), std::string::npos) << worker.Log();
}

}  // namespace
}  // namespace llm::testing
