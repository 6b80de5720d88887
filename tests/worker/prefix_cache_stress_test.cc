// Prefix caching under churn: 10,000 random requests drawn from a few shared prefixes, with
// random aborts, preemptions (a small cache) and finishes, driven the way Engine::Step drives
// the scheduler. After every step each block's reference count equals the number of live
// tables holding it and no block is both free and held; at the end every block is free. The
// cache must also be used (hits) and a sequence's starting point must always be whole blocks
// of its own tokens.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "worker/engine/block_manager.h"
#include "worker/engine/scheduler.h"

namespace llm {
namespace {

TEST(PrefixCacheStress, ReferenceCountsBalanceThroughTenThousandRequests) {
  constexpr int kBlocks = 96, kBlockSize = 4, kRequests = 10000;
  BlockManager blocks(kBlocks, kBlockSize, /*prefix_caching=*/true);
  SchedulerConfig config;
  config.max_num_seqs = 12;
  config.max_num_batched_tokens = 64;
  config.max_prefill_chunk = 9;
  Scheduler sched(config, &blocks);
  std::mt19937 rng(1234);
  // Four shared prefixes (a system prompt each) of 0..30 tokens.
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> t(static_cast<size_t>(rng() % 31));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 50);
    prefixes.push_back(t);
  }
  std::map<int64_t, Sequence*> live;
  std::map<int64_t, int> max_tokens;
  int64_t next_id = 1, started = 0;
  SchedulePlan plan;
  int steps = 0;
  while ((started < kRequests || !sched.idle()) && steps < 200000) {
    ++steps;
    // Arrivals.
    for (int k = static_cast<int>(rng() % 3); k > 0 && started < kRequests; --k, ++started) {
      auto s = std::make_unique<Sequence>();
      s->id = next_id++;
      s->prompt = prefixes[rng() % prefixes.size()];
      for (int i = 1 + static_cast<int>(rng() % 12); i > 0; --i) {
        s->prompt.push_back(static_cast<int32_t>(rng() % 50));
      }
      live[s->id] = s.get();
      max_tokens[s->id] = 1 + static_cast<int>(rng() % 10);
      sched.Add(std::move(s));
    }
    sched.Schedule(&plan);
    for (const auto& e : plan.scheduled) {
      // A cached start is whole blocks, below the sequence's last token.
      ASSERT_LT(e.seq->num_computed, e.seq->num_tokens());
      ASSERT_LE(
          static_cast<int>(e.seq->block_table.size()) * kBlockSize,
          ((e.seq->num_computed + e.num_new_tokens + kBlockSize - 1) / kBlockSize) * kBlockSize);
    }
    sched.Commit(plan);
    std::vector<int64_t> done;
    for (const auto& e : plan.scheduled) {
      if (!e.samples) continue;
      e.seq->output.push_back(static_cast<int32_t>(rng() % 50));
      if (static_cast<int>(e.seq->output.size()) >= max_tokens[e.seq->id])
        done.push_back(e.seq->id);
    }
    // Random aborts, anywhere (running or waiting).
    if (!live.empty() && rng() % 7 == 0) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      done.push_back(it->first);
    }
    for (int64_t id : done) {
      if (!live.count(id)) continue;
      ASSERT_NE(sched.Remove(id), nullptr);
      live.erase(id);
    }
    // Reference counts equal the live tables holding each block.
    std::vector<int> held(kBlocks, 0);
    for (const auto& [id, s] : live) {
      for (int32_t b : s->block_table) ++held[static_cast<size_t>(b)];
    }
    int free_blocks = 0;
    for (int b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(blocks.ref_count(b), held[static_cast<size_t>(b)])
          << "block " << b << " step " << steps;
      free_blocks += held[static_cast<size_t>(b)] == 0 ? 1 : 0;
    }
    ASSERT_EQ(blocks.num_free(), free_blocks) << "step " << steps;
  }
  EXPECT_EQ(started, kRequests);
  EXPECT_TRUE(sched.idle());
  EXPECT_EQ(blocks.num_free(), kBlocks);
  EXPECT_GT(sched.prefix_cache_hit_tokens(), 0);
  EXPECT_GT(sched.prefix_cache_queried_tokens(), sched.prefix_cache_hit_tokens());
}

}  // namespace
}  // namespace llm
