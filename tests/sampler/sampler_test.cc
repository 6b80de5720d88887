#include "worker/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace llm {
namespace {

std::vector<double> Softmax(const std::vector<float>& logits, double temperature = 1.0) {
  const double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - m) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double x : probs) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::vector<float> RandomLogits(int n, uint32_t seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> l(n);
  for (float& x : l) x = dist(gen);
  return l;
}

SampleResult SampleOnce(Sampler& s, const std::vector<float>& logits, const SamplingParams& p,
                        uint64_t seed = 1, int step = 0, std::vector<int32_t> prompt = {},
                        std::vector<int32_t> output = {}) {
  return s.Sample(logits.data(), p, prompt, output, seed, step);
}

// Frequencies of `draws` samples, one per step 0..draws-1.
std::vector<double> Frequencies(const std::vector<float>& logits, const SamplingParams& p,
                                int draws, uint64_t seed = 7) {
  Sampler s(static_cast<int>(logits.size()));
  std::vector<double> freq(logits.size(), 0.0);
  for (int step = 0; step < draws; ++step) freq[SampleOnce(s, logits, p, seed, step).token] += 1;
  for (double& f : freq) f /= draws;
  return freq;
}

double MaxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

double ChiSquare(const std::vector<double>& freq, const std::vector<double>& expected, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < freq.size(); ++i) {
    if (expected[i] <= 0) continue;
    const double diff = (freq[i] - expected[i]) * n;
    chi += diff * diff / (expected[i] * n);
  }
  return chi;
}

// Log-softmax of the penalized logits, read back through logprobs = vocab size (<= 20).
std::vector<double> ProcessedLogprobs(const std::vector<float>& logits, SamplingParams p,
                                      std::vector<int32_t> prompt, std::vector<int32_t> output) {
  Sampler s(static_cast<int>(logits.size()));
  p.logprobs = static_cast<int>(logits.size());
  p.temperature = 0.0f;
  const SampleResult r = SampleOnce(s, logits, p, 1, 0, prompt, output);
  std::vector<double> lp(logits.size());
  for (const TokenLogprob& t : r.top) lp[t.token] = t.logprob;
  return lp;
}

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  std::vector<double> p = Softmax(logits);
  for (double& x : p) x = std::log(x);
  return p;
}

// ---------------------------------------------------------------- greedy

TEST(SamplerGreedy, PicksArgmax) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(SampleOnce(s, {0.1f, 3.0f, -1.0f, 2.9f}, p).token, 1);
  EXPECT_EQ(SampleOnce(s, {-5.0f, -3.0f, -1.0f, -2.0f}, p).token, 2);
}

TEST(SamplerGreedy, TiesGoToLowestId) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(SampleOnce(s, {1.0f, 5.0f, 5.0f, 2.0f}, p).token, 1);
  EXPECT_EQ(SampleOnce(s, {2.0f, 2.0f, 2.0f, 2.0f}, p).token, 0);
  EXPECT_EQ(SampleOnce(s, {0.0f, 1.0f, 3.0f, 3.0f}, p).token, 2);
}

TEST(SamplerGreedy, IgnoresSeedAndStep) {
  const std::vector<float> logits = RandomLogits(100, 3, 0.1f);
  const int argmax =
      static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  Sampler s(100);
  SamplingParams p;
  p.temperature = 0.0f;
  p.seed = 5;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(SampleOnce(s, logits, p, seed * 7919, static_cast<int>(seed)).token, argmax);
  }
  p.temperature = 1e-6f;  // below the greedy threshold
  EXPECT_EQ(SampleOnce(s, logits, p, 99, 3).token, argmax);
}

TEST(SamplerGreedy, NanLogitsAreNeverChosen) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(SampleOnce(s, {nan, 1.0f, nan, 0.5f}, p).token, 1);
  p.temperature = 1.0f;
  for (int step = 0; step < 200; ++step) {
    const int32_t t = SampleOnce(s, {nan, 1.0f, nan, 0.5f}, p, 3, step).token;
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(SamplerGreedy, DoesNotModifyLogits) {
  std::vector<float> logits = RandomLogits(64, 11);
  const std::vector<float> copy = logits;
  Sampler s(64);
  SamplingParams p;
  p.repetition_penalty = 1.7f;
  p.frequency_penalty = 0.5f;
  p.top_p = 0.8f;
  p.top_k = 10;
  p.logprobs = 3;
  SampleOnce(s, logits, p, 1, 0, {1, 2, 3}, {4, 5, 5});
  EXPECT_EQ(logits, copy);
}

// ---------------------------------------------------------------- seeded sampling

TEST(SamplerSeeded, UniformIsAPureFunctionOfSeedAndStep) {
  EXPECT_EQ(SamplerUniform(42, 7), SamplerUniform(42, 7));
  EXPECT_NE(SamplerUniform(42, 7), SamplerUniform(42, 8));
  EXPECT_NE(SamplerUniform(42, 7), SamplerUniform(43, 7));
  double sum = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const double u = SamplerUniform(1234, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(SamplerSeeded, SameSeedAndStepGiveSameTokenWhateverElseIsSampled) {
  const std::vector<float> logits = RandomLogits(500, 5, 0.5f);
  const std::vector<float> other = RandomLogits(500, 6, 3.0f);
  SamplingParams p;
  p.top_p = 0.95f;
  Sampler a(500);
  Sampler b(500);
  for (int step = 0; step < 200; ++step) {
    const int32_t first = SampleOnce(a, logits, p, 42, step).token;
    // b sees other sequences (with penalties) in between, in a different order.
    SamplingParams q = p;
    q.repetition_penalty = 1.3f;
    q.presence_penalty = 1.0f;
    SampleOnce(b, other, q, 9, step, {1, 2, first}, {first, 4});
    EXPECT_EQ(SampleOnce(b, logits, p, 42, step).token, first) << "step " << step;
    EXPECT_EQ(SampleOnce(a, logits, p, 42, step).token, first) << "step " << step;
  }
}

TEST(SamplerSeeded, DifferentSeedsGiveDifferentSequences) {
  const std::vector<float> logits(16, 0.0f);  // uniform: two seeds agree 1/16 of the time
  Sampler s(16);
  SamplingParams p;
  int differ = 0;
  std::set<int32_t> seen;
  for (int step = 0; step < 200; ++step) {
    const int32_t a = SampleOnce(s, logits, p, 1, step).token;
    const int32_t b = SampleOnce(s, logits, p, 2, step).token;
    differ += a != b;
    seen.insert(a);
  }
  EXPECT_GT(differ, 150);
  EXPECT_EQ(seen.size(), 16u);
}

TEST(SamplerSeeded, ConsecutiveStepsAreIndependentDraws) {
  const std::vector<float> logits(16, 0.0f);
  Sampler s(16);
  SamplingParams p;
  int differ = 0;
  int32_t previous = SampleOnce(s, logits, p, 5, 0).token;
  for (int step = 1; step <= 200; ++step) {
    const int32_t token = SampleOnce(s, logits, p, 5, step).token;
    differ += token != previous;
    previous = token;
  }
  EXPECT_GT(differ, 165);  // 187.5 expected
}

TEST(SamplerSeeded, DistributionMatchesSoftmaxAtTemperatureOne) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f, -3.0f};
  SamplingParams p;
  const int n = 20000;
  const std::vector<double> freq = Frequencies(logits, p, n);
  const std::vector<double> expected = Softmax(logits);
  EXPECT_LT(MaxAbsDiff(freq, expected), 0.015);
  EXPECT_LT(ChiSquare(freq, expected, n), 22.46);  // 6 dof, p = 0.001
}

TEST(SamplerSeeded, DistributionMatchesSoftmaxAtTemperatureHalf) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f};
  SamplingParams p;
  p.temperature = 0.5f;
  const int n = 20000;
  const std::vector<double> freq = Frequencies(logits, p, n, 99);
  const std::vector<double> expected = Softmax(logits, 0.5);
  EXPECT_LT(MaxAbsDiff(freq, expected), 0.015);
  EXPECT_LT(ChiSquare(freq, expected, n), 20.52);      // 5 dof, p = 0.001
  EXPECT_GT(MaxAbsDiff(freq, Softmax(logits)), 0.05);  // and not the untempered softmax
}

// ---------------------------------------------------------------- top-k / top-p / min-p

TEST(SamplerFilters, TopKOneIsGreedy) {
  const std::vector<float> logits = RandomLogits(1000, 21);
  const int argmax =
      static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  Sampler s(1000);
  SamplingParams p;
  p.top_k = 1;
  p.temperature = 2.0f;
  for (int step = 0; step < 200; ++step) EXPECT_EQ(SampleOnce(s, logits, p, 8, step).token, argmax);
}

TEST(SamplerFilters, TopKTwoOnlyReturnsTheTwoBest) {
  std::vector<float> logits(50, 0.0f);
  logits[7] = 1.2f;
  logits[3] = 1.0f;
  logits[9] = 0.9f;
  SamplingParams p;
  p.top_k = 2;
  const int n = 5000;
  const std::vector<double> freq = Frequencies(logits, p, n);
  const double p7 = 1.0 / (1.0 + std::exp(1.0 - 1.2));
  EXPECT_NEAR(freq[7], p7, 0.03);
  EXPECT_NEAR(freq[3], 1.0 - p7, 0.03);
  EXPECT_DOUBLE_EQ(freq[7] + freq[3], 1.0);
}

TEST(SamplerFilters, TopKTiesAreBrokenByLowerId) {
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 1.0f, 0.5f};
  SamplingParams p;
  p.top_k = 2;
  const std::vector<double> freq = Frequencies(logits, p, 2000);
  EXPECT_GT(freq[1], 0.4);
  EXPECT_GT(freq[2], 0.4);
  EXPECT_EQ(freq[3], 0.0);
}

TEST(SamplerFilters, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = LogitsFromProbs({0.2, 0.5, 0.3});
  SamplingParams p;
  p.top_p = 0.6f;
  const int n = 10000;
  std::vector<double> freq = Frequencies(logits, p, n);
  EXPECT_EQ(freq[0], 0.0);
  EXPECT_NEAR(freq[1], 0.5 / 0.8, 0.02);
  EXPECT_NEAR(freq[2], 0.3 / 0.8, 0.02);

  p.top_p = 0.45f;
  freq = Frequencies(logits, p, 1000);
  EXPECT_EQ(freq[1], 1.0);

  p.top_p = 0.85f;
  freq = Frequencies(logits, p, n);
  EXPECT_LT(MaxAbsDiff(freq, Softmax(logits)), 0.02);
}

TEST(SamplerFilters, TopPAppliesToWhatTopKKept) {
  // Top-k keeps 0.4 / 0.3 / 0.2, renormalized 4/9, 3/9, 2/9: top_p 0.75 keeps the first two
  // (7/9 >= 0.75 ranks before 0.2). Over the raw probs it would keep 0.2 as well (0.7 < 0.75).
  const std::vector<float> logits = LogitsFromProbs({0.3, 0.05, 0.4, 0.2, 0.05});
  SamplingParams p;
  p.top_k = 3;
  p.top_p = 0.75f;
  const std::vector<double> freq = Frequencies(logits, p, 10000);
  EXPECT_NEAR(freq[2], 4.0 / 7.0, 0.02);
  EXPECT_NEAR(freq[0], 3.0 / 7.0, 0.02);
  EXPECT_EQ(freq[2] + freq[0], 1.0);
}

TEST(SamplerFilters, MinPDropsTokensBelowMinPTimesMax) {
  const std::vector<float> logits = LogitsFromProbs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p;
  p.min_p = 0.2f;  // threshold 0.1: drops 0.05 only
  const int n = 10000;
  std::vector<double> freq = Frequencies(logits, p, n);
  EXPECT_EQ(freq[0], 0.0);
  EXPECT_NEAR(freq[1], 0.5 / 0.95, 0.02);
  EXPECT_NEAR(freq[2], 0.15 / 0.95, 0.02);
  EXPECT_NEAR(freq[3], 0.3 / 0.95, 0.02);

  p.min_p = 0.5f;  // threshold 0.25: keeps 0.5 and 0.3
  freq = Frequencies(logits, p, n);
  EXPECT_EQ(freq[0] + freq[2], 0.0);
  EXPECT_NEAR(freq[1], 0.5 / 0.8, 0.02);

  p.min_p = 0.7f;
  freq = Frequencies(logits, p, 500);
  EXPECT_EQ(freq[1], 1.0);
}

TEST(SamplerFilters, TopPOnEqualLogitsKeepsTheLowestIds) {
  // 1000 equal tokens, top_p 0.5: token j has j / 1000 of the mass before it, so ids < 500 stay.
  const std::vector<float> logits(1000, 0.25f);
  SamplingParams p;
  p.top_p = 0.5f;
  const int n = 20000;
  const std::vector<double> freq = Frequencies(logits, p, n);
  double kept = 0.0;
  for (int i = 0; i < 500; ++i) kept += freq[i];
  EXPECT_DOUBLE_EQ(kept, 1.0);
  EXPECT_GT(freq[0], 0.0);
  EXPECT_GT(freq[499], 0.0);
  const std::vector<double> uniform(500, 1.0 / 500);
  EXPECT_LT(ChiSquare(std::vector<double>(freq.begin(), freq.begin() + 500), uniform, n), 620.0);
}

TEST(SamplerFilters, MaskedTokensAreNeverDrawn) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = RandomLogits(300, 9, 0.1f);
  for (size_t i = 0; i < logits.size(); i += 2) logits[i] = -inf;
  Sampler s(300);
  for (float temperature : {1.0f, 100.0f}) {
    for (float top_p : {1.0f, 0.999f}) {
      SamplingParams p;
      p.temperature = temperature;
      p.top_p = top_p;
      for (int step = 0; step < 2000; ++step) {
        ASSERT_EQ(SampleOnce(s, logits, p, 13, step).token % 2, 1) << step;
      }
    }
  }
  std::vector<float> one(300, -inf);
  one[123] = -1e30f;
  SamplingParams p;
  p.logprobs = 1;
  const SampleResult r = SampleOnce(s, one, p, 1, 0);
  EXPECT_EQ(r.token, 123);
  EXPECT_EQ(r.logprob, 0.0f);
  EXPECT_EQ(r.top[0].token, 123);
}

// A straightforward reference: full sort, masks, inverse CDF over kept tokens in id order.
int32_t ReferenceSample(const std::vector<float>& l, const SamplingParams& p, double u) {
  const int v = static_cast<int>(l.size());
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  const float m = l[order[0]];
  std::vector<float> w(v);
  for (int i = 0; i < v; ++i) w[i] = l[i] == m ? 1.0f : std::exp((l[i] - m) / p.temperature);
  const int k = p.top_k > 0 ? std::min(p.top_k, v) : v;
  double mass = 0.0;
  for (int j = 0; j < k; ++j) mass += w[order[j]];
  std::vector<bool> kept(v, false);
  double above = 0.0;
  for (int j = 0; j < k; ++j) {
    if (j > 0 && above >= p.top_p * mass) break;
    kept[order[j]] = w[order[j]] >= p.min_p;
    above += w[order[j]];
  }
  double total = 0.0;
  for (int i = 0; i < v; ++i) total += kept[i] ? w[i] : 0.0;
  double c = 0.0;
  for (int i = 0; i < v; ++i) {
    if (!kept[i] || w[i] <= 0.0f) continue;
    c += w[i];
    if (c > u * total) return i;
  }
  return -1;
}

TEST(SamplerFilters, MatchesAFullSortReferenceOnALargeVocab) {
  const std::vector<float> logits = RandomLogits(6000, 77, 1.5f);
  Sampler s(6000);
  int checked = 0;
  for (int top_k : {0, 40, 2500}) {
    for (float top_p : {1.0f, 0.99f, 0.9f, 0.5f}) {
      for (float min_p : {0.0f, 0.01f}) {
        for (float temperature : {0.7f, 1.6f}) {
          SamplingParams p;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = min_p;
          p.temperature = temperature;
          for (int step = 0; step < 40; ++step) {
            const int32_t want = ReferenceSample(logits, p, SamplerUniform(5, step));
            ASSERT_EQ(SampleOnce(s, logits, p, 5, step).token, want)
                << "top_k " << top_k << " top_p " << top_p << " min_p " << min_p << " T "
                << temperature << " step " << step;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 4 * 2 * 2 * 40);
}

// ---------------------------------------------------------------- penalties

TEST(SamplerPenalties, RepetitionDividesPositiveAndMultipliesNegativeSeenLogits) {
  const std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f, -1.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  // 0 twice in the prompt (penalized once), 1 in the output, 2 in both, 5 unseen.
  const std::vector<double> got = ProcessedLogprobs(logits, p, {0, 0, 2, 3}, {1, 2});
  const std::vector<double> want = LogSoftmax({1.0f, -4.0f, 0.5f, 0.25f, 3.0f, -1.0f});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(SamplerPenalties, RepetitionChangesTheGreedyChoice) {
  Sampler s(3);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.5f;
  EXPECT_EQ(SampleOnce(s, {2.0f, 1.5f, 0.0f}, p, 1, 0, {0}, {}).token, 1);
  EXPECT_EQ(SampleOnce(s, {2.0f, 1.5f, 0.0f}, p, 1, 0, {}, {0}).token, 1);
  EXPECT_EQ(SampleOnce(s, {2.0f, 1.5f, 0.0f}, p, 1, 0, {2}, {}).token, 0);
}

TEST(SamplerPenalties, PresenceAndFrequencyCountOutputTokensOnly) {
  const std::vector<float> logits(5, 0.0f);
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  // Token 4 is only in the prompt: untouched. Token 2 appears twice in the output.
  const std::vector<double> got = ProcessedLogprobs(logits, p, {4, 4, 1}, {1, 2, 2});
  const std::vector<double> want = LogSoftmax({0.0f, -0.75f, -1.0f, 0.0f, 0.0f});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;

  p.presence_penalty = -1.0f;  // negative values encourage repetition
  p.frequency_penalty = 0.0f;
  const std::vector<double> got2 = ProcessedLogprobs(logits, p, {}, {3});
  const std::vector<double> want2 = LogSoftmax({0.0f, 0.0f, 0.0f, 1.0f, 0.0f});
  for (size_t i = 0; i < want2.size(); ++i) EXPECT_NEAR(got2[i], want2[i], 1e-5) << i;
}

TEST(SamplerPenalties, RepetitionThenFrequencyAndPresence) {
  const std::vector<float> logits = {1.0f, -1.0f, 0.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.1f;
  p.frequency_penalty = 0.2f;
  const std::vector<double> got = ProcessedLogprobs(logits, p, {}, {0, 0, 1});
  // 1 / 2 - 0.2 * 2 - 0.1 = 0; -1 * 2 - 0.2 - 0.1 = -2.3; 0 unchanged.
  const std::vector<double> want = LogSoftmax({0.0f, -2.3f, 0.0f});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(SamplerPenalties, StateDoesNotLeakBetweenCalls) {
  const std::vector<float> logits = RandomLogits(30, 4);
  SamplingParams penalized;
  penalized.repetition_penalty = 1.8f;
  penalized.frequency_penalty = 1.0f;
  penalized.presence_penalty = 1.0f;
  penalized.logprobs = 20;
  SamplingParams plain;
  plain.logprobs = 20;
  Sampler used(30);
  for (int i = 0; i < 5; ++i) SampleOnce(used, logits, penalized, 3, i, {1, 2, 3}, {4, 4, 5});
  for (const SamplingParams& p : {plain, penalized}) {
    Sampler fresh(30);
    const SampleResult want = SampleOnce(fresh, logits, p, 3, 1, {6}, {7, 4});
    const SampleResult got = SampleOnce(used, logits, p, 3, 1, {6}, {7, 4});
    EXPECT_EQ(got.token, want.token);
    EXPECT_EQ(got.logprob, want.logprob);
    ASSERT_EQ(got.top.size(), want.top.size());
    for (size_t i = 0; i < got.top.size(); ++i) {
      EXPECT_EQ(got.top[i].token, want.top[i].token);
      EXPECT_EQ(got.top[i].logprob, want.top[i].logprob);
    }
  }
}

// ---------------------------------------------------------------- logprobs

TEST(SamplerLogprobs, ChosenAndTopNAreRawLogSoftmax) {
  const std::vector<float> logits = RandomLogits(50, 12);
  const std::vector<double> want = LogSoftmax(logits);
  Sampler s(50);
  SamplingParams p;
  p.temperature = 0.7f;  // neither temperature nor top-k changes the reported logprobs
  p.top_k = 3;
  p.logprobs = 5;
  std::vector<int32_t> best(50);
  std::iota(best.begin(), best.end(), 0);
  std::sort(best.begin(), best.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int step = 0; step < 20; ++step) {
    const SampleResult r = SampleOnce(s, logits, p, 4, step);
    EXPECT_NEAR(r.logprob, want[r.token], 1e-5);
    ASSERT_EQ(r.top.size(), 5u);
    for (size_t j = 0; j < r.top.size(); ++j) {
      EXPECT_EQ(r.top[j].token, best[j]);
      EXPECT_NEAR(r.top[j].logprob, want[best[j]], 1e-5);
      if (j > 0) {
        EXPECT_GE(r.top[j - 1].logprob, r.top[j].logprob);
      }
    }
  }
}

TEST(SamplerLogprobs, AllLogprobsSumToOneAndTiesGoToLowerId) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 0.0f, 0.5f, -30.0f, 1.0f};
  Sampler s(8);
  SamplingParams p;
  p.logprobs = 8;
  const SampleResult r = SampleOnce(s, logits, p, 2, 0);
  ASSERT_EQ(r.top.size(), 8u);
  double sum = 0.0;
  for (const TokenLogprob& t : r.top) sum += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(sum, 1.0, 1e-5);
  const std::vector<int32_t> want_order = {1, 3, 7, 0, 5, 4, 2, 6};
  for (size_t j = 0; j < want_order.size(); ++j) EXPECT_EQ(r.top[j].token, want_order[j]);
}

TEST(SamplerLogprobs, NoneOrChosenOnly) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  Sampler s(3);
  SamplingParams p;
  p.temperature = 0.0f;
  SampleResult r = SampleOnce(s, logits, p);
  EXPECT_TRUE(r.top.empty());
  p.logprobs = 0;
  r = SampleOnce(s, logits, p);
  EXPECT_TRUE(r.top.empty());
  EXPECT_NEAR(r.logprob, LogSoftmax(logits)[2], 1e-6);
  p.logprobs = 20;  // more than the vocabulary: capped
  r = SampleOnce(s, logits, p);
  EXPECT_EQ(r.top.size(), 3u);
}

TEST(SamplerLogprobs, AreTakenAfterPenalties) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f};
  Sampler s(3);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 0;
  p.repetition_penalty = 4.0f;
  const SampleResult r = SampleOnce(s, logits, p, 1, 0, {1}, {});
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, LogSoftmax({1.0f, 0.5f, 0.0f})[0], 1e-6);
}

// ---------------------------------------------------------------- validation

void ExpectRejected(const SamplingParams& p, const std::string& field) {
  const Status st = ValidateSamplingParams(p, 1000);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
  EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
}

TEST(SamplerValidate, AcceptsDefaultsAndEdges) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p, 1000).ok());
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 0.5f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logprobs = 20;
  EXPECT_TRUE(ValidateSamplingParams(p, 1000).ok());
  p.top_k = 5000;  // larger than the vocabulary: off
  EXPECT_TRUE(ValidateSamplingParams(p, 1000).ok());
  EXPECT_FALSE(ValidateSamplingParams(SamplingParams{}, 0).ok());
}

TEST(SamplerValidate, RejectsEachBadFieldByName) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float t : {-0.1f, nan, inf}) {
    SamplingParams p;
    p.temperature = t;
    ExpectRejected(p, "temperature");
  }
  for (int k : {-2, -100}) {
    SamplingParams p;
    p.top_k = k;
    ExpectRejected(p, "top_k");
  }
  for (float v : {0.0f, -0.5f, 1.01f, nan}) {
    SamplingParams p;
    p.top_p = v;
    ExpectRejected(p, "top_p");
  }
  for (float v : {-0.01f, 1.5f, nan}) {
    SamplingParams p;
    p.min_p = v;
    ExpectRejected(p, "min_p");
  }
  for (float v : {0.0f, -1.0f, nan, inf}) {
    SamplingParams p;
    p.repetition_penalty = v;
    ExpectRejected(p, "repetition_penalty");
  }
  for (float v : {-2.5f, 2.01f, nan}) {
    SamplingParams p;
    p.presence_penalty = v;
    ExpectRejected(p, "presence_penalty");
    SamplingParams q;
    q.frequency_penalty = v;
    ExpectRejected(q, "frequency_penalty");
  }
  for (int v : {21, 100, -2}) {
    SamplingParams p;
    p.logprobs = v;
    ExpectRejected(p, "logprobs");
  }
}

// ---------------------------------------------------------------- speed on a 128k vocabulary

TEST(SamplerSpeed, LargeVocabulary) {
  constexpr int kVocab = 128256;
  const std::vector<float> logits = RandomLogits(kVocab, 1, 3.0f);
  Sampler s(kVocab);
  struct Case {
    const char* name;
    SamplingParams p;
  };
  std::vector<Case> cases(6);
  cases[0] = {"greedy", {}};
  cases[0].p.temperature = 0.0f;
  cases[1] = {"full softmax", {}};
  cases[2] = {"top_k 50", {}};
  cases[2].p.top_k = 50;
  cases[3] = {"top_p 0.9", {}};
  cases[3].p.top_p = 0.9f;
  cases[4] = {"top_k 50 top_p 0.9 min_p 0.05", {}};
  cases[4].p.top_k = 50;
  cases[4].p.top_p = 0.9f;
  cases[4].p.min_p = 0.05f;
  cases[5] = {"top_p 0.95 logprobs 20", {}};
  cases[5].p.top_p = 0.95f;
  cases[5].p.logprobs = 20;
  const std::vector<int32_t> history = {1, 2, 3, 100, 5000, 70000};
  for (const Case& c : cases) {
    constexpr int kCalls = 20;
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < kCalls; ++step) {
      const SampleResult r = s.Sample(logits.data(), c.p, history, history, 3, step);
      ASSERT_GE(r.token, 0);
      ASSERT_LT(r.token, kVocab);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        kCalls;
    std::printf("  %-32s %.3f ms / call\n", c.name, ms);
    EXPECT_LT(ms, 50.0) << c.name;  // loose: the machine is shared
  }
}

}  // namespace
}  // namespace llm
