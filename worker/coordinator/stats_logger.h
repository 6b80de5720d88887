// The coordinator's periodic engine stats line, as vLLM's: every engine.log_stats_interval_s
// one info line with the prompt and generation throughput since the last line, running and
// waiting requests, KV cache usage and the prefix cache hit rate. Only when something changed
// since the last line, so an idle cluster stays quiet. Reads EngineLoop::Snapshot() on its own
// thread: the engine thread does nothing for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "worker/coordinator/engine_loop.h"

namespace llm {

// The line for the interval from `prev` to `now` (`elapsed_s` long), or nothing when no
// counter or gauge moved.
std::optional<std::string> EngineStatsLine(const EngineLoopStats& prev, const EngineLoopStats& now,
                                           double elapsed_s);

class EngineStatsLogger {
 public:
  // Logs every `interval_s` seconds (> 0) until destroyed; `loop` must outlive it.
  EngineStatsLogger(const EngineLoop* loop, double interval_s);
  ~EngineStatsLogger();
  EngineStatsLogger(const EngineStatsLogger&) = delete;
  EngineStatsLogger& operator=(const EngineStatsLogger&) = delete;

 private:
  void Run();
  const EngineLoop* loop_;
  const std::chrono::duration<double> interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace llm
