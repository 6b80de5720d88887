#include "worker/coordinator/stats_logger.h"

#include <spdlog/spdlog.h>

#include <cstdio>

namespace llm {

std::optional<std::string> EngineStatsLine(const EngineLoopStats& prev, const EngineLoopStats& now,
                                           double elapsed_s) {
  const EngineStats& a = prev.engine;
  const EngineStats& b = now.engine;
  const bool changed =
      b.prompt_tokens_computed != a.prompt_tokens_computed ||
      b.tokens_generated != a.tokens_generated || b.running != a.running ||
      b.waiting != a.waiting || b.blocks_free != a.blocks_free || b.preemptions != a.preemptions ||
      now.requests_total != prev.requests_total || now.aborts_total != prev.aborts_total ||
      now.rejected_queue_full != prev.rejected_queue_full ||
      now.queue_timeouts != prev.queue_timeouts;
  if (!changed) return std::nullopt;
  const double secs = elapsed_s > 0 ? elapsed_s : 1.0;
  const double prompt_tps =
      static_cast<double>(b.prompt_tokens_computed - a.prompt_tokens_computed) / secs;
  const double gen_tps = static_cast<double>(b.tokens_generated - a.tokens_generated) / secs;
  const double kv =
      b.blocks_total > 0
          ? 100.0 * (1.0 - static_cast<double>(b.blocks_free) / static_cast<double>(b.blocks_total))
          : 0.0;
  const double hit = b.prefix_cache_queried_tokens > 0
                         ? 100.0 * static_cast<double>(b.prefix_cache_hit_tokens) /
                               static_cast<double>(b.prefix_cache_queried_tokens)
                         : 0.0;
  char line[320];
  std::snprintf(line, sizeof(line),
                "engine: avg prompt throughput: %.1f tokens/s, avg generation throughput: %.1f "
                "tokens/s, running: %d reqs, waiting: %d reqs, KV cache usage: %.1f%%, prefix "
                "cache hit rate: %.1f%%",
                prompt_tps, gen_tps, b.running, b.waiting, kv, hit);
  return std::string(line);
}

EngineStatsLogger::EngineStatsLogger(const EngineLoop* loop, double interval_s)
    : loop_(loop), interval_(interval_s), thread_([this] { Run(); }) {}

EngineStatsLogger::~EngineStatsLogger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EngineStatsLogger::Run() {
  using Clock = std::chrono::steady_clock;
  EngineLoopStats last = loop_->Snapshot();
  Clock::time_point last_at = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto next = last_at + std::chrono::duration_cast<Clock::duration>(interval_);
    if (cv_.wait_until(lock, next, [this] { return stop_; })) return;
    const EngineLoopStats now = loop_->Snapshot();
    const Clock::time_point now_at = Clock::now();
    const double elapsed = std::chrono::duration<double>(now_at - last_at).count();
    if (std::optional<std::string> line = EngineStatsLine(last, now, elapsed)) {
      spdlog::info("{}", *line);
    }
    last = now;
    last_at = now_at;
  }
}

}  // namespace llm
