#include "kernels/cpu/panel_schedule.h"

#include <algorithm>

namespace llm::kernels::internal {

void PanelSchedule::Reset(int items, int threads) {
  if (threads < 1) threads = 1;
  if (static_cast<int>(ranges_.size()) < threads) ranges_ = std::vector<Range>(threads);
  threads_ = threads;
  for (int t = 0; t < threads; ++t) {
    const auto front = static_cast<uint32_t>(static_cast<int64_t>(items) * t / threads);
    const auto back = static_cast<uint32_t>(static_cast<int64_t>(items) * (t + 1) / threads);
    ranges_[t].bounds.store(Pack(front, back), std::memory_order_relaxed);
    ranges_[t].claimed_next = ranges_[t].claimed_end = 0;
  }
}

int PanelSchedule::Next(int t) {
  // A larger team than planned: such a thread owns no range. (Sharing range 0 lost items: two
  // owners stealing into one range, the second store overwrote the first's stolen items.)
  if (t < 0 || t >= threads_) return TakeFromFullest();
  Range& range = ranges_[t];
  if (range.claimed_next < range.claimed_end) return static_cast<int>(range.claimed_next++);
  for (;;) {
    std::atomic<uint64_t>& own = range.bounds;
    uint64_t v = own.load(std::memory_order_acquire);
    for (;;) {
      const auto front = static_cast<uint32_t>(v), back = static_cast<uint32_t>(v >> 32);
      if (front >= back) break;
      const uint32_t take = std::clamp((back - front) / 8, 1u, kMaxClaim);
      if (own.compare_exchange_weak(v, Pack(front + take, back), std::memory_order_acq_rel)) {
        range.claimed_next = front + 1;
        range.claimed_end = front + take;
        return static_cast<int>(front);
      }
    }
    if (!StealInto(t)) return -1;
  }
}

int PanelSchedule::TakeFromFullest() {
  for (;;) {
    uint64_t seen = 0;
    const int victim = Fullest(-1, &seen);
    if (victim < 0) return -1;
    const auto front = static_cast<uint32_t>(seen), back = static_cast<uint32_t>(seen >> 32);
    if (ranges_[victim].bounds.compare_exchange_strong(seen, Pack(front + 1, back),
                                                       std::memory_order_acq_rel)) {
      return static_cast<int>(front);
    }
  }
}

int PanelSchedule::Fullest(int skip, uint64_t* seen) const {
  int victim = -1;
  uint32_t most = 0;
  for (int u = 0; u < threads_; ++u) {
    if (u == skip) continue;
    const uint64_t v = ranges_[u].bounds.load(std::memory_order_acquire);
    const auto front = static_cast<uint32_t>(v), back = static_cast<uint32_t>(v >> 32);
    if (back > front && back - front > most) {
      most = back - front;
      victim = u;
      *seen = v;
    }
  }
  return victim;
}

// Moves the back half (rounded up) of the fullest other range into thread t's empty range.
// False when every range is empty.
bool PanelSchedule::StealInto(int t) {
  for (;;) {
    uint64_t seen = 0;
    const int victim = Fullest(t, &seen);
    if (victim < 0) return false;
    const auto front = static_cast<uint32_t>(seen), back = static_cast<uint32_t>(seen >> 32);
    const uint32_t take = (back - front + 1) / 2;
    if (ranges_[victim].bounds.compare_exchange_strong(seen, Pack(front, back - take),
                                                       std::memory_order_acq_rel)) {
      // Own range is empty, so no thief holds a value of it that could still succeed.
      ranges_[t].bounds.store(Pack(back - take, back), std::memory_order_release);
      return true;
    }
  }
}

}  // namespace llm::kernels::internal
