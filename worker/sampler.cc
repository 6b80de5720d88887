#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

namespace llm {
namespace {

// First prefix that top-p sorts; it grows 4x while its mass stays below top_p.
constexpr int kTopPChunk = 128;

uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string FormatFloat(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status FieldError(const char* field, const char* requirement, double value) {
  return InvalidArgument(std::string("sampling parameter ") + field + " must be " + requirement +
                         ", got " + FormatFloat(value));
}

bool InRange(float v, float lo, float hi) {
  return v >= lo && v <= hi;
}  // false for NaN

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p, int vocab_size) {
  if (vocab_size <= 0) {
    return InvalidArgument("vocab_size must be positive, got " + std::to_string(vocab_size));
  }
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return FieldError("temperature", "a finite number >= 0", p.temperature);
  }
  if (p.top_k < -1) return FieldError("top_k", "-1 or 0 (off) or positive", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return FieldError("top_p", "in (0, 1]", p.top_p);
  if (!InRange(p.min_p, 0.0f, 1.0f)) return FieldError("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return FieldError("repetition_penalty", "a finite number > 0", p.repetition_penalty);
  }
  if (!InRange(p.presence_penalty, -2.0f, 2.0f)) {
    return FieldError("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  if (!InRange(p.frequency_penalty, -2.0f, 2.0f)) {
    return FieldError("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs) {
    return FieldError("logprobs", "in [-1, 20]", p.logprobs);
  }
  return Status::Ok();
}

double SamplerUniform(uint64_t rng_seed, int step) {
  const uint64_t h = SplitMix64(SplitMix64(rng_seed) ^ static_cast<uint64_t>(int64_t{step}));
  return static_cast<double>(h >> 11) * 0x1.0p-53;  // 53 random bits: [0, 1)
}

Sampler::Sampler(int vocab_size)
    : vocab_size_(std::max(vocab_size, 1)),
      logits_(vocab_size_),
      weights_(vocab_size_),
      order_(vocab_size_),
      seen_(vocab_size_, 0),
      counts_(vocab_size_, 0) {
  touched_.reserve(vocab_size_);
}

SampleResult Sampler::Sample(const float* logits, const SamplingParams& p,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             uint64_t rng_seed, int step) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < vocab_size_; ++i) logits_[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
  ApplyPenalties(p, prompt, output);

  argmax_ = 0;
  max_logit_ = logits_[0];
  for (int i = 1; i < vocab_size_; ++i) {
    if (logits_[i] > max_logit_) {
      max_logit_ = logits_[i];
      argmax_ = i;
    }
  }

  SampleResult result;
  if (p.temperature < kGreedyTemperature) {
    result.token = argmax_;
  } else {
    result.token = SampleRandom(p, SamplerUniform(rng_seed, step));
  }
  if (p.logprobs >= 0) FillLogprobs(result.token, std::min(p.logprobs, vocab_size_), result);
  return result;
}

void Sampler::ApplyPenalties(const SamplingParams& p, std::span<const int32_t> prompt,
                             std::span<const int32_t> output) {
  if (p.repetition_penalty != 1.0f) {
    if (++epoch_ == 0) {  // wrapped: forget stamps from 2^32 calls ago
      std::fill(seen_.begin(), seen_.end(), 0u);
      epoch_ = 1;
    }
    ApplyRepetitionPenalty(p.repetition_penalty, prompt);
    ApplyRepetitionPenalty(p.repetition_penalty, output);
  }
  if (p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  for (int32_t t : output) {
    if (t < 0 || t >= vocab_size_) continue;
    if (counts_[t]++ == 0) touched_.push_back(t);
  }
  for (int32_t t : touched_) {
    // Two subtractions, as vLLM does: frequency * count, then presence * (count > 0).
    logits_[t] -= p.frequency_penalty * static_cast<float>(counts_[t]);
    logits_[t] -= p.presence_penalty;
    counts_[t] = 0;
  }
  touched_.clear();
}

void Sampler::ApplyRepetitionPenalty(float penalty, std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab_size_ || seen_[t] == epoch_) continue;
    seen_[t] = epoch_;
    float& l = logits_[t];
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

// Log-softmax over the penalized logits; `d` is l - max, exactly 0 for the max (so an all -inf or
// +inf row still gives finite numbers for its maxima).
void Sampler::FillLogprobs(int32_t token, int n, SampleResult& result) {
  auto diff = [this](int32_t t) {
    return logits_[t] == max_logit_ ? 0.0 : static_cast<double>(logits_[t]) - max_logit_;
  };
  double sum = 0.0;
  for (int i = 0; i < vocab_size_; ++i) {
    sum += logits_[i] == max_logit_ ? 1.0f : std::exp(logits_[i] - max_logit_);
  }
  const double log_z = std::log(sum);
  result.logprob = static_cast<float>(diff(token) - log_z);
  if (n <= 0) return;
  std::iota(order_.begin(), order_.end(), 0);
  // O(V log n) with n <= 20.
  std::partial_sort(order_.begin(), order_.begin() + n, order_.end(),
                    [this](int32_t a, int32_t b) { return Better(a, b); });
  result.top.reserve(n);
  for (int j = 0; j < n; ++j) {
    result.top.push_back({order_[j], static_cast<float>(diff(order_[j]) - log_z)});
  }
}

int32_t Sampler::SampleRandom(const SamplingParams& p, double u) {
  const int n = ApplyTopK(p.top_k);
  // The worst token kept so far; -1 while every token is kept.
  int32_t pivot = n < vocab_size_ ? order_[n - 1] : -1;
  const float t = p.temperature;
  double mass = 0.0;  // sum of weights over what top-k kept (top-p's normalizer)
  for (int j = 0; j < n; ++j) {
    const int32_t tok = order_[j];
    const float w = logits_[tok] == max_logit_ ? 1.0f : std::exp((logits_[tok] - max_logit_) / t);
    weights_[tok] = w;
    mass += w;
  }
  if (p.top_p < 1.0f) {
    // min-p keeps a prefix of the ranking, so dropping its rejects first only shrinks the sort.
    const int32_t cut = ApplyTopP(ApplyMinP(n, p.min_p), mass, p.top_p);
    if (cut >= 0) pivot = cut;
  }
  return Draw(pivot, p.min_p, u);
}

// Puts the top_k best tokens in order_[0, top_k) (unordered) with the k-th best at top_k - 1:
// nth_element, O(V) expected. Returns how many tokens are candidates.
int Sampler::ApplyTopK(int top_k) {
  std::iota(order_.begin(), order_.end(), 0);
  if (top_k <= 0 || top_k >= vocab_size_) return vocab_size_;
  std::nth_element(order_.begin(), order_.begin() + (top_k - 1), order_.end(),
                   [this](int32_t a, int32_t b) { return Better(a, b); });
  return top_k;
}

// Moves the candidates with p >= min_p * p_max (weight >= min_p) to the front; returns how many.
int Sampler::ApplyMinP(int n, float min_p) {
  if (min_p <= 0.0f) return n;
  auto end = std::partition(order_.begin(), order_.begin() + n,
                            [this, min_p](int32_t t) { return weights_[t] >= min_p; });
  return static_cast<int>(end - order_.begin());
}

// Sorts a growing prefix of order_[0, n) until it holds the smallest set of tokens whose mass
// reaches top_p * mass (a token is kept when the mass ranked before it is < top_p, as in vLLM).
// Returns the last token kept, or -1 when all n are kept. Each round is one nth_element over the
// unsorted rest, O(n), plus a sort of the new chunk; the prefix grows 128, 512, 2048, ...
int32_t Sampler::ApplyTopP(int n, double mass, float top_p) {
  auto better = [this](int32_t a, int32_t b) { return Better(a, b); };
  const double target = static_cast<double>(top_p) * mass;
  double cumulative = 0.0;
  int sorted = 0;
  while (sorted < n) {
    const int next = std::min(n, std::max(kTopPChunk, sorted * 4));
    auto first = order_.begin() + sorted;
    auto mid = order_.begin() + next;
    if (next < n) std::nth_element(first, mid, order_.begin() + n, better);
    std::sort(first, mid, better);
    for (int j = sorted; j < next; ++j) {
      if (j > 0 && cumulative >= target) return order_[j - 1];
      cumulative += weights_[order_[j]];
    }
    sorted = next;
  }
  return -1;
}

// Inverse CDF over the kept tokens in ascending id: kept = ranked no worse than `pivot` (all when
// pivot < 0) and weight >= min_p. Two O(V) passes; summation order is fixed, so the result is a
// pure function of the logits, the params and u.
int32_t Sampler::Draw(int32_t pivot, float min_p, double u) const {
  auto kept = [&](int32_t t) { return (pivot < 0 || !Better(pivot, t)) && weights_[t] >= min_p; };
  double total = 0.0;
  for (int32_t t = 0; t < vocab_size_; ++t) {
    if (kept(t)) total += weights_[t];
  }
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last = argmax_;
  for (int32_t t = 0; t < vocab_size_; ++t) {
    if (!kept(t) || weights_[t] <= 0.0f) continue;
    cumulative += weights_[t];
    last = t;
    if (cumulative > target) return t;
  }
  return last;  // rounding left target at the very top: the last kept token
}

}  // namespace llm
