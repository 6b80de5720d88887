#include "router/prefix_affinity.h"

#include <algorithm>

namespace llm::router {

namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t FnvBytes(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

// splitmix64's finaliser: FNV's low bits mix poorly, and the weights are compared as a whole.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t PrefixAffinityKey(std::span<const int32_t> prompt, int prefix_tokens) {
  const size_t n = std::min(prompt.size(), static_cast<size_t>(std::max(prefix_tokens, 0)));
  uint64_t h = kFnvOffset;
  for (size_t i = 0; i < n; ++i) h = FnvBytes(h, &prompt[i], sizeof(int32_t));
  return Mix(h);
}

uint64_t RendezvousWeight(uint64_t key, std::string_view address) {
  return Mix(FnvBytes(key ^ kFnvOffset, address.data(), address.size()));
}

}  // namespace llm::router
