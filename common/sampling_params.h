// The sampling parameters of one request and their valid ranges: one type and one table used by
// the router (OpenAI fields), the coordinator (gRPC fields), the sampler and the tools, so a
// value one of them accepts is never refused by another.
#pragma once

#include <cstdint>
#include <optional>

#include "common/status.h"

namespace llm {

// Below this temperature sampling is greedy.
inline constexpr float kGreedyTemperature = 1e-5f;
// The most top logprobs a request may ask for (OpenAI's top_logprobs limit).
inline constexpr int kMaxLogprobs = 20;

// A closed (or, with lo_open, left-open) range of a numeric sampling field.
struct ParamRange {
  const char* name;
  double lo;
  double hi;
  bool lo_open = false;
  bool Contains(double v) const { return (lo_open ? v > lo : v >= lo) && v <= hi; }  // NaN: no
};

// The one table of ranges (OpenAI's where it has one).
inline constexpr ParamRange kTemperatureRange{"temperature", 0.0, 2.0};
inline constexpr ParamRange kTopPRange{"top_p", 0.0, 1.0, /*lo_open=*/true};
inline constexpr ParamRange kMinPRange{"min_p", 0.0, 1.0};
inline constexpr ParamRange kRepetitionPenaltyRange{"repetition_penalty", 0.0, 2.0,
                                                    /*lo_open=*/true};
inline constexpr ParamRange kPresencePenaltyRange{"presence_penalty", -2.0, 2.0};
inline constexpr ParamRange kFrequencyPenaltyRange{"frequency_penalty", -2.0, 2.0};
inline constexpr int kMinTopK = -1;  // -1 and 0: off

struct SamplingParams {
  float temperature = 1.0f;         // 0 => greedy (argmax; ties -> lowest id)
  int top_k = 0;                    // 0 or -1 => off; >= vocab size => off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // (0, 2]; applied to tokens seen in the prompt or output
  float presence_penalty = 0.0f;    // [-2, 2], over output tokens: l -= presence * (count > 0)
  float frequency_penalty = 0.0f;   // [-2, 2], over output tokens: l -= frequency * count
  std::optional<uint64_t> seed;     // per-request seed (the engine draws one when absent)
  int logprobs = -1;  // -1: none; 0: the chosen token's logprob; N > 0: plus the top N
};

// InvalidArgument naming the field at fault and its range (NaN is rejected everywhere).
Status ValidateSamplingParams(const SamplingParams& params, int vocab_size);

}  // namespace llm
