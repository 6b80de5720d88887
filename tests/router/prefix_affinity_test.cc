// Cache-aware routing keys (router/prefix_affinity.h): equal prompt starts map to the same
// coordinator, rendezvous hashing spreads keys evenly and moves only the keys of an upstream
// that joins or leaves.
#include "router/prefix_affinity.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace llm::router {
namespace {

std::string Winner(uint64_t key, const std::vector<std::string>& addresses) {
  std::string best;
  uint64_t best_w = 0;
  for (const auto& a : addresses) {
    const uint64_t w = RendezvousWeight(key, a);
    if (best.empty() || w > best_w) {
      best = a;
      best_w = w;
    }
  }
  return best;
}

TEST(PrefixAffinity, KeyDependsOnTheFirstTokensOnly) {
  std::vector<int32_t> a(100), b(100);
  for (int i = 0; i < 100; ++i) a[i] = b[i] = 1000 + i;
  b[80] = 7;  // differs after the hashed prefix
  EXPECT_EQ(PrefixAffinityKey(a, 64), PrefixAffinityKey(b, 64));
  b[10] = 7;  // differs inside it
  EXPECT_NE(PrefixAffinityKey(a, 64), PrefixAffinityKey(b, 64));
  // Shorter prompts hash what they have; an empty one is still a key.
  const std::vector<int32_t> short_prompt(a.begin(), a.begin() + 5);
  EXPECT_NE(PrefixAffinityKey(short_prompt, 64), PrefixAffinityKey(a, 64));
  EXPECT_EQ(PrefixAffinityKey(short_prompt, 64), PrefixAffinityKey(short_prompt, 5));
  EXPECT_EQ(PrefixAffinityKey({}, 64), PrefixAffinityKey({}, 64));
}

TEST(PrefixAffinity, RendezvousSpreadsEvenlyAndMovesFewKeys) {
  const std::vector<std::string> four = {"10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.3:50051",
                                         "10.0.0.4:50051"};
  std::vector<std::string> five = four;
  five.push_back("10.0.0.5:50051");
  constexpr int kKeys = 4000;
  std::map<std::string, int> load;
  int moved = 0;
  for (int k = 0; k < kKeys; ++k) {
    const std::vector<int32_t> prompt = {1, k, k * 7 + 3};
    const uint64_t key = PrefixAffinityKey(prompt, 64);
    const std::string before = Winner(key, four);
    const std::string after = Winner(key, five);
    ++load[before];
    if (after != before) {
      ++moved;
      EXPECT_EQ(after, five.back()) << "a key moved between two old upstreams";
    }
    // Removing an upstream moves only the keys it held.
    std::vector<std::string> three(four.begin() + 1, four.end());
    if (before != four[0]) {
      EXPECT_EQ(Winner(key, three), before);
    }
  }
  for (const auto& a : four) {
    EXPECT_GT(load[a], kKeys * 20 / 100) << a;
    EXPECT_LT(load[a], kKeys * 30 / 100) << a;
  }
  // The new upstream takes about a fifth of the keys.
  EXPECT_GT(moved, kKeys * 15 / 100);
  EXPECT_LT(moved, kKeys * 25 / 100);
}

}  // namespace
}  // namespace llm::router
