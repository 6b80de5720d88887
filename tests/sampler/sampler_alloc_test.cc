// Checks that Sampler::Sample allocates nothing in steady state but the returned `top` vector.
// This file replaces the global operator new of the sampler_test binary to count allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "worker/engine/sampler.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace llm {
namespace {

long CountAllocations(Sampler& s, const std::vector<float>& logits, const SamplingParams& p,
                      const std::vector<int32_t>& prompt, const std::vector<int32_t>& output) {
  const long before = g_allocations.load();
  const SampleResult r = s.Sample(logits.data(), p, prompt, output, 17, 3);
  const long after = g_allocations.load();
  EXPECT_GE(r.token, 0);
  return after - before;
}

TEST(SamplerAlloc, NoAllocationPerCallButTheTopVector) {
  const int vocab = 4096;
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i) logits[i] = static_cast<float>((i * 7919) % 1000) / 250.0f;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> output = {9, 9, 10, 4000, 11};
  Sampler s(vocab);
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.5f;
  p.top_k = 100;
  p.top_p = 0.9f;
  p.min_p = 0.01f;
  EXPECT_EQ(CountAllocations(s, logits, p, prompt, output), 0);
  p.top_k = 0;
  p.top_p = 0.999f;  // sorts most of the vocabulary
  EXPECT_EQ(CountAllocations(s, logits, p, prompt, output), 0);
  p.temperature = 0.0f;
  p.logprobs = 0;
  EXPECT_EQ(CountAllocations(s, logits, p, prompt, output), 0);
  p.temperature = 0.8f;
  p.logprobs = 5;
  EXPECT_EQ(CountAllocations(s, logits, p, prompt, output), 1);
}

}  // namespace
}  // namespace llm
