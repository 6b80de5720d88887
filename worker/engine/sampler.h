// Token sampler: turns one sequence's logits into the next token (CPU, one call per sequence per
// step).
//
// Pipeline, in vLLM's order:
//   1. copy the logits into scratch (the caller's buffer is never written; NaN is read as -inf);
//   2. repetition penalty over tokens seen in the prompt OR the output (HF / vLLM semantics:
//      l > 0 ? l / r : l * r), then frequency and presence penalties over OUTPUT tokens only
//      (OpenAI semantics: l -= frequency * count + presence * (count > 0));
//   3. logprobs (when asked) are taken here: see "Logprobs" below;
//   4. temperature == 0 (or < kGreedyTemperature): greedy, argmax with ties to the lowest id;
//   5. otherwise temperature scaling, then top-k, then top-p (over the softmax of what top-k
//      kept), then min-p (p < min_p * p_max is dropped), then one draw from the softmax of what
//      remains. (This is vLLM v0's order; v1 applies min-p before top-k / top-p, which only
//      differs in what top-p renormalizes over when both are set.)
//
// Randomness: the draw is one uniform double in [0, 1) that is a pure function of
// (rng_seed, step) (splitmix64 hashing, see SamplerUniform), and the inverse CDF walks the kept
// tokens in ascending token id. So the same seed and the same request give the same tokens,
// whatever else is in the batch and in whatever order sequences are sampled.
//
// Logprobs: "raw" logprobs as OpenAI returns them: the log-softmax of the logits AFTER the
// penalties but BEFORE temperature, top-k, top-p and min-p. (vLLM v1's default
// "raw_logprobs" mode takes them before penalties too; the two agree whenever no penalty is
// set.) `logprob` is the chosen token's; `top` holds the N most likely tokens, by logprob
// descending, ties by lower id; the chosen token is not added to `top` unless it is among them.
//
// Cost on a vocabulary of V tokens. Candidates are ranked by a 64-bit key (logit, then id), so
// every selection and sort compares plain integers, and exp is a polynomial that vectorizes:
//  - copy, penalties, argmax: O(V) (+ O(prompt + output)).
//  - top-k: a lower bound on the k-th best key (the worst of the best keys of k disjoint blocks)
//    drops nearly all tokens in one O(V) pass, then nth_element over the survivors: O(V).
//  - top-p: tokens whose weight is below (1 - top_p) * mass / (2 n) can never be in the nucleus
//    and are dropped in one O(n) pass (together with min-p). Then a radix select: one O(n) pass
//    sums the mass per bucket of weights (buckets are 1/64 apart), the bucket where the mass
//    crosses top_p is found from the top, and only that bucket's tokens are sorted; the buckets
//    above it are kept whole, unsorted. O(V) plus sorting one bucket, whatever the shape of the
//    distribution (only near-identical logits put many tokens in one bucket); never a full sort.
//  - the draw walks the kept tokens in id order: sorting them when few, else one O(V) scan.
//  - logprobs: one O(V) log-sum-exp pass and one O(V) pass keeping the best N keys.
// Measured for V = 128256 on one EPYC core (best of 30 calls, random N(0, 3^2) logits, which are
// flatter than a model's): greedy 0.05 ms, plain softmax 0.3 ms, top-k 50 0.2 ms, top-p 0.9
// 0.5 ms (0.8 ms on N(0, 1) logits), logprobs 20 adds 0.3 ms.
//
// A Sampler owns scratch buffers sized for the vocabulary and is not thread-safe: use one per
// thread. In steady state a call allocates nothing but the returned `top` vector.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/sampling_params.h"
#include "common/status.h"

namespace llm {

// Below this temperature, sampling is greedy (vLLM's _SAMPLING_EPS).
// SamplingParams, its ranges and ValidateSamplingParams live in common/sampling_params.h.

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;           // filled when logprobs >= 0
  std::vector<TokenLogprob> top;  // the top `logprobs` tokens (when logprobs > 0)
};

// The uniform double in [0, 1) used for the draw of token `step` of a request seeded `rng_seed`.
double SamplerUniform(uint64_t rng_seed, int step);

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  int vocab_size() const { return vocab_size_; }

  // logits: vocab_size floats for this sequence, read only. prompt / output: the sequence's
  // tokens so far (ids outside [0, vocab_size) are ignored). rng_seed: the request's effective
  // seed. step: the index of the token being generated (0 for the first). `p` must have passed
  // ValidateSamplingParams. allowed: when set, a vocab_size-bit mask (bit t of word t / 64) of
  // the tokens that may be chosen (structured output); the others get -inf after the
  // penalties, so logprobs and every filter see the constrained distribution. At least one
  // allowed token must have a finite logit.
  SampleResult Sample(const float* logits, const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, uint64_t rng_seed, int step,
                      const uint64_t* allowed = nullptr);

 private:
  // Ranking key of token t: larger = better, i.e. higher penalized logit, ties to the lower id
  // (the logit's bits in an order-preserving form above ~t). Never 0, which means "no bound".
  uint64_t Key(int32_t t) const;
  static int32_t TokenOf(uint64_t key) { return static_cast<int32_t>(~static_cast<uint32_t>(key)); }

  void ApplyPenalties(const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output);
  void ApplyRepetitionPenalty(float penalty, std::span<const int32_t> tokens);
  void FillLogprobs(int32_t token, int n, SampleResult& result);
  int32_t SampleRandom(const SamplingParams& p, double u);
  int SelectTopK(int top_k);
  int KeepAtLeast(int n, double min_weight);
  int ApplyTopP(int n, double mass, float top_p, uint64_t* bound);
  int32_t Draw(int n, uint64_t bound, float min_p, double u);
  int32_t DrawFromIds(int n, double u) const;

  int vocab_size_;
  int32_t argmax_ = 0;
  float max_logit_ = 0.0f;
  std::vector<float> logits_;        // penalized logits
  std::vector<float> weights_;       // exp((l - max) / T), valid for this call's candidates only
  std::vector<uint64_t> keys_;       // candidates' Keys, partially sorted by the filters
  std::vector<int32_t> ids_;         // kept token ids, sorted ascending for the draw
  std::vector<double> bucket_mass_;  // top-p: mass per weight bucket
  std::vector<uint32_t> seen_;       // seen_[t] == epoch_: t already penalized in this call
  uint32_t epoch_ = 0;
  std::vector<int32_t> counts_;   // output-token counts, all zero between calls
  std::vector<int32_t> touched_;  // tokens with counts_ != 0
};

// A SampleResult as floats, for the last pipeline stage to send to rank 0 (both know `logprobs`
// from the request, so the size is known before it arrives): token, logprob, the count of top
// entries, then `max(logprobs, 0)` (token, logprob) slots; ids travel as their int32 bits.
size_t PackedSampleFloats(int logprobs);
void PackSample(const SampleResult& r, int logprobs, float* out);
// A packed sample whose token is -1: the sampling rank could not run the step.
void PackFailedSample(int logprobs, float* out);
// False for a failed sample, or ids outside [0, vocab_size) or a count above `logprobs`.
bool UnpackSample(const float* in, int logprobs, int vocab_size, SampleResult* out);

}  // namespace llm
