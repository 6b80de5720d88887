#include "worker/comm/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace llm {

namespace {

// Point-to-point message tags of this module (collectives need none).
enum class MpiTag : int {
  kBroadcastSize = 1001,  // u64 byte count of the Broadcast that follows
  kPipeline = 1002,       // floats from one pipeline stage to another (Send/Recv)
  kBroadcastData = 1003,  // the bytes of a Broadcast, after its size
};

// Completes `req` while idle: a 1 ms yield-spin (the next step of a busy engine costs no sleep),
// then sleeps growing from 50 us to 2 ms, and past that to 1/20 of the time idle so far, at most
// 10 ms. Each wake-up costs ~30-60 us of CPU on a VM (the timer, two context switches, the
// MPI_Test): at a 2 ms cap an idle follower used 2-4% of a core, 12% on a loaded CI host; at 10
// ms it uses well under 1%, and the first step after a long idle waits at most 5% longer.
void WaitIdle(MPI_Request* req) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(1000);
  int done = 0;
  MPI_Test(req, &done, MPI_STATUS_IGNORE);
  while (!done && Clock::now() < spin_until) {
    sched_yield();
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
  }
  constexpr std::chrono::microseconds kBusyCap(2000), kIdleCap(10000);
  std::chrono::microseconds sleep(50);
  while (!done) {
    std::this_thread::sleep_for(sleep);
    const auto idle = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    const auto cap = std::clamp<std::chrono::microseconds>(idle / 20, kBusyCap, kIdleCap);
    sleep = std::min(sleep * 2, cap);
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
  }
}

constexpr size_t kMaxPiece = size_t{1} << 30;  // MPI counts are int: pieces stay below

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct MpiCommunicator::Handle {
  MPI_Comm comm = MPI_COMM_WORLD;
  bool split = false;  // from MPI_Comm_split: freed with the communicator
};

struct MpiCommunicator::PendingRecv {
  std::vector<MPI_Request> requests;
};

// A Broadcast the root has sent and not seen completed: the sends and their buffers.
struct MpiCommunicator::PendingBroadcast {
  uint64_t size = 0;
  std::vector<uint8_t> bytes;
  std::vector<MPI_Request> requests;
};

// More Broadcasts than this not yet received: the root waits for the oldest (followers are
// never more than a few steps behind; this only bounds memory).
constexpr size_t kMaxPendingBroadcasts = 64;

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handle> comm, int world_rank, int local_size,
                                 bool owns_mpi)
    : comm_(std::move(comm)), world_rank_(world_rank), local_size_(local_size), owns_(owns_mpi) {}

// Completes `req` without a blocking MPI call. The other ranks normally answer within a step's
// compute, so it yield-spins 2 ms (progress + give the core away), then sleeps growing from
// 50 us to 1 ms: a rank that stopped answering costs no CPU here. Past timeout_s the job ends.
void MpiCommunicator::Wait(void* mpi_request, const char* what) {
  using Clock = std::chrono::steady_clock;
  MPI_Request* req = static_cast<MPI_Request*>(mpi_request);
  int done = 0;
  MPI_Test(req, &done, MPI_STATUS_IGNORE);
  if (done) return;
  const auto start = Clock::now();
  wait_since_ns_.store(NowNs(), std::memory_order_relaxed);
  const auto spin_until = start + std::chrono::milliseconds(2);
  while (!done && Clock::now() < spin_until) {
    sched_yield();
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
  }
  auto sleep = std::chrono::microseconds(50);
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_s_));
  while (!done) {
    if (timeout_s_ > 0 && Clock::now() > deadline) {
      std::fprintf(stderr,
                   "rank %d: the other ranks did not complete %s within engine.rank_timeout_s = "
                   "%.0f s (a rank is stopped, wedged or gone); ending the job\n",
                   world_rank_, what, timeout_s_);
      AbortJob(3);
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, std::chrono::microseconds(1000));
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
  }
  wait_since_ns_.store(0, std::memory_order_relaxed);
}

void MpiCommunicator::MarkAllAnswered() {
  all_answered_ns_.store(NowNs(), std::memory_order_relaxed);
}

double MpiCommunicator::SecondsSinceAllAnswered() const {
  const int64_t at = all_answered_ns_.load(std::memory_order_relaxed);
  return at == 0 ? -1.0 : static_cast<double>(NowNs() - at) * 1e-9;
}

double MpiCommunicator::StalledSeconds() const {
  const int64_t since = wait_since_ns_.load(std::memory_order_relaxed);
  return since == 0 ? 0.0 : static_cast<double>(NowNs() - since) * 1e-9;
}

StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      return Unavailable("MPI_Init_thread failed");
    }
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_FUNNELED) {
    return FailedPrecondition("the MPI library does not provide MPI_THREAD_FUNNELED");
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm host;
  int local_size = 1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &host);
  MPI_Comm_size(host, &local_size);
  MPI_Comm_free(&host);
  auto comm = std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(std::make_unique<Handle>(), world_rank, local_size, !initialized));
  comm->Describe();
  return comm;
}

StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Split(int color, int key) {
  auto handle = std::make_unique<Handle>();
  if (MPI_Comm_split(comm_->comm, color, key, &handle->comm) != MPI_SUCCESS) {
    return Internal("MPI_Comm_split failed");
  }
  handle->split = true;
  auto group = std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(std::move(handle), world_rank_, local_size_, false));
  group->timeout_s_ = timeout_s_;
  group->Describe();
  return group;
}

void MpiCommunicator::Describe() {
  MPI_Comm_rank(comm_->comm, &rank_);
  MPI_Comm_size(comm_->comm, &size_);
  // Every rank's host name, once (the coordinator's Stats lists them per rank).
  std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  char* mine = names.data() + static_cast<size_t>(rank_) * MPI_MAX_PROCESSOR_NAME;
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                comm_->comm);
  hosts_.clear();
  for (int r = 0; r < size_; ++r) {
    const char* name = names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts_.emplace_back(name, strnlen(name, MPI_MAX_PROCESSOR_NAME - 1));
  }
  MarkAllAnswered();  // the all-gather above
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  while (!pending_broadcasts_.empty()) {  // every rank receives what the root sent
    for (MPI_Request& r : pending_broadcasts_.front()->requests) Wait(&r, "a step message");
    pending_broadcasts_.pop_front();
  }
  if (comm_->split) {
    MPI_Comm_free(&comm_->comm);
    return;
  }
  if (!owns_) return;
  // MPI_Finalize waits for every rank of the job; one whose data-parallel group stopped early
  // waits here instead, asleep, for the groups still draining.
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  WaitIdle(&req);
  MPI_Finalize();
}

void MpiCommunicator::AbortJob(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

void MpiCommunicator::AllReduceSum(float* data, size_t count) {
  if (size_ == 1) return;
  const size_t segment = kMaxPiece * size_;  // keeps every MPI count an int
  for (size_t off = 0; off < count; off += segment) {
    ReduceSegment(data + off, std::min(segment, count - off));
  }
}

// Chunk r of every rank's vector goes to rank r, which sums the chunks in rank order; then
// every rank gathers all reduced chunks.
void MpiCommunicator::ReduceSegment(float* data, size_t count) {
  const size_t chunk = (count + size_ - 1) / size_;
  const size_t total = chunk * size_;
  if (send_.size() < total) send_.resize(total);
  if (recv_.size() < total) recv_.resize(total);
  std::copy(data, data + count, send_.begin());
  std::fill(send_.begin() + static_cast<long>(count), send_.begin() + static_cast<long>(total),
            0.0f);
  const int n = static_cast<int>(chunk);
  MPI_Request req;
  MPI_Ialltoall(send_.data(), n, MPI_FLOAT, recv_.data(), n, MPI_FLOAT, comm_->comm, &req);
  Wait(&req, "an all-reduce");
  MarkAllAnswered();
  float* sum = send_.data();
  for (size_t i = 0; i < chunk; ++i) sum[i] = recv_[i];
  for (int r = 1; r < size_; ++r) {
    const float* part = recv_.data() + r * chunk;
    for (size_t i = 0; i < chunk; ++i) sum[i] += part[i];
  }
  std::copy(sum, sum + chunk, recv_.begin() + static_cast<long>(rank_ * chunk));
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv_.data(), n, MPI_FLOAT, comm_->comm, &req);
  Wait(&req, "an all-reduce");
  std::copy(recv_.begin(), recv_.begin() + static_cast<long>(count), data);
}

void MpiCommunicator::Gather(const float* send, size_t count, float* recv, int root) {
  if (size_ == 1) {
    std::copy(send, send + count, recv);
    return;
  }
  MPI_Request req;
  MPI_Igather(send, static_cast<int>(count), MPI_FLOAT, recv, static_cast<int>(count), MPI_FLOAT,
              root, comm_->comm, &req);
  Wait(&req, "a gather");
  if (rank_ == root) MarkAllAnswered();
}

// MPI counts are int: a larger message goes in chunks. Calls post(offset, count) for each
// (once, with 0, for an empty message, as on the other side).
constexpr size_t kMaxChunkFloats = size_t{1} << 30;
template <typename Post>
void ForEachChunk(size_t count, Post&& post) {
  size_t done = 0;
  do {
    const size_t n = std::min(count - done, kMaxChunkFloats);
    post(done, static_cast<int>(n));
    done += n;
  } while (done < count);
}

void MpiCommunicator::Send(const float* data, size_t count, int dest) {
  ForEachChunk(count, [&](size_t offset, int n) {
    MPI_Request req;
    MPI_Isend(data + offset, n, MPI_FLOAT, dest, static_cast<int>(MpiTag::kPipeline), comm_->comm,
              &req);
    Wait(&req, "a send to another pipeline stage");
  });
}

void MpiCommunicator::Recv(float* data, size_t count, int source) {
  WaitRecv(StartRecv(data, count, source));
}

int MpiCommunicator::StartRecv(float* data, size_t count, int source) {
  auto pending = std::make_unique<PendingRecv>();
  ForEachChunk(count, [&](size_t offset, int n) {
    MPI_Irecv(data + offset, n, MPI_FLOAT, source, static_cast<int>(MpiTag::kPipeline), comm_->comm,
              &pending->requests.emplace_back());
  });
  const int handle = next_recv_handle_++;
  pending_recvs_.emplace(handle, std::move(pending));
  return handle;
}

void MpiCommunicator::WaitRecv(int handle) {
  auto it = pending_recvs_.find(handle);
  if (it == pending_recvs_.end()) return;
  for (MPI_Request& req : it->second->requests) {
    Wait(&req, "a message from another pipeline stage");
  }
  pending_recvs_.erase(it);
  MarkAllAnswered();
}

// Point-to-point from the root, which does not wait for the receivers: with pipeline stages
// the root sends the next step's plan while later stages still run the previous steps (a
// collective broadcast would hold the root until they join). The sends complete later; the
// next Broadcast and the destructor reap them.
void MpiCommunicator::Broadcast(std::vector<uint8_t>& bytes, int root) {
  if (size_ == 1) return;
  if (rank_ == root) {
    while (!pending_broadcasts_.empty()) {
      auto& reqs = pending_broadcasts_.front()->requests;
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (!done && pending_broadcasts_.size() < kMaxPendingBroadcasts) break;
      for (MPI_Request& r : reqs) Wait(&r, "a step message");
      pending_broadcasts_.pop_front();
    }
    auto b = std::make_unique<PendingBroadcast>();
    b->size = bytes.size();
    b->bytes = bytes;
    for (int r = 0; r < size_; ++r) {
      if (r == root) continue;
      MPI_Isend(&b->size, 1, MPI_UINT64_T, r, static_cast<int>(MpiTag::kBroadcastSize), comm_->comm,
                &b->requests.emplace_back());
      for (size_t off = 0; off < b->bytes.size(); off += kMaxPiece) {
        const int n = static_cast<int>(std::min<size_t>(b->bytes.size() - off, kMaxPiece));
        MPI_Isend(b->bytes.data() + off, n, MPI_BYTE, r, static_cast<int>(MpiTag::kBroadcastData),
                  comm_->comm, &b->requests.emplace_back());
      }
    }
    pending_broadcasts_.push_back(std::move(b));
    return;
  }
  uint64_t size = 0;
  MPI_Request req;
  MPI_Irecv(&size, 1, MPI_UINT64_T, root, static_cast<int>(MpiTag::kBroadcastSize), comm_->comm,
            &req);
  WaitIdle(&req);
  bytes.resize(size);
  for (size_t off = 0; off < size; off += kMaxPiece) {
    const int n = static_cast<int>(std::min<size_t>(size - off, kMaxPiece));
    MPI_Irecv(bytes.data() + off, n, MPI_BYTE, root, static_cast<int>(MpiTag::kBroadcastData),
              comm_->comm, &req);
    Wait(&req, "a step message");
  }
  MarkAllAnswered();
}

}  // namespace llm
