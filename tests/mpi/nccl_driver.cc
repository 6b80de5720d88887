// Test driver for the NCCL communicator (worker/comm/nccl_communicator.h), run on every rank under
// mpirun by the `nccl_mpi.*` tests of tests/CMakeLists.txt. One mode per run:
//
//   share       rank 0's 128-byte id (a known pattern) reaches every rank, whatever they held
//               (garbage of another size, nothing); twice, with two patterns.
//   wrong-size  rank 0's id of 100 bytes, then of 0 bytes: every rank answers InvalidArgument
//               (none waits forever); a right-size id afterwards still works.
//   cpu         CreateNcclCommunicator on the CPU backend: FailedPrecondition naming it.
//   gpu         needs one GPU per rank (exits 77, skipped, otherwise): AllReduceSum sums device
//               memory over the ranks, Gather puts each rank's part in rank order on the root.
//
// Every rank prints its failures on stderr; the exit status is 0 when all its checks passed, 1
// when one failed, 77 when the mode cannot run here (and MPI is always finalized first).
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda_backend.h"
#include "worker/comm/mpi_communicator.h"
#include "worker/comm/nccl_communicator.h"

namespace llm {
namespace {

constexpr int kSkip = 77;

struct Checker {
  int rank = 0;
  int failures = 0;
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
};

std::vector<uint8_t> Pattern(int seed) {
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i * 7 + seed);
  return id;
}

void Share(MpiCommunicator& mpi, Checker& c) {
  for (int seed : {3, 200}) {
    std::vector<uint8_t> id;
    if (mpi.rank() == 0) {
      id = Pattern(seed);
    } else if (mpi.rank() % 2 == 1) {
      id.assign(5 + mpi.rank(), 0xAB);  // garbage of another size
    }                                   // other ranks: empty
    const Status s = ShareUniqueId(mpi, id);
    c.Expect(s.ok(), "ShareUniqueId: " + s.ToString());
    c.Expect(id == Pattern(seed), "ShareUniqueId: rank 0's bytes (seed " + std::to_string(seed) +
                                      ") did not arrive intact, got " + std::to_string(id.size()) +
                                      " bytes");
  }
}

void WrongSize(MpiCommunicator& mpi, Checker& c) {
  for (size_t size : {size_t{100}, size_t{0}}) {
    std::vector<uint8_t> id = mpi.rank() == 0 ? std::vector<uint8_t>(size, 1) : Pattern(9);
    const Status s = ShareUniqueId(mpi, id);
    c.Expect(s.code() == StatusCode::kInvalidArgument,
             "a " + std::to_string(size) + "-byte id from rank 0 gave " + s.ToString() +
                 ", want INVALID_ARGUMENT on every rank");
    c.Expect(s.message().find(std::to_string(size) + " bytes") != std::string::npos,
             "the message names the size: " + s.message());
  }
  std::vector<uint8_t> id = mpi.rank() == 0 ? Pattern(5) : std::vector<uint8_t>();
  const Status s = ShareUniqueId(mpi, id);
  c.Expect(s.ok() && id == Pattern(5), "a right-size id after wrong ones: " + s.ToString());
}

void CpuBackend(MpiCommunicator& mpi, Checker& c) {
  auto comm = CreateNcclCommunicator(mpi, kernels::CpuBackend());
  c.Expect(!comm.ok(), "CreateNcclCommunicator on the CPU backend succeeded");
  c.Expect(comm.status().code() == StatusCode::kFailedPrecondition,
           "CreateNcclCommunicator on the CPU backend: " + comm.status().ToString() +
               ", want FAILED_PRECONDITION");
  c.Expect(comm.status().message().find("'cpu'") != std::string::npos,
           "the message names the backend: " + comm.status().message());
}

// Reads `count` floats of device memory.
std::vector<float> Read(kernels::Backend& b, const kernels::Buffer& buf, size_t count) {
  std::vector<float> out(count);
  b.CopyToHost(out.data(), buf.data(), count * sizeof(float));  // waits for the stream
  return out;
}

int Gpu(MpiCommunicator& mpi, Checker& c) {
  const int devices = kernels::CudaDeviceCount();
  if (devices < mpi.world_size()) {
    if (mpi.rank() == 0) {
      std::printf("SKIPPED: %d ranks need %d CUDA devices, this machine has %d\n", mpi.world_size(),
                  mpi.world_size(), devices);
    }
    return kSkip;
  }
  if (!NcclCompiled()) {
    if (mpi.rank() == 0) std::printf("SKIPPED: this build has no NCCL\n");
    return kSkip;
  }
  // The device as the worker picks it: the local rank (one host here) modulo the devices.
  const auto device = kernels::DeviceForLocalRank(devices);
  c.Expect(device.ok(), "DeviceForLocalRank: " + device.status().ToString());
  if (!device.ok()) return 1;
  auto backend = kernels::CudaBackend(*device);
  c.Expect(backend.ok(),
           "CudaBackend(" + std::to_string(*device) + "): " + backend.status().ToString());
  if (!backend.ok()) return 1;
  kernels::Backend& b = **backend;
  auto comm = CreateNcclCommunicator(mpi, b);
  c.Expect(comm.ok(), "CreateNcclCommunicator: " + comm.status().ToString());
  if (!comm.ok()) return 1;
  Communicator& nccl = **comm;
  const int world = mpi.world_size(), me = mpi.rank();
  c.Expect(nccl.rank() == me && nccl.world_size() == world, "rank and world size from MPI");
  c.Expect(nccl.device_memory(), "device_memory() is true");

  // Sums of small integers are exact in float, whatever order NCCL adds them in.
  const size_t n = 100003;  // odd, over several NCCL chunks' alignment
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((me + 1) * static_cast<int>(i % 97));
  auto buf = b.Allocate(n * sizeof(float));
  c.Expect(buf.ok(), "Allocate: " + buf.status().ToString());
  if (!buf.ok()) return 1;
  b.CopyToDevice(buf->data(), host.data(), n * sizeof(float));
  nccl.AllReduceSum(buf->as<float>(), n);
  const std::vector<float> sum = Read(b, *buf, n);
  const int ranks_sum = world * (world + 1) / 2;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += sum[i] != static_cast<float>(ranks_sum * (i % 97));
  c.Expect(bad == 0, "AllReduceSum: " + std::to_string(bad) + " of " + std::to_string(n) +
                         " elements differ from the sum over the ranks");

  // Gather to every root in turn: rank r's part is r * 1e4 + i.
  const size_t m = 4099;
  std::vector<float> part(m);
  for (size_t i = 0; i < m; ++i) part[i] = static_cast<float>(me * 10000 + static_cast<int>(i));
  auto send = b.Allocate(m * sizeof(float));
  auto recv = b.Allocate(m * world * sizeof(float));
  c.Expect(send.ok() && recv.ok(), "Allocate for Gather");
  if (!send.ok() || !recv.ok()) return 1;
  b.CopyToDevice(send->data(), part.data(), m * sizeof(float));
  for (int root = 0; root < world; ++root) {
    b.Zero(recv->data(), m * world * sizeof(float));
    nccl.Gather(send->as<float>(), m, recv->as<float>(), root);
    const std::vector<float> got = Read(b, *recv, m * world);
    if (me != root) continue;
    size_t wrong = 0;
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < m; ++i) {
        wrong += got[r * m + i] != static_cast<float>(r * 10000 + static_cast<int>(i));
      }
    }
    c.Expect(wrong == 0, "Gather to root " + std::to_string(root) + ": " + std::to_string(wrong) +
                             " elements out of place");
  }
  // The host-memory messages still go over MPI beside NCCL.
  std::vector<uint8_t> msg = me == 0 ? std::vector<uint8_t>{1, 2, 3} : std::vector<uint8_t>{};
  nccl.Broadcast(msg, 0);
  c.Expect(msg == std::vector<uint8_t>({1, 2, 3}), "Broadcast over MPI");
  return c.failures == 0 ? 0 : 1;
}

int Run(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  int code = 0;
  {
    auto mpi = MpiCommunicator::Create(&argc, &argv);
    if (!mpi.ok()) {
      std::fprintf(stderr, "MpiCommunicator::Create: %s\n", mpi.status().ToString().c_str());
      return 1;
    }
    MpiCommunicator& m = **mpi;
    Checker c;
    c.rank = m.rank();
    if (mode == "share") {
      Share(m, c);
    } else if (mode == "wrong-size") {
      WrongSize(m, c);
    } else if (mode == "cpu") {
      CpuBackend(m, c);
    } else if (mode == "gpu") {
      code = Gpu(m, c);
    } else {
      std::fprintf(stderr, "usage: nccl_driver share|wrong-size|cpu|gpu\n");
      code = 2;
    }
    if (code == 0 && c.failures > 0) code = 1;
    if (code == 0 && m.rank() == 0) std::printf("PASSED on %d ranks\n", m.world_size());
  }  // MPI is finalized here, before the exit status
  return code;
}

}  // namespace
}  // namespace llm

int main(int argc, char** argv) {
  return llm::Run(argc, argv);
}
