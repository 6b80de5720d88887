// The engine request the tests decode with: greedy, `max_tokens` tokens, EOS ignored (shared by
// the golden tests and the engine unit tests).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "worker/engine/engine.h"

namespace llm::testing {

inline GenerateRequest GreedyRequest(std::vector<int32_t> prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

}  // namespace llm::testing
