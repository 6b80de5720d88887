// Splits a parallel loop's items (a matmul's weight panels) into one contiguous range per thread,
// and lets a thread that finishes its own range take the back half of the fullest other range.
//
// Why not OpenMP's schedules: static leaves the whole team waiting at the barrier for the slowest
// core (a decode step is ~90 matmuls, and this machine's other tenants slow one core at a time:
// 7% of a 2-thread F16 decode profile was threads waiting in libgomp), and dynamic hands out
// small chunks in turn, so no thread reads the weights as one sequential stream (Q4_K_M decode
// 50-54 -> 38-49 tok/s measured). Here each thread walks its own range front to back, and only
// the tail of a slow thread's range moves.
//
// Which thread computes an item never changes what is computed (k is never split), so results
// stay the same bits.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace llm::kernels::internal {

class PanelSchedule {
 public:
  // Items [0, items) split evenly over `threads` ranges (threads >= 1).
  void Reset(int items, int threads);

  // The next item for thread t (its own range first, then stolen ones), or -1 when every
  // range is empty. Each item is returned exactly once over all threads. A range whose thread
  // never runs (a smaller team than planned) is taken by the others; a thread beyond the plan
  // (a larger team) has no range and takes single items from the fullest one.
  int Next(int t);

 private:
  // front in the low 32 bits, back (exclusive) in the high 32: one word, so the owner taking
  // the front and a thief taking the back can never both take the last item.
  // claimed_next .. claimed_end: items its owner took off the front in one go and has not yet
  // returned (only the owner touches them).
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds{0};
    uint32_t claimed_next = 0, claimed_end = 0;
  };
  // How many items an owner takes off its own front in one atomic step: up to kMaxClaim, and an
  // eighth of what is left, so that near a range's end single items remain for thieves. Why: a
  // GEMV panel is 16 weight rows (18 KiB of a Q4_K row of 2048), so a decode step took ~33,000
  // locked compare-exchanges, each a full fence in the weight stream (PanelSchedule::Next was
  // 1.2% of a TinyLlama Q4_K_M decode profile; Xeon, 30 Nov 2026).
  static constexpr uint32_t kMaxClaim = 4;
  static uint64_t Pack(uint32_t front, uint32_t back) {
    return (static_cast<uint64_t>(back) << 32) | front;
  }
  bool StealInto(int t);
  // One item from the front of the fullest range, for a thread with no range of its own.
  int TakeFromFullest();
  // The range (other than `skip`) with the most items left, and its bounds word; -1 when all
  // are empty.
  int Fullest(int skip, uint64_t* seen) const;

  std::vector<Range> ranges_;
  int threads_ = 0;
};

}  // namespace llm::kernels::internal
