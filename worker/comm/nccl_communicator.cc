// The NCCL communicator (see nccl_communicator.h). Compiled in every build: without NCCL
// (LLM_HAVE_NCCL undefined) NcclCompiled() is false and CreateNcclCommunicator answers
// Unavailable; ShareUniqueId is plain host logic over any Communicator in both.
#include "worker/comm/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include "kernels/cuda_backend.h"

#ifdef LLM_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace llm {
namespace {

// NCCL_UNIQUE_ID_BYTES (checked against nccl.h below when NCCL is there).
constexpr size_t kUniqueIdBytes = 128;

}  // namespace

bool NcclCompiled() {
#ifdef LLM_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

// Rank 0's bytes go to every rank, their size with them (Broadcast sends the size first), so a
// wrong-size id is seen by every rank and every rank returns the same InvalidArgument instead of
// the others waiting for bytes that never come.
Status ShareUniqueId(Communicator& mpi, std::vector<uint8_t>& id) {
  mpi.Broadcast(id, 0);
  if (id.size() != kUniqueIdBytes) {
    return InvalidArgument("the NCCL unique id from rank 0 has " + std::to_string(id.size()) +
                           " bytes, NCCL uses " + std::to_string(kUniqueIdBytes));
  }
  return Status::Ok();
}

#ifdef LLM_HAVE_NCCL

static_assert(NCCL_UNIQUE_ID_BYTES == kUniqueIdBytes, "NCCL's unique id size changed");

namespace {

using Clock = std::chrono::steady_clock;

// How long creation may wait for every rank to join (and a collective's enqueue for NCCL to
// accept it), and destruction for the pending operations to flush.
constexpr double kWaitTimeoutS = 60.0;
constexpr double kFinalizeTimeoutS = 10.0;

std::string NcclError(ncclComm_t comm, ncclResult_t r) {
  std::string msg = ncclGetErrorString(r);
  const char* last = comm != nullptr ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') msg += std::string(" (") + last + ")";
  return msg;
}

// The communicator is non-blocking (config.blocking = 0): a call may return ncclInProgress, and
// the next call must wait until ncclCommGetAsyncError says it is done. Polls for up to
// `timeout_s` (sleeping 50 us growing to 1 ms); ncclInProgress past it means a rank is missing.
ncclResult_t WaitNotInProgress(ncclComm_t comm, ncclResult_t r, double timeout_s) {
  if (r != ncclInProgress) return r;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  auto sleep = std::chrono::microseconds(50);
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) return q;
    if (state != ncclInProgress) return state;
    if (Clock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(sleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, std::chrono::microseconds(1000));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MpiCommunicator& mpi, ncclComm_t comm, cudaStream_t stream)
      : mpi_(mpi), comm_(comm), stream_(stream) {}

  // Finalizes (flushes the operations still on the stream, collectively) within
  // kFinalizeTimeoutS, then destroys; a communicator in error or past the timeout is aborted.
  ~NcclCommunicator() override {
    if (comm_ == nullptr) return;
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclSuccess &&
        WaitNotInProgress(comm_, ncclCommFinalize(comm_), kFinalizeTimeoutS) == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return mpi_.rank(); }
  int world_size() const override { return mpi_.world_size(); }
  bool device_memory() const override { return true; }

  // Enqueued on the backend's stream; returns before it completes (the backend's CopyToHost or
  // Synchronize waits for it, like for the kernels).
  void AllReduceSum(float* device_data, size_t count) override {
    if (count == 0) return;
    Check(ncclAllReduce(device_data, device_data, count, ncclFloat, ncclSum, comm_, stream_),
          "AllReduceSum (ncclAllReduce)");
  }

  // The root receives rank r's part at recv + r * count (its own by a device-to-device copy),
  // the others send theirs; one NCCL group, enqueued on the stream like AllReduceSum.
  void Gather(const float* send, size_t count, float* recv, int root) override {
    if (count == 0) return;
    const int me = rank(), size = world_size();
    if (me == root) {
      const cudaError_t e =
          cudaMemcpyAsync(recv + static_cast<size_t>(me) * count, send, count * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_);
      if (e != cudaSuccess) {
        Fail("Gather (the root's own part, cudaMemcpyAsync)", cudaGetErrorString(e));
      }
    }
    if (size == 1) return;
    Check(ncclGroupStart(), "Gather (ncclGroupStart)");
    if (me == root) {
      for (int r = 0; r < size; ++r) {
        if (r == root) continue;
        Check(ncclRecv(recv + static_cast<size_t>(r) * count, count, ncclFloat, r, comm_, stream_),
              "Gather (ncclRecv)");
      }
    } else {
      Check(ncclSend(send, count, ncclFloat, root, comm_, stream_), "Gather (ncclSend)");
    }
    Check(ncclGroupEnd(), "Gather (ncclGroupEnd)");
  }

  // Host memory (the step message, pipeline staging buffers) and health: the MPI communicator.
  void Broadcast(std::vector<uint8_t>& bytes, int root) override { mpi_.Broadcast(bytes, root); }
  void Send(const float* data, size_t count, int dest) override { mpi_.Send(data, count, dest); }
  void Recv(float* data, size_t count, int source) override { mpi_.Recv(data, count, source); }
  int StartRecv(float* data, size_t count, int source) override {
    return mpi_.StartRecv(data, count, source);
  }
  void WaitRecv(int handle) override { mpi_.WaitRecv(handle); }
  double StalledSeconds() const override { return mpi_.StalledSeconds(); }
  double SecondsSinceAllAnswered() const override { return mpi_.SecondsSinceAllAnswered(); }
  std::vector<std::string> HostNames() const override { return mpi_.HostNames(); }

 private:
  // An NCCL call's result: waits out ncclInProgress (bounded), and also reports an error NCCL
  // found asynchronously in an earlier operation (a peer gone, a network error).
  void Check(ncclResult_t r, const char* what) {
    r = WaitNotInProgress(comm_, r, kWaitTimeoutS);
    if (r == ncclSuccess) {
      ncclResult_t state = ncclSuccess;
      r = ncclCommGetAsyncError(comm_, &state);
      if (r == ncclSuccess) r = state == ncclInProgress ? ncclSuccess : state;
    }
    if (r != ncclSuccess) {
      Fail(what, r == ncclInProgress ? "still in progress after " +
                                           std::to_string(static_cast<int>(kWaitTimeoutS)) +
                                           " s (a rank is stopped, wedged or gone)"
                                     : NcclError(comm_, r));
    }
  }

  // The collective cannot complete, and the other ranks would wait for this one in the next:
  // like the MPI communicator past engine.rank_timeout_s, say which and end the job (the NCCL
  // communicator is aborted first so that kernels waiting on a dead peer return).
  [[noreturn]] void Fail(const char* what, const std::string& why) {
    std::fprintf(stderr, "rank %d: NCCL %s failed: %s; ending the job\n", mpi_.world_rank(), what,
                 why.c_str());
    std::fflush(stderr);
    ncclCommAbort(comm_);
    comm_ = nullptr;
    mpi_.AbortJob(3);
  }

  MpiCommunicator& mpi_;
  ncclComm_t comm_;
  cudaStream_t stream_;
};

}  // namespace

#endif  // LLM_HAVE_NCCL

StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(MpiCommunicator& mpi,
                                                               kernels::Backend& backend) {
  void* stream = kernels::CudaStreamOf(backend);
  if (stream == nullptr) {
    return FailedPrecondition("an NCCL communicator needs a CUDA backend, and backend '" +
                              backend.caps().name + "' is not one (engine.device: cuda)");
  }
#ifndef LLM_HAVE_NCCL
  (void)mpi;
  return Unavailable(
      "tensor parallelism on GPUs needs NCCL, and this build has none (nccl.h and libnccl were "
      "not found beside the CUDA toolkit when CMake configured it; install NCCL and reconfigure)");
#else
  // Rank 0 makes the id; if it cannot, it sends an empty one so that every rank fails alike.
  std::vector<uint8_t> id;
  Status made = Status::Ok();
  if (mpi.rank() == 0) {
    ncclUniqueId uid;
    const ncclResult_t r = ncclGetUniqueId(&uid);
    if (r == ncclSuccess) {
      id.assign(uid.internal, uid.internal + sizeof(uid.internal));
    } else {
      made = Internal("ncclGetUniqueId: " + NcclError(nullptr, r));
    }
  }
  const Status shared = ShareUniqueId(mpi, id);
  if (!made.ok()) return made;
  if (!shared.ok())
    return shared.WithContext("NCCL communicator (did rank 0 fail to make its id?)");
  ncclUniqueId uid;
  std::copy(id.begin(), id.end(), uid.internal);

  // Non-blocking: the init returns at once and is polled (bounded) instead of hanging forever
  // when a rank never joins. The device is this thread's current one, which CudaBackend selected
  // (call it on the thread that created the backend: the engine thread).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, mpi.world_size(), uid, mpi.rank(), &config);
  if (comm != nullptr) r = WaitNotInProgress(comm, r, kWaitTimeoutS);
  if (r != ncclSuccess) {
    const std::string why = r == ncclInProgress
                                ? "not every rank joined within " +
                                      std::to_string(static_cast<int>(kWaitTimeoutS)) + " s"
                                : NcclError(comm, r);
    if (comm != nullptr) ncclCommAbort(comm);
    return Internal("ncclCommInitRankConfig (rank " + std::to_string(mpi.rank()) + " of " +
                    std::to_string(mpi.world_size()) + "): " + why);
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(mpi, comm, static_cast<cudaStream_t>(stream)));
#endif
}

}  // namespace llm
