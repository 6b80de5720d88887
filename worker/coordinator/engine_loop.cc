#include "worker/coordinator/engine_loop.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace llm {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, int block_size, QueueLimits limits)
    : engine_(std::move(engine)), limits_(limits) {
  counters_.block_size = block_size;
  counters_.kv_cache_dtype = engine_->kv_cache_dtype();
  Publish();
}

EngineLoop::~EngineLoop() = default;

uint64_t EngineLoop::Submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  if (stop_ || stop_when_idle_) {  // Run() has returned or is about to: nobody would answer
    lock.unlock();
    sink->OnError(Unavailable("the coordinator is shutting down"));
    return ticket;
  }
  InboxItem item;
  item.ticket = ticket;
  item.request = std::move(request);
  item.sink = std::move(sink);
  inbox_.push_back(std::move(item));
  cv_.notify_one();
  return ticket;
}

void EngineLoop::Cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  InboxItem item;
  item.ticket = ticket;
  item.cancel = true;
  inbox_.push_back(std::move(item));
  cv_.notify_one();
}

void EngineLoop::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_one();
}

void EngineLoop::StopWhenIdle(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_when_idle_ || deadline < idle_deadline_) idle_deadline_ = deadline;
  stop_when_idle_ = true;
  cv_.notify_one();
}

EngineLoopStats EngineLoop::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

void EngineLoop::Run() {
  std::vector<InboxItem> items;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // engine_ is only touched by this thread; reading it under mu_ is just convenient.
      auto ready = [&] {
        return stop_ || !inbox_.empty() || !engine_->idle() ||
               (stop_when_idle_ &&
                (engine_->idle() || std::chrono::steady_clock::now() >= idle_deadline_));
      };
      if (stop_when_idle_) {
        cv_.wait_until(lock, idle_deadline_, ready);
      } else {
        cv_.wait(lock, ready);
      }
      const bool drained = stop_when_idle_ && inbox_.empty() && engine_->idle();
      const bool late = stop_when_idle_ && std::chrono::steady_clock::now() >= idle_deadline_;
      if (stop_ || drained || late) {
        if (late && !engine_->idle()) {
          spdlog::warn("shutdown grace period over: {} request(s) still running are ended",
                       live_.size());
        }
        items.swap(inbox_);
        break;
      }
      items.swap(inbox_);
    }
    ApplyInbox(items);
    items.clear();
    if (engine_->idle()) {
      Publish();
    } else {
      RunStep();
    }
  }
  const Status shutting_down = Unavailable("the coordinator is shutting down");
  for (auto& item : items) {
    if (!item.cancel) item.sink->OnError(shutting_down);
  }
  FailAll(shutting_down);
  Publish();
}

void EngineLoop::ApplyInbox(std::vector<InboxItem>& items) {
  // In arrival order, so a cancel always follows the submit of its ticket.
  for (auto& item : items) Admit(item);
}

void EngineLoop::Admit(InboxItem& item) {
  if (item.cancel) {
    auto it = by_ticket_.find(item.ticket);
    if (it == by_ticket_.end()) return;  // already finished or rejected
    engine_->Abort(it->second);
    live_.erase(it->second);
    by_ticket_.erase(it);
    counters_.aborts_total++;
    return;
  }
  if (limits_.max_waiting > 0 && engine_->stats().waiting >= limits_.max_waiting) {
    counters_.rejected_queue_full++;
    Publish();  // a caller that sees the error sees the counter
    item.sink->OnError(ResourceExhausted("the coordinator's waiting queue is full (" +
                                         std::to_string(limits_.max_waiting) +
                                         " requests, engine.max_waiting_requests); retry later"));
    return;
  }
  const int prompt_tokens = static_cast<int>(item.request.prompt.size());
  StatusOr<int64_t> id = engine_->Add(std::move(item.request));
  if (!id.ok()) {
    item.sink->OnError(id.status());
    return;
  }
  live_[*id] =
      Live{item.ticket, std::move(item.sink), prompt_tokens, 0, std::chrono::steady_clock::now()};
  by_ticket_[item.ticket] = *id;
  counters_.requests_total++;
  counters_.prompt_tokens_total += prompt_tokens;
}

// Requests that have waited in the queue longer than the timeout, with no token yet, fail.
void EngineLoop::ExpireQueued() {
  if (limits_.timeout_s <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(limits_.timeout_s);
  for (auto it = live_.begin(); it != live_.end();) {
    Live& l = it->second;
    if (l.completion_tokens > 0 || now - l.admitted < limit || !engine_->IsWaiting(it->first)) {
      ++it;
      continue;
    }
    engine_->Abort(it->first);
    counters_.queue_timeouts++;
    Publish();  // a caller that sees the error sees the counter
    l.sink->OnError(ResourceExhausted(
        "the request waited more than " + std::to_string(static_cast<int>(limits_.timeout_s)) +
        " s in the coordinator's queue (engine.queue_timeout_s); retry later"));
    by_ticket_.erase(l.ticket);
    it = live_.erase(it);
  }
}

void EngineLoop::RunStep() {
  ExpireQueued();
  if (engine_->idle()) {
    Publish();
    return;
  }
  events_.clear();
  const Status status = engine_->Step(&events_);
  if (!status.ok()) {
    spdlog::error("engine step failed, aborting {} running requests: {}", live_.size(),
                  status.ToString());
    FailAll(status);
    Publish();
    return;
  }
  // Before the tokens go out: a caller that has seen a token sees Stats at least this new.
  Publish();
  for (const TokenEvent& ev : events_) {
    auto it = live_.find(ev.request_id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    l.completion_tokens++;
    l.sink->OnToken(ev.sample, ev.finish, l.prompt_tokens, l.completion_tokens, ev.timings);
    if (ev.finish != FinishReason::kNone) {
      by_ticket_.erase(l.ticket);
      live_.erase(it);
    }
  }
}

void EngineLoop::FailAll(const Status& status) {
  for (auto& [id, l] : live_) {
    engine_->Abort(id);
    l.sink->OnError(status);
  }
  live_.clear();
  by_ticket_.clear();
}

void EngineLoop::Publish() {
  EngineLoopStats s = counters_;
  s.engine = engine_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  published_ = s;
}

}  // namespace llm
