#include "common/sampling_params.h"

#include <cstdio>
#include <string>

namespace llm {

namespace {

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status OutOfRange(const ParamRange& r, double value) {
  return InvalidArgument(std::string("sampling parameter ") + r.name + " must be in " +
                         (r.lo_open ? "(" : "[") + FormatNumber(r.lo) + ", " + FormatNumber(r.hi) +
                         "], got " + FormatNumber(value));
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p, int vocab_size) {
  if (vocab_size <= 0) {
    return InvalidArgument("vocab_size must be positive, got " + std::to_string(vocab_size));
  }
  const std::pair<const ParamRange&, float> checks[] = {
      {kTemperatureRange, p.temperature},
      {kTopPRange, p.top_p},
      {kMinPRange, p.min_p},
      {kRepetitionPenaltyRange, p.repetition_penalty},
      {kPresencePenaltyRange, p.presence_penalty},
      {kFrequencyPenaltyRange, p.frequency_penalty}};
  for (const auto& [range, value] : checks) {
    if (!range.Contains(value)) return OutOfRange(range, value);
  }
  if (p.top_k < kMinTopK) {
    return InvalidArgument("sampling parameter top_k must be -1 or 0 (off) or positive, got " +
                           std::to_string(p.top_k));
  }
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs) {
    return InvalidArgument("sampling parameter logprobs must be in [-1, " +
                           std::to_string(kMaxLogprobs) + "], got " + std::to_string(p.logprobs));
  }
  return Status::Ok();
}

}  // namespace llm
