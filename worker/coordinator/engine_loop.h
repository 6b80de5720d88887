// The engine loop of the coordinator: one thread (the process main thread) owns the Engine and
// runs it; gRPC threads hand it new requests and cancellations through a mutex-protected inbox.
// When there is nothing to do the loop blocks on a condition variable (no spinning).
//
// Thread affinity:
//   Run()                    the engine thread only (it owns the Engine);
//   Submit/Cancel/Stop/      any thread;
//   Snapshot()
//   RequestSink callbacks    are invoked on the engine thread, one request at a time (after
//                            Stop(), Submit answers OnError on the calling thread).
// No gRPC type appears here: the coordinator service adapts a RequestSink to a stream.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "worker/engine/engine.h"

namespace llm {

// Receives the results of one request. Called on the engine thread; must not block for long
// (queue and return). After OnFinish or OnError nothing more is called.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // One new token. `finish` is kNone except on the request's last token; then `prompt_tokens`
  // and `completion_tokens` are its usage and `timings` where its time went.
  virtual void OnToken(const SampleResult& sample, FinishReason finish, int prompt_tokens,
                       int completion_tokens, const RequestTimings& timings) = 0;
  // The request was rejected (Engine::Add) or failed; its blocks are already free.
  virtual void OnError(const Status& status) = 0;
};

// A copy of the engine's counters, published by the engine thread after every change.
struct EngineLoopStats {
  EngineStats engine;
  int block_size = 0;
  DType kv_cache_dtype = DType::kF32;  // Engine::kv_cache_dtype
  int64_t requests_total = 0;          // admitted by Engine::Add
  int64_t prompt_tokens_total = 0;     // prompt tokens of admitted requests
  int64_t aborts_total = 0;            // requests cancelled by their caller
  int64_t rejected_queue_full = 0;     // refused: the waiting queue was full
  int64_t queue_timeouts = 0;          // failed: waited longer than the queue timeout
};

// Bounds on the waiting queue: beyond them a request fails with ResourceExhausted (the router
// answers 429 with Retry-After) instead of growing memory or waiting without end.
struct QueueLimits {
  int max_waiting = 0;   // requests queued but not yet scheduled; 0: unbounded
  double timeout_s = 0;  // a request still queued this long fails; 0: never
};

class EngineLoop {
 public:
  EngineLoop(std::unique_ptr<Engine> engine, int block_size, QueueLimits limits = {});
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request; results go to `sink`. Returns a ticket for Cancel. Any thread.
  uint64_t Submit(GenerateRequest request, std::shared_ptr<RequestSink> sink);
  // Aborts the request of `ticket` at the start of the next step, freeing its blocks; its sink
  // gets no further call. Unknown or finished tickets are ignored. Any thread.
  void Cancel(uint64_t ticket);
  // Makes Run() return after the current step. Any thread; safe to call more than once.
  void Stop();
  // Makes Run() return once nothing is running or waiting, or at `deadline` (then what is
  // still live gets OnError(Unavailable)). New requests are refused from now on. Any thread.
  void StopWhenIdle(std::chrono::steady_clock::time_point deadline);
  // Runs steps until Stop(). Requests still live when it returns get OnError(Unavailable).
  void Run();

  EngineLoopStats Snapshot() const;

 private:
  struct InboxItem {
    uint64_t ticket = 0;
    bool cancel = false;
    GenerateRequest request;
    std::shared_ptr<RequestSink> sink;
  };
  struct Live {
    uint64_t ticket = 0;
    std::shared_ptr<RequestSink> sink;
    int prompt_tokens = 0;
    int completion_tokens = 0;
    std::chrono::steady_clock::time_point admitted;
  };

  // Engine-thread helpers.
  void ApplyInbox(std::vector<InboxItem>& items);
  void Admit(InboxItem& item);
  void RunStep();
  void ExpireQueued();
  void FailAll(const Status& status);
  void Publish();

  // Owned by the engine thread.
  std::unique_ptr<Engine> engine_;
  QueueLimits limits_;
  std::unordered_map<int64_t, Live> live_;           // engine request id -> request
  std::unordered_map<uint64_t, int64_t> by_ticket_;  // ticket -> engine request id
  std::vector<TokenEvent> events_;
  EngineLoopStats counters_;

  // Shared with other threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<InboxItem> inbox_;
  uint64_t next_ticket_ = 1;
  bool stop_ = false;
  bool stop_when_idle_ = false;
  std::chrono::steady_clock::time_point idle_deadline_;
  EngineLoopStats published_;
};

}  // namespace llm
