// The router and the coordinator accept exactly the same sampling values: both use the one
// table of ranges in common/sampling_params.h. For every field, the values at and just past
// each bound get the same verdict from the router's OpenAI parser and from
// ValidateSamplingParams (which the coordinator and the tools run).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/sampling_params.h"
#include "router/openai_request.h"

namespace llm::router {
namespace {

using nlohmann::json;

RequestLimits Limits() {
  RequestLimits limits;
  limits.served_model_name = "m";
  return limits;
}

bool RouterAccepts(const std::string& field, double value) {
  json body = {{"model", "m"}, {"prompt", "hi"}, {field, value}};
  CompletionRequest out;
  return !ParseCompletionRequest(body.dump(), Limits(), &out).has_value();
}

bool ValidatorAccepts(const std::string& field, double value) {
  SamplingParams p;
  const float v = static_cast<float>(value);
  if (field == "temperature") p.temperature = v;
  if (field == "top_p") p.top_p = v;
  if (field == "min_p") p.min_p = v;
  if (field == "repetition_penalty") p.repetition_penalty = v;
  if (field == "presence_penalty") p.presence_penalty = v;
  if (field == "frequency_penalty") p.frequency_penalty = v;
  return ValidateSamplingParams(p, 100).ok();
}

TEST(SamplingRanges, RouterAndValidatorAgreeAtEveryBound) {
  for (const ParamRange& r : {kTemperatureRange, kTopPRange, kMinPRange, kRepetitionPenaltyRange,
                              kPresencePenaltyRange, kFrequencyPenaltyRange}) {
    // 1e-50 past the lower bound: inside the range as a double, at the bound as a float.
    for (double v : {r.lo, r.hi, r.lo - 0.01, r.hi + 0.01, (r.lo + r.hi) / 2, r.lo + 1e-50}) {
      EXPECT_EQ(RouterAccepts(r.name, v), ValidatorAccepts(r.name, v)) << r.name << " = " << v;
    }
    EXPECT_EQ(RouterAccepts(r.name, r.lo), !r.lo_open) << r.name;
    EXPECT_TRUE(RouterAccepts(r.name, r.hi)) << r.name;
    EXPECT_FALSE(ValidatorAccepts(r.name, std::nan(""))) << r.name;
  }
  SamplingParams p;
  p.logprobs = kMaxLogprobs;
  EXPECT_TRUE(ValidateSamplingParams(p, 100).ok());
  p.logprobs = kMaxLogprobs + 1;
  EXPECT_FALSE(ValidateSamplingParams(p, 100).ok());
  json body = {{"model", "m"}, {"prompt", "hi"}, {"logprobs", kMaxLogprobs + 1}};
  CompletionRequest out;
  EXPECT_TRUE(ParseCompletionRequest(body.dump(), Limits(), &out).has_value());
  body["logprobs"] = kMaxLogprobs;
  EXPECT_FALSE(ParseCompletionRequest(body.dump(), Limits(), &out).has_value());
}

}  // namespace
}  // namespace llm::router
