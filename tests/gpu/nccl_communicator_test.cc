// The NCCL communicator on one GPU, in one process (label gpu: skips without a CUDA device or
// without NCCL). MPI starts as a singleton (no mpirun): a world of one rank, over which the NCCL
// communicator is built on CudaBackend(0). Several ranks: the nccl_mpi.two_gpus test
// (tests/mpi/nccl_driver.cc under mpirun).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda_backend.h"
#include "worker/comm/mpi_communicator.h"
#include "worker/comm/nccl_communicator.h"

namespace llm {
namespace {

std::vector<float> Read(kernels::Backend& b, const kernels::Buffer& buf, size_t count) {
  std::vector<float> out(count);
  b.CopyToHost(out.data(), buf.data(), count * sizeof(float));  // waits for the stream
  return out;
}

// One test, so that MPI is initialized and finalized once in this process.
TEST(NcclCommunicator, OneRankAllReduceIsIdentityAndGatherCopies) {
  if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  int argc = 1;
  char name[] = "gpu_test";
  char* args[] = {name, nullptr};
  char** argv = args;
  auto mpi = MpiCommunicator::Create(&argc, &argv);
  ASSERT_TRUE(mpi.ok()) << mpi.status().ToString();
  ASSERT_EQ((*mpi)->world_size(), 1);

  auto backend = kernels::CudaBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  kernels::Backend& b = **backend;
  auto created = CreateNcclCommunicator(**mpi, b);  // destroyed before `mpi` (declared after)
  if (!NcclCompiled()) {
    EXPECT_EQ(created.status().code(), StatusCode::kUnavailable) << created.status().ToString();
    GTEST_SKIP() << "this build has no NCCL: " << created.status().ToString();
  }
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Communicator& nccl = **created;
  EXPECT_EQ(nccl.rank(), 0);
  EXPECT_EQ(nccl.world_size(), 1);
  EXPECT_TRUE(nccl.device_memory());

  const size_t n = 10007;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = 0.25f * static_cast<float>(i) - 17.5f;
  auto data = b.Allocate(n * sizeof(float));
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  b.CopyToDevice(data->data(), host.data(), n * sizeof(float));
  nccl.AllReduceSum(data->as<float>(), n);
  EXPECT_EQ(Read(b, *data, n), host) << "a sum over one rank is the identity";

  auto recv = b.Allocate(n * sizeof(float));
  ASSERT_TRUE(recv.ok()) << recv.status().ToString();
  b.Zero(recv->data(), n * sizeof(float));
  nccl.Gather(data->as<float>(), n, recv->as<float>(), 0);
  EXPECT_EQ(Read(b, *recv, n), host) << "Gather on one rank copies the part";
  EXPECT_EQ(Read(b, *data, n), host) << "Gather leaves the sent part alone";

  std::vector<uint8_t> msg = {4, 5};
  nccl.Broadcast(msg, 0);  // host memory, over MPI: a no-op on one rank
  EXPECT_EQ(msg, std::vector<uint8_t>({4, 5}));
}

}  // namespace
}  // namespace llm
