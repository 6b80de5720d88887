// Communicator over MPI, for tensor parallelism across CPU ranks (one process per socket or
// node, started by mpirun). mpi.h stays inside the .cc file.
//
// Threading: MPI is initialized with MPI_THREAD_FUNNELED; only the thread that created the
// communicator (the engine thread) may call it. OpenMP threads never touch MPI.
//
// Waiting: ranks never sit in a blocking MPI call. Collectives inside a step are non-blocking
// requests completed by MPI_Test + sched_yield for 2 ms (so oversubscribed ranks, more ranks than
// cores, still progress), then MPI_Test with sleeps growing to 1 ms, so a rank that stopped
// answering costs its peers no CPU; one that has not answered within the timeout
// (engine.rank_timeout_s) ends the job with a log line naming the collective. A follower
// waiting for the next step message (Broadcast on a non-root rank) yield-spins 1 ms, then polls
// with sleep backoff (50 us growing to 2 ms) without a timeout, so an idle engine costs ~0% CPU
// on every rank.
//
// AllReduceSum is deterministic: every element is summed in rank order (0, 1, ..., W-1) by the
// rank owning its chunk (all-to-all, local sum, all-gather), so all ranks get bitwise the same
// result and the result does not depend on the message size (batch composition).
// MPI errors are fatal (MPI_ERRORS_ARE_FATAL): a broken link ends the whole job.
//
// Pipeline parallelism: Send/Recv (and StartRecv/WaitRecv) are non-blocking point-to-point
// messages completed like the collectives (same waiting and timeout), in chunks of at most 2^30
// floats.
//
// Data parallelism: Create gives the world (MPI_COMM_WORLD); Split gives each data-parallel
// group its own communicator (MPI_Comm_split), so every collective of one engine, the step
// message's point-to-point size message included, runs among its group only and groups never
// wait for each other. The world communicator outlives the groups split from it; its
// destructor waits for every rank of the job (a non-blocking barrier with the idle backoff,
// so ranks whose group stopped first sleep) before MPI_Finalize.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/communicator.h"

namespace llm {

class MpiCommunicator final : public Communicator {
 public:
  // Initializes MPI (unless already initialized) on MPI_COMM_WORLD. FailedPrecondition when
  // the MPI library cannot give MPI_THREAD_FUNNELED.
  static StatusOr<std::unique_ptr<MpiCommunicator>> Create(int* argc, char*** argv);
  // The communicator of the ranks that pass the same `color` (ranks ordered by `key`): every
  // rank of this communicator must call it (collective). Its rank() and world_size() are those
  // inside the group, HostNames() the group's; local_size() stays the whole job's ranks on this
  // host (they share its cores). Must be destroyed before the communicator it came from.
  StatusOr<std::unique_ptr<MpiCommunicator>> Split(int color, int key);
  // A group: frees its MPI communicator. The world: waits (sleeping) until every rank of the
  // job got here, then finalizes MPI if Create initialized it.
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  // This rank in MPI_COMM_WORLD (for log lines; rank() is the rank inside this communicator).
  int world_rank() const { return world_rank_; }
  int world_size() const override { return size_; }
  // Ranks of this job on this host (for sizing thread pools).
  int local_size() const { return local_size_; }
  void AllReduceSum(float* data, size_t count) override;
  void Gather(const float* send, size_t count, float* recv, int root) override;
  void Broadcast(std::vector<uint8_t>& bytes, int root) override;
  void Send(const float* data, size_t count, int dest) override;
  void Recv(float* data, size_t count, int source) override;
  int StartRecv(float* data, size_t count, int source) override;
  void WaitRecv(int handle) override;
  double StalledSeconds() const override;
  double SecondsSinceAllAnswered() const override;
  std::vector<std::string> HostNames() const override { return hosts_; }
  // A collective not completed within `seconds` ends the job (0: wait forever).
  void set_timeout_s(double seconds) { timeout_s_ = seconds; }
  // Ends every rank of the job (MPI_Abort): for a rank that can no longer follow, since the
  // others would wait for it in the next collective.
  [[noreturn]] void AbortJob(int code);

 private:
  struct Handle;            // the MPI_Comm (mpi.h stays in the .cc file)
  struct PendingRecv;       // the MPI_Requests of a StartRecv
  struct PendingBroadcast;  // a Broadcast's sends on the root, until they complete
  MpiCommunicator(std::unique_ptr<Handle> comm, int world_rank, int local_size, bool owns_mpi);
  // Learns rank, size and every rank's host name (collective over the communicator).
  void Describe();
  // A collective completed: every rank took part.
  void MarkAllAnswered();
  void ReduceSegment(float* data, size_t count);
  // Completes an MPI_Request* (void* keeps mpi.h out of this header).
  void Wait(void* mpi_request, const char* what);
  std::unique_ptr<Handle> comm_;
  int rank_ = 0, size_ = 1, world_rank_ = 0, local_size_ = 1;
  bool owns_;  // MPI itself: finalize it in the destructor
  double timeout_s_ = 0;
  std::atomic<int64_t> wait_since_ns_{0};    // steady clock; 0 when no collective is pending
  std::atomic<int64_t> all_answered_ns_{0};  // steady clock of the last completed collective
  std::vector<std::string> hosts_;           // by rank, from Create
  std::vector<float> send_, recv_;           // AllReduceSum scratch, only grows
  std::map<int, std::unique_ptr<PendingRecv>> pending_recvs_;         // by StartRecv handle
  std::deque<std::unique_ptr<PendingBroadcast>> pending_broadcasts_;  // oldest first
  int next_recv_handle_ = 1;
};

}  // namespace llm
