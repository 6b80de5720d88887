// PanelSchedule hands every item out exactly once, whatever the team does: threads that run
// concurrently, a thread that is stuck (its range is stolen), a team smaller or larger than
// planned.
#include "kernels/cpu/panel_schedule.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace llm::kernels::internal {
namespace {

// Runs `team` threads over a schedule planned for `planned`. Returns how many times each item
// was handed out and how many items thread 0 did.
std::vector<int> RunTeam(PanelSchedule& s, int items, int planned, int team, int* done_by_0) {
  s.Reset(items, planned);
  std::vector<std::atomic<int>> seen(items);
  std::atomic<int> by0{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < team; ++t) {
    threads.emplace_back([&, t] {
      for (int p = s.Next(t); p >= 0; p = s.Next(t)) {
        ASSERT_LT(p, items);
        seen[p].fetch_add(1);
        if (t == 0) by0.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  if (done_by_0 != nullptr) *done_by_0 = by0.load();
  std::vector<int> counts(items);
  for (int i = 0; i < items; ++i) counts[i] = seen[i].load();
  return counts;
}

void ExpectEachOnce(const std::vector<int>& counts) {
  for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i], 1) << "item " << i;
}

TEST(PanelSchedule, EveryItemOnceUnderContention) {
  PanelSchedule s;
  for (int items : {0, 1, 2, 3, 7, 64, 1000, 5001}) {
    for (int team : {1, 2, 3, 4, 8}) {
      SCOPED_TRACE("items " + std::to_string(items) + " team " + std::to_string(team));
      for (int rep = 0; rep < 5; ++rep) ExpectEachOnce(RunTeam(s, items, team, team, nullptr));
    }
  }
}

TEST(PanelSchedule, SlowThreadsTailIsStolen) {
  // Thread 0 owns items [0, 100) and is stuck in item 0 while thread 1 runs to the end: thread 1
  // does its own [100, 200) and then all of thread 0's other items, stolen from the back, but
  // for the ones thread 0 took with item 0 in one atomic step (kMaxClaim: 1, 2, 3), which
  // thread 0 then returns in order.
  PanelSchedule s;
  s.Reset(200, 2);
  std::vector<int> counts(200);
  ASSERT_EQ(s.Next(0), 0);
  counts[0]++;
  std::vector<int> by1;
  std::thread other([&] {
    for (int p = s.Next(1); p >= 0; p = s.Next(1)) by1.push_back(p);
  });
  other.join();
  for (int p : by1) counts[p]++;
  EXPECT_EQ(by1.size(), 196u);
  for (int want : {1, 2, 3}) {
    ASSERT_EQ(s.Next(0), want);
    counts[want]++;
  }
  EXPECT_EQ(s.Next(0), -1);
  ExpectEachOnce(counts);
}

TEST(PanelSchedule, ClaimsShrinkNearARangesEnd) {
  // One thread alone: its own range [0, 40) walked in order, claims of min(4, left / 8) items;
  // each claim leaves the range's front past it, so at 8 items left a thief still finds 7.
  PanelSchedule s;
  s.Reset(80, 2);
  for (int want = 0; want < 32; ++want) ASSERT_EQ(s.Next(0), want);
  // Left in range 0: [32, 40), none claimed. Thread 1 takes its own [40, 80), then steals the
  // back half of 8: 36..39.
  for (int want = 40; want < 80; ++want) ASSERT_EQ(s.Next(1), want);
  EXPECT_EQ(s.Next(1), 36);
  EXPECT_EQ(s.Next(0), 32);
}

TEST(PanelSchedule, SmallerOrLargerTeamThanPlanned) {
  PanelSchedule s;
  int by0 = 0;
  ExpectEachOnce(RunTeam(s, 300, 4, 1, &by0));  // one thread takes the other three ranges
  EXPECT_EQ(by0, 300);
  ExpectEachOnce(RunTeam(s, 300, 2, 5, nullptr));  // threads 2..4 share range 0
}

TEST(PanelSchedule, OwnRangeIsWalkedFrontToBack) {
  PanelSchedule s;
  s.Reset(10, 2);
  std::vector<int> got;
  for (int i = 0; i < 5; ++i) got.push_back(s.Next(1));
  EXPECT_EQ(got, (std::vector<int>{5, 6, 7, 8, 9}));
  // Then thread 1 steals the back half of [0, 5): 2, 3, 4 in order.
  EXPECT_EQ(s.Next(1), 2);
  EXPECT_EQ(s.Next(0), 0);
  EXPECT_EQ(s.Next(0), 1);
  EXPECT_EQ(s.Next(1), 3);
  EXPECT_EQ(s.Next(1), 4);
  EXPECT_EQ(s.Next(0), -1);
  EXPECT_EQ(s.Next(1), -1);
}

}  // namespace
}  // namespace llm::kernels::internal
