// engine.device cuda under mpirun where no GPU can be used: every rank reports it (a line naming
// engine.device and the reason) and the job ends at start-up with a non-zero status within a
// bounded time; no rank is left waiting for the others.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cuda_backend.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;

#ifdef LLM_WORKER_BIN
std::string FindMpirunOnPath() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir) / "mpirun";
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

TEST(CudaDeviceMpi, TwoRanksWithoutAGpuEndTheJobAtStartUp) {
  const std::string model = std::string(LLM_SHARED_DIR) + "/models/stories260K";
  if (!fs::exists(model)) GTEST_SKIP() << "missing shared test data: " << model;
  const std::string mpirun = FindMpirunOnPath();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not found on PATH: MPI tests skipped";
  if (kernels::CudaDeviceCount() > 0) GTEST_SKIP() << "this host has a CUDA device";
  const fs::path log = fs::temp_directory_path() / ("llm_cuda_mpi_" + std::to_string(getpid()));
  // 124 from `timeout`: the job hung.
  const std::string cmd = "timeout -k 5 90 " + mpirun +
                          " --allow-run-as-root --oversubscribe --bind-to none -np 2 "
                          "-x OMP_NUM_THREADS=1 " LLM_WORKER_BIN " --model.path " +
                          model +
                          " --engine.device cuda --engine.tensor_parallel_size 2"
                          " --engine.kv_cache_mib 8 --coordinator.port " +
                          std::to_string(20000 + getpid() % 20000) + " > " + log.string() + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream in(log);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(WEXITSTATUS(status), 124) << "the job hung:\n" << out;
  EXPECT_LT(secs, 90) << out;
  EXPECT_NE(out.find("engine.device 'cuda'"), std::string::npos) << out;
  EXPECT_NE(out.find(kernels::CudaCompiled() ? "no CUDA device" : "no CUDA backend"),
            std::string::npos)
      << out;
}
#endif  // LLM_WORKER_BIN

}  // namespace
}  // namespace llm::testing
