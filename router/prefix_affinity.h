// Cache-aware routing: requests whose prompts start alike go to the same coordinator, where
// the prefix cache (engine.enable_prefix_caching) already holds that start. The key is a hash
// of the prompt's first tokens; the coordinator is chosen by rendezvous (highest random weight)
// hashing over the healthy ones, so adding or removing one moves only the keys that it wins or
// held. A load bound keeps one hot prefix from piling everything onto one coordinator.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace llm::router {

// router.routing and its knobs.
struct RoutingPolicy {
  // prefix_affinity: the rendezvous winner of the prompt's first tokens (below); least_loaded:
  // the healthy upstream with the fewest requests in flight; round_robin: the next healthy one
  // in turn, whatever the prompt or the load.
  enum class Mode { kPrefixAffinity, kLeastLoaded, kRoundRobin };
  Mode mode = Mode::kPrefixAffinity;
  int prefix_tokens = 64;  // tokens hashed (fewer when the prompt is shorter)
  // The affinity upstream is skipped for the least-loaded one when it has this many more
  // requests in flight than that one.
  int max_imbalance = 32;
};

// FNV-1a over the first `prefix_tokens` ids.
uint64_t PrefixAffinityKey(std::span<const int32_t> prompt, int prefix_tokens);

// The rendezvous weight of `address` for `key`; the upstream with the highest one wins.
uint64_t RendezvousWeight(uint64_t key, std::string_view address);

}  // namespace llm::router
