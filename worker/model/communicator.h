// Collectives between the ranks of one engine. Every cross-rank operation goes through this
// interface: MPI on CPU (worker/comm/mpi_communicator.*), NCCL on GPU
// (worker/comm/nccl_communicator.*). All ranks call the
// same collectives in the same order. Thread affinity: only the engine thread of each rank.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace llm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // True when AllReduceSum and Gather take device (GPU) memory (NCCL), false for host memory.
  virtual bool device_memory() const { return false; }

  // In-place sum over all ranks of `count` floats.
  virtual void AllReduceSum(float* data, size_t count) = 0;
  // Rank r's `count` floats land at recv[r * count]; recv is significant on `root` only.
  virtual void Gather(const float* send, size_t count, float* recv, int root) = 0;
  // Broadcasts a byte message from `root`; on other ranks `bytes` is replaced.
  // Followers waiting here must not busy-spin a core while the engine is idle.
  virtual void Broadcast(std::vector<uint8_t>& bytes, int root) = 0;
  // Point-to-point, between pipeline stages: `count` floats to rank `dest`, and from rank
  // `source` (the count must match the sender's). Messages between two ranks arrive in order.
  virtual void Send(const float* data, size_t count, int dest) = 0;
  virtual void Recv(float* data, size_t count, int source) = 0;
  // A receive posted now and completed later (WaitRecv with the returned handle), so the
  // sender's Send completes while this rank does other work; `data` must stay valid until then.
  virtual int StartRecv(float* data, size_t count, int source) = 0;
  virtual void WaitRecv(int handle) = 0;

  // How long the collective this rank is in has been waiting for the other ranks (0 when
  // none is pending, and never for a follower's idle wait for the next step). Any thread may
  // ask: the coordinator's health reports a rank that stopped answering.
  virtual double StalledSeconds() const { return 0.0; }
  // Seconds since a collective in which every rank took part last completed on this rank; < 0
  // before the first. Any thread (the coordinator's Stats reports it per rank).
  virtual double SecondsSinceAllAnswered() const { return -1.0; }
  // The host name of every rank (index = rank), learnt once at start-up; empty when unknown.
  virtual std::vector<std::string> HostNames() const { return {}; }
};

// A world of one rank: every collective is a no-op (or a copy).
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void AllReduceSum(float*, size_t) override {}
  void Gather(const float* send, size_t count, float* recv, int) override {
    std::copy(send, send + count, recv);
  }
  void Broadcast(std::vector<uint8_t>&, int) override {}
  // There is no other rank to talk to: a caller bug.
  void Send(const float*, size_t, int) override { std::abort(); }
  void Recv(float*, size_t, int) override { std::abort(); }
  int StartRecv(float*, size_t, int) override { std::abort(); }
  void WaitRecv(int) override { std::abort(); }
};

}  // namespace llm
