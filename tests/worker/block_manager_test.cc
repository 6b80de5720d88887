#include "worker/engine/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace llm {
namespace {

// Every block is in at most one table, every id is in range, and the tables plus the free
// list account for every block.
void ExpectConsistent(const BlockManager& bm, const std::vector<std::vector<int32_t>>& tables) {
  std::set<int32_t> seen;
  int used = 0;
  for (const auto& t : tables) {
    for (int32_t b : t) {
      EXPECT_GE(b, 0);
      EXPECT_LT(b, bm.num_blocks());
      EXPECT_TRUE(seen.insert(b).second) << "block " << b << " is in two live tables";
      ++used;
    }
  }
  EXPECT_EQ(used + bm.num_free(), bm.num_blocks());
}

TEST(BlockManagerTest, StartsAllFree) {
  BlockManager bm(10, 16);
  EXPECT_EQ(bm.num_blocks(), 10);
  EXPECT_EQ(bm.block_size(), 16);
  EXPECT_EQ(bm.num_free(), 10);
}

TEST(BlockManagerTest, BlocksForIsCeil) {
  struct Case {
    int block_size, tokens, blocks;
  };
  const Case cases[] = {{4, 0, 0},   {4, 1, 1},   {4, 3, 1}, {4, 4, 1},  {4, 5, 2},
                        {4, 8, 2},   {4, 9, 3},   {1, 7, 7}, {16, 1, 1}, {16, 16, 1},
                        {16, 17, 2}, {16, 33, 3}, {3, 9, 3}, {3, 10, 4}, {5, 0, 0}};
  for (const Case& c : cases) {
    BlockManager bm(64, c.block_size);
    EXPECT_EQ(bm.BlocksFor(c.tokens), c.blocks) << "bs=" << c.block_size << " tokens=" << c.tokens;
    std::vector<int32_t> table;
    EXPECT_EQ(bm.MissingBlocks(table, c.tokens), c.blocks);
    ASSERT_TRUE(bm.Grow(table, c.tokens));
    EXPECT_EQ(static_cast<int>(table.size()), c.blocks)
        << "bs=" << c.block_size << " tokens=" << c.tokens;
    EXPECT_EQ(bm.num_free(), 64 - c.blocks);
    EXPECT_EQ(bm.MissingBlocks(table, c.tokens), 0);
  }
}

TEST(BlockManagerTest, GrowsOnlyWhenCrossingABlockBoundary) {
  BlockManager bm(8, 4);
  std::vector<int32_t> table;
  // Blocks added by growing to 1, 2, ..., 13 tokens one at a time.
  const std::vector<int> expected = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  std::vector<int> added;
  for (int tokens = 1; tokens <= 13; ++tokens) {
    const size_t before = table.size();
    ASSERT_TRUE(bm.Grow(table, tokens));
    added.push_back(static_cast<int>(table.size() - before));
  }
  EXPECT_EQ(added, expected);
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(bm.num_free(), 4);
  // Growing to fewer tokens than the table covers changes nothing.
  const std::vector<int32_t> snapshot = table;
  EXPECT_TRUE(bm.Grow(table, 16));
  EXPECT_TRUE(bm.Grow(table, 3));
  EXPECT_TRUE(bm.Grow(table, 0));
  EXPECT_EQ(table, snapshot);
  EXPECT_EQ(bm.num_free(), 4);
  // A jump of several blocks at once.
  ASSERT_TRUE(bm.Grow(table, 30));
  EXPECT_EQ(table.size(), 8u);
  EXPECT_EQ(bm.num_free(), 0);
  ExpectConsistent(bm, {table});
}

TEST(BlockManagerTest, GrowFailsAtomically) {
  BlockManager bm(5, 4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(bm.Grow(a, 12));  // 3 blocks
  EXPECT_EQ(bm.num_free(), 2);

  // An empty table asking for 3 blocks when 2 are free gets none.
  EXPECT_EQ(bm.MissingBlocks(b, 9), 3);
  EXPECT_FALSE(bm.Grow(b, 9));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free(), 2);

  // A non-empty table asking for 3 more blocks keeps exactly what it had.
  const std::vector<int32_t> a_before = a;
  EXPECT_FALSE(bm.Grow(a, 24));
  EXPECT_EQ(a, a_before);
  EXPECT_EQ(bm.num_free(), 2);

  // Exactly the free count succeeds and leaves nothing.
  EXPECT_TRUE(bm.Grow(b, 8));
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(bm.num_free(), 0);
  // With nothing free, growth within the last block still succeeds; one token more fails.
  EXPECT_TRUE(bm.Grow(a, 12));
  EXPECT_FALSE(bm.Grow(a, 13));
  EXPECT_EQ(a, a_before);
  ExpectConsistent(bm, {a, b});
}

TEST(BlockManagerTest, ReleaseReturnsBlocksForReuse) {
  BlockManager bm(6, 2);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(bm.Grow(a, 7));  // 4 blocks
  ASSERT_TRUE(bm.Grow(b, 3));  // 2 blocks
  EXPECT_EQ(bm.num_free(), 0);
  std::vector<int32_t> c;
  EXPECT_FALSE(bm.Grow(c, 1));

  const std::set<int32_t> a_blocks(a.begin(), a.end());
  bm.Release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(bm.num_free(), 4);

  // The freed blocks are the ones handed out again.
  ASSERT_TRUE(bm.Grow(c, 8));
  EXPECT_EQ(std::set<int32_t>(c.begin(), c.end()), a_blocks);
  EXPECT_EQ(bm.num_free(), 0);
  ExpectConsistent(bm, {a, b, c});

  bm.Release(b);
  bm.Release(c);
  EXPECT_EQ(bm.num_free(), 6);
  // Releasing an empty table is a no-op.
  bm.Release(a);
  EXPECT_EQ(bm.num_free(), 6);
}

TEST(BlockManagerTest, RandomGrowReleaseNeverSharesOrLeaksBlocks) {
  for (int block_size : {1, 3, 4, 16}) {
    SCOPED_TRACE("block_size=" + std::to_string(block_size));
    const int num_blocks = 40;
    BlockManager bm(num_blocks, block_size);
    std::vector<std::vector<int32_t>> tables(8);
    std::vector<int> tokens(8, 0);  // what each table was last grown to
    std::mt19937 rng(1234 + block_size);
    for (int step = 0; step < 3000; ++step) {
      const int t = static_cast<int>(rng() % tables.size());
      if (rng() % 5 == 0) {
        const int freed = static_cast<int>(tables[t].size());
        const int before = bm.num_free();
        bm.Release(tables[t]);
        tokens[t] = 0;
        EXPECT_EQ(bm.num_free(), before + freed);
      } else {
        const int want = tokens[t] + static_cast<int>(rng() % (3 * block_size + 1));
        const int missing = bm.MissingBlocks(tables[t], want);
        const int before_free = bm.num_free();
        const auto before_table = tables[t];
        const bool ok = bm.Grow(tables[t], want);
        EXPECT_EQ(ok, missing <= before_free);
        if (ok) {
          tokens[t] = want;
          EXPECT_EQ(static_cast<int>(tables[t].size()), bm.BlocksFor(want));
          EXPECT_EQ(bm.num_free(), before_free - missing);
          // Existing entries are untouched; growth only appends.
          EXPECT_TRUE(std::equal(before_table.begin(), before_table.end(), tables[t].begin()));
        } else {
          EXPECT_EQ(tables[t], before_table);
          EXPECT_EQ(bm.num_free(), before_free);
        }
      }
      ExpectConsistent(bm, tables);
      if (HasFailure()) return;
    }
    for (auto& t : tables) bm.Release(t);
    EXPECT_EQ(bm.num_free(), num_blocks);
  }
}

// Prefix caching: a prefix registered by one sequence is matched by the next, block for
// block, by content; unreferenced cached blocks are handed out least recently freed first.
std::vector<int32_t> Tokens(int n, int32_t base) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = base + i;
  return t;
}

void RegisterAll(BlockManager& bm, const std::vector<int32_t>& table,
                 const std::vector<int32_t>& tokens) {
  const int bs = bm.block_size();
  for (int b = 0; b < static_cast<int>(tokens.size()) / bs; ++b) {
    bm.Register(table, b, tokens.data() + static_cast<size_t>(b) * bs);
  }
}

TEST(BlockManagerPrefixCache, MatchesWholeRegisteredBlocksOnly) {
  BlockManager bm(8, 4, /*prefix_caching=*/true);
  const auto a = Tokens(10, 100);  // blocks [100..103] [104..107] + 2 tokens
  std::vector<int32_t> ta;
  ASSERT_TRUE(bm.Grow(ta, 10));
  RegisterAll(bm, ta, a);

  auto b = a;
  b[9] = 7;  // differs in the partial third block only
  std::vector<int32_t> tb;
  EXPECT_EQ(bm.MatchPrefix(b, 9, tb), 8);
  EXPECT_EQ(tb, (std::vector<int32_t>{ta[0], ta[1]}));  // shared, not copied
  EXPECT_EQ(bm.num_free(), 8 - 3);
  std::vector<int32_t> capped;  // max_tokens 7: only the first block is whole within it
  EXPECT_EQ(bm.MatchPrefix(b, 7, capped), 4);

  auto c = a;
  c[5] = 0;  // second block differs: only the first matches
  std::vector<int32_t> tc;
  EXPECT_EQ(bm.MatchPrefix(c, 10, tc), 4);
  // Same tokens as a's second block but behind another first block: no match (the parent is
  // part of the content).
  auto d = a;
  d[0] = 1;
  std::vector<int32_t> td;
  EXPECT_EQ(bm.MatchPrefix(d, 10, td), 0);
  EXPECT_TRUE(td.empty());

  // Shared blocks stay allocated until every table let them go.
  bm.Release(ta);
  bm.Release(tb);
  bm.Release(capped);
  bm.Release(tc);
  EXPECT_EQ(bm.num_free(), 8);
  EXPECT_EQ(bm.num_cached_free(), 2);  // free, content kept
  std::vector<int32_t> again;
  EXPECT_EQ(bm.MatchPrefix(a, 10, again), 8);
}

TEST(BlockManagerPrefixCache, EvictsLeastRecentlyFreedAndForgetsDescendants) {
  BlockManager bm(4, 2, /*prefix_caching=*/true);
  const auto a = Tokens(4, 10), b = Tokens(4, 50);
  std::vector<int32_t> ta, tb;
  ASSERT_TRUE(bm.Grow(ta, 4));
  ASSERT_TRUE(bm.Grow(tb, 4));
  RegisterAll(bm, ta, a);
  RegisterAll(bm, tb, b);
  bm.Release(ta);  // a's blocks are the older free ones
  bm.Release(tb);
  std::vector<int32_t> fresh;
  ASSERT_TRUE(bm.Grow(fresh, 2));  // takes a's first block: a's whole prefix is gone
  std::vector<int32_t> m;
  EXPECT_EQ(bm.MatchPrefix(a, 4, m), 0);
  EXPECT_EQ(bm.MatchPrefix(b, 4, m), 4);  // b survives
  bm.Release(m);
  bm.Release(fresh);
  EXPECT_EQ(bm.num_cached_free(), 2);  // b's two; a's second block was forgotten with its parent
}

TEST(BlockManagerPrefixCache, DuplicateContentAndDisabledCache) {
  BlockManager bm(6, 2, /*prefix_caching=*/true);
  const auto a = Tokens(4, 1);
  std::vector<int32_t> t1, t2;
  ASSERT_TRUE(bm.Grow(t1, 4));
  ASSERT_TRUE(bm.Grow(t2, 4));
  RegisterAll(bm, t1, a);
  RegisterAll(bm, t2, a);  // computed twice in one step: the first copy stays the cached one
  std::vector<int32_t> m;
  EXPECT_EQ(bm.MatchPrefix(a, 4, m), 4);
  EXPECT_EQ(m, t1);

  BlockManager off(6, 2);
  std::vector<int32_t> t;
  ASSERT_TRUE(off.Grow(t, 4));
  RegisterAll(off, t, a);
  std::vector<int32_t> none;
  EXPECT_EQ(off.MatchPrefix(a, 4, none), 0);
  EXPECT_TRUE(none.empty());
}

// Spaces (LongRoPE's short- and long-factor keys): equal tokens registered in one space never
// match in another; each space shares within itself, the same content may be held once per
// space, and an out-of-range space neither registers nor matches.
TEST(BlockManagerPrefixCache, SpacesNeverShare) {
  BlockManager bm(8, 2, /*prefix_caching=*/true);
  const auto a = Tokens(4, 1);
  std::vector<int32_t> t0, t1;
  ASSERT_TRUE(bm.Grow(t0, 4));
  for (int b = 0; b < 2; ++b) bm.Register(t0, b, a.data() + 2 * b, /*space=*/0);
  std::vector<int32_t> m;
  EXPECT_EQ(bm.MatchPrefix(a, 4, m, 1), 0);
  EXPECT_TRUE(m.empty());
  ASSERT_TRUE(bm.Grow(t1, 4));
  for (int b = 0; b < 2; ++b) bm.Register(t1, b, a.data() + 2 * b, /*space=*/1);
  EXPECT_EQ(bm.MatchPrefix(a, 4, m, 1), 4);
  EXPECT_EQ(m, t1);
  std::vector<int32_t> m0;
  EXPECT_EQ(bm.MatchPrefix(a, 4, m0, 0), 4);
  EXPECT_EQ(m0, t0);
  std::vector<int32_t> bad;
  EXPECT_EQ(bm.MatchPrefix(a, 4, bad, BlockManager::kMaxPrefixSpaces), 0);
  EXPECT_EQ(bm.MatchPrefix(a, 4, bad, -1), 0);
  EXPECT_TRUE(bad.empty());
  for (auto* t : {&t0, &t1, &m, &m0}) bm.Release(*t);
  EXPECT_EQ(bm.num_free(), 8);
}

}  // namespace
}  // namespace llm
