#include "worker/engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace llm {
namespace {

// The draw sorts the kept ids when there are at most V / kSortDivisor of them, else scans V.
constexpr int kSortDivisor = 64;

// Top-p buckets weights (in [0, 1]) by their float bits: monotone in the weight, each bucket
// spanning a factor of 1 + 2^-6 (a logit range of ~0.016 * T).
constexpr int kBucketShift = 17;
constexpr int kNumBuckets = (0x3F800000 >> kBucketShift) + 1;  // bits of 1.0f
int Bucket(float weight) {
  return static_cast<int>(std::bit_cast<uint32_t>(weight) >> kBucketShift);
}

constexpr auto kBetterKey = std::greater<uint64_t>();

// exp(x) for x <= 0 (or -inf; not NaN), written so that loops over it vectorize: the Cephes expf
// polynomial on x - k ln2, scaled by 2^k built from bits. Within 2 ulp of std::exp, exactly 1 at
// 0, and exactly 0 below -87 (a token that unlikely relative to the best is never drawn).
inline float ExpNonPositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * kLog2e + kRound;
  const int32_t k = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  const float kf = t - kRound;
  const float r = (x - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
  // Integer compare (x <= 0: larger bits = more negative): float compares would not vectorize.
  const uint32_t keep = std::bit_cast<uint32_t>(x) <= std::bit_cast<uint32_t>(-87.0f) ? ~0u : 0u;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * scale) & keep);
}

// Softmax weight of logit l: exp((l - max) / t); when max is +-inf, 1 for the maxima, else 0.
inline float Weight(float l, float max, float t) {
  if (!std::isfinite(max)) return l == max ? 1.0f : 0.0f;
  return ExpNonPositive((l - max) / t);
}

// out[i] = Weight(l[i], max, t), vectorized (raw pointers: nothing aliases).
void Weights(const float* l, int n, float max, float t, float* out) {
  if (!std::isfinite(max)) {
    for (int i = 0; i < n; ++i) out[i] = Weight(l[i], max, t);
    return;
  }
  for (int i = 0; i < n; ++i) out[i] = ExpNonPositive((l[i] - max) / t);
}

// Sum in a fixed order with four independent accumulators.
double Sum(const float* v, int n) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) s[j] += v[i + j];
  }
  for (; i < n; ++i) s[0] += v[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

double SamplerUniform(uint64_t rng_seed, int step) {
  const uint64_t h = SplitMix64(SplitMix64(rng_seed) ^ static_cast<uint64_t>(int64_t{step}));
  return static_cast<double>(h >> 11) * 0x1.0p-53;  // 53 random bits: [0, 1)
}

Sampler::Sampler(int vocab_size)
    : vocab_size_(std::max(vocab_size, 1)),
      logits_(vocab_size_),
      weights_(vocab_size_),
      keys_(vocab_size_),
      ids_(vocab_size_),
      bucket_mass_(kNumBuckets),
      seen_(vocab_size_, 0),
      counts_(vocab_size_, 0) {
  touched_.reserve(vocab_size_);
}

uint64_t Sampler::Key(int32_t t) const {
  // Branch-free (signs are random): + 0.0f turns -0 into +0; negative floats get all bits
  // flipped, positive ones the sign bit set. NaN was turned into -inf on the copy.
  const uint32_t bits = std::bit_cast<uint32_t>(logits_[t] + 0.0f);
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u;
  return (uint64_t{bits ^ flip} << 32) | ~static_cast<uint32_t>(t);
}

SampleResult Sampler::Sample(const float* logits, const SamplingParams& p,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             uint64_t rng_seed, int step, const uint64_t* allowed) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < vocab_size_; ++i) logits_[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
  ApplyPenalties(p, prompt, output);
  if (allowed != nullptr) {
    for (int i = 0; i < vocab_size_; ++i) {
      if (!((allowed[i >> 6] >> (i & 63)) & 1)) logits_[i] = kNegInf;
    }
  }

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

// Log-softmax over the penalized logits. The max's difference is exactly 0, so a row whose max is
// +inf or -inf still gives numbers for its maxima.
void Sampler::FillLogprobs(int32_t token, int n, SampleResult& result) {
  auto diff = [this](int32_t t) {
    return logits_[t] == max_logit_ ? 0.0 : static_cast<double>(logits_[t]) - max_logit_;
  };
  // weights_ is free again (the draw is done): it holds exp(l - max).
  Weights(logits_.data(), vocab_size_, max_logit_, 1.0f, weights_.data());
  const double log_z = std::log(Sum(weights_.data(), vocab_size_));
  result.logprob = static_cast<float>(diff(token) - log_z);
  if (n <= 0) return;
  // The n best keys, kept sorted by insertion: one O(V) pass, an insert (<= 20 moves) is rare.
  uint64_t best[kMaxLogprobs];
  int filled = 0;
  for (int32_t t = 0; t < vocab_size_; ++t) {
    const uint64_t key = Key(t);
    if (filled == n && key <= best[n - 1]) continue;
    int j = filled < n ? filled++ : n - 1;
    for (; j > 0 && best[j - 1] < key; --j) best[j] = best[j - 1];
    best[j] = key;
  }
  result.top.reserve(n);
  for (int j = 0; j < n; ++j) {
    const int32_t t = TokenOf(best[j]);
    result.top.push_back({t, static_cast<float>(diff(t) - log_z)});
  }
}

int32_t Sampler::SampleRandom(const SamplingParams& p, double u) {
  const bool top_k = p.top_k > 0 && p.top_k < vocab_size_;
  if (!top_k) {
    Weights(logits_.data(), vocab_size_, max_logit_, p.temperature, weights_.data());
    if (p.top_p >= 1.0f) {
      // Plain softmax (and min-p): no ranking needed.
      const float min_p = p.min_p;
      int m = 0;
      for (int32_t tok = 0; tok < vocab_size_; ++tok) {
        ids_[m] = tok;
        m += weights_[tok] >= min_p;
      }
      return DrawFromIds(m, u);
    }
  }
  int n = SelectTopK(p.top_k);  // candidates: keys_[0, n)
  // Lower bound on the kept keys; 0 while every token is kept.
  uint64_t bound = top_k ? keys_[n - 1] : 0;
  double mass = 0.0;  // of what top-k kept: top-p's normalizer
  if (top_k) {
    for (int j = 0; j < n; ++j) {
      const int32_t tok = TokenOf(keys_[j]);
      weights_[tok] = Weight(logits_[tok], max_logit_, p.temperature);
      mass += weights_[tok];
    }
  } else {
    mass = Sum(weights_.data(), vocab_size_);
  }
  if (p.top_p < 1.0f) {
    // Tokens lighter than `tail` weigh < (1 - top_p) * mass all together, so none of them can be
    // in the nucleus; min-p drops a suffix of the ranking too. Dropping both first shrinks the
    // work without changing what top-p keeps.
    const double tail = 0.5 * (1.0 - p.top_p) * mass / n;
    n = ApplyTopP(KeepAtLeast(n, std::max<double>(p.min_p, tail)), mass, p.top_p, &bound);
  } else {
    n = KeepAtLeast(n, p.min_p);
  }
  return Draw(n, bound, p.min_p, u);
}

// Moves the top_k best keys to keys_[0, top_k), the k-th best at top_k - 1. Returns how many
// tokens are candidates (the vocabulary when top-k is off, with keys_ in id order).
int Sampler::SelectTopK(int top_k) {
  for (int32_t t = 0; t < vocab_size_; ++t) keys_[t] = Key(t);
  if (top_k <= 0 || top_k >= vocab_size_) return vocab_size_;
  // The best keys of top_k disjoint blocks are top_k distinct tokens, so the k-th best key is at
  // least the worst of them: one O(V) pass drops (nearly) every token below it.
  const int block = vocab_size_ / top_k;
  uint64_t bound = ~uint64_t{0};
  for (int b = 0; b < top_k; ++b) {
    const auto first = keys_.begin() + static_cast<ptrdiff_t>(b) * block;
    bound = std::min(bound, *std::max_element(first, first + block));
  }
  int n = 0;
  for (int32_t t = 0; t < vocab_size_; ++t) {
    if (keys_[t] >= bound) keys_[n++] = keys_[t];
  }
  std::nth_element(keys_.begin(), keys_.begin() + (top_k - 1), keys_.begin() + n, kBetterKey);
  return top_k;
}

// Keeps, in order, the candidates among keys_[0, n) whose weight is >= min_weight (p >= min_weight
// * p_max); returns how many.
int Sampler::KeepAtLeast(int n, double min_weight) {
  if (min_weight <= 0.0) return n;
  int kept = 0;
  for (int j = 0; j < n; ++j) {
    const uint64_t key = keys_[j];  // branch-free compaction: the test is unpredictable
    keys_[kept] = key;
    kept += weights_[TokenOf(key)] >= min_weight;
  }
  return kept;
}

// Keeps the smallest set of candidates among keys_[0, n) whose mass reaches top_p * mass: a token
// is kept when the mass ranked before it is < top_p * mass, as in vLLM. Radix-select style: one
// O(n) pass sums the mass per weight bucket, the buckets are scanned from the top to find the one
// where the mass crosses top_p, and only that bucket's tokens are sorted (std::sort); buckets above
// it are kept whole, unsorted. Moves the kept tokens to keys_[0, result), sets *bound to the worst.
int Sampler::ApplyTopP(int n, double mass, float top_p, uint64_t* bound) {
  auto weight = [this](uint64_t key) { return weights_[TokenOf(key)]; };
  std::fill(bucket_mass_.begin(), bucket_mass_.end(), 0.0);
  for (int j = 0; j < n; ++j) bucket_mass_[Bucket(weight(keys_[j]))] += weight(keys_[j]);
  const double target = static_cast<double>(top_p) * mass;
  double above = 0.0;  // mass of the buckets above `crossing`; always < target
  int crossing = kNumBuckets - 1;
  for (; crossing > 0 && above + bucket_mass_[crossing] < target; --crossing) {
    above += bucket_mass_[crossing];
  }
  // [0, whole): buckets above `crossing`, kept; [whole, m): the crossing bucket; the rest: dropped.
  int m = 0;
  for (int j = 0; j < n; ++j) {
    const uint64_t key = keys_[j];
    keys_[m] = key;
    m += Bucket(weight(key)) >= crossing;
  }
  const auto split = std::partition(keys_.begin(), keys_.begin() + m,
                                    [&](uint64_t key) { return Bucket(weight(key)) > crossing; });
  const int whole = static_cast<int>(split - keys_.begin());
  std::sort(split, keys_.begin() + m, kBetterKey);
  int kept = whole;
  for (double cumulative = above; kept < m && (kept == 0 || cumulative < target); ++kept) {
    cumulative += weight(keys_[kept]);
  }
  // Every key of a higher bucket beats every key of the crossing one.
  *bound = kept > whole ? keys_[kept - 1] : *std::min_element(keys_.begin(), keys_.begin() + kept);
  return kept;
}

// The kept tokens are keys_[0, n), equivalently the tokens with key >= bound (all when bound is
// 0) and weight >= min_p. They are put in id order, by sorting when few, else by one O(V) scan.
int32_t Sampler::Draw(int n, uint64_t bound, float min_p, double u) {
  if (static_cast<int64_t>(n) * kSortDivisor <= vocab_size_) {
    for (int j = 0; j < n; ++j) ids_[j] = TokenOf(keys_[j]);
    std::sort(ids_.begin(), ids_.begin() + n);
    return DrawFromIds(n, u);
  }
  int m = 0;
  for (int32_t t = 0; t < vocab_size_; ++t) {
    ids_[m] = t;  // branch-free; bound 0 lets every key (never 0) pass
    m += static_cast<int>(Key(t) >= bound) & static_cast<int>(weights_[t] >= min_p);
  }
  return DrawFromIds(m, u);
}

// Inverse CDF over ids_[0, n) (ascending ids): summation order is fixed, so the token is a pure
// function of the logits, the params and u.
int32_t Sampler::DrawFromIds(int n, double u) const {
  double total = 0.0;
  for (int j = 0; j < n; ++j) total += weights_[ids_[j]];
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last = argmax_;
  for (int j = 0; j < n; ++j) {
    const float w = weights_[ids_[j]];
    if (w <= 0.0f) continue;
    cumulative += w;
    last = ids_[j];
    if (cumulative > target) return last;
  }
  return last;  // rounding left target at the very top: the last kept token
}

namespace {

float IdBits(int32_t id) {
  float f;
  std::memcpy(&f, &id, sizeof(f));
  return f;
}

int32_t BitsId(float f) {
  int32_t id;
  std::memcpy(&id, &f, sizeof(id));
  return id;
}

}  // namespace

size_t PackedSampleFloats(int logprobs) {
  return 3 + 2 * static_cast<size_t>(std::max(logprobs, 0));
}

void PackSample(const SampleResult& r, int logprobs, float* out) {
  const size_t n = std::min(r.top.size(), static_cast<size_t>(std::max(logprobs, 0)));
  std::fill(out, out + PackedSampleFloats(logprobs), 0.0f);
  out[0] = IdBits(r.token);
  out[1] = r.logprob;
  out[2] = IdBits(static_cast<int32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    out[3 + 2 * i] = IdBits(r.top[i].token);
    out[4 + 2 * i] = r.top[i].logprob;
  }
}

void PackFailedSample(int logprobs, float* out) {
  std::fill(out, out + PackedSampleFloats(logprobs), 0.0f);
  out[0] = IdBits(-1);
}

bool UnpackSample(const float* in, int logprobs, int vocab_size, SampleResult* out) {
  out->token = BitsId(in[0]);
  out->logprob = in[1];
  const int32_t n = BitsId(in[2]);
  if (out->token < 0 || out->token >= vocab_size || n < 0 || n > std::max(logprobs, 0)) {
    return false;
  }
  out->top.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    out->top[i].token = BitsId(in[3 + 2 * i]);
    out->top[i].logprob = in[4 + 2 * i];
    if (out->top[i].token < 0 || out->top[i].token >= vocab_size) return false;
  }
  return true;
}

}  // namespace llm
