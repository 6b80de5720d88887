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
//      remains.
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
// Cost on a vocabulary of V tokens: O(V) for the copy, the argmax and the filtering. Top-k is an
// nth_element, O(V) expected, never a full sort. Top-p sorts only a growing prefix: nth_element
// picks the best 128 candidates (O(V)), sorts them (O(128 log 128)), and quadruples the prefix
// only while its mass is below top_p, so a peaked distribution costs O(V) and only a flat one
// with top_p near 1 approaches a full O(V log V) sort. Logprobs add one O(V) log-sum-exp pass and
// an O(V log N) partial sort for the top N. On a 128k vocabulary a call is well under a
// millisecond in the usual cases.
//
// A Sampler owns scratch buffers sized for the vocabulary and is not thread-safe: use one per
// thread. In steady state a call allocates nothing but the returned `top` vector.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"

namespace llm {

// Below this temperature, sampling is greedy (vLLM's _SAMPLING_EPS).
inline constexpr float kGreedyTemperature = 1e-5f;
// Largest `logprobs` a request may ask for (OpenAI's limit).
inline constexpr int kMaxLogprobs = 20;

struct SamplingParams {
  float temperature = 1.0f;         // 0 => greedy (argmax; ties -> lowest id)
  int top_k = 0;                    // 0 or -1 => off; >= vocab size => off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; applied to tokens seen in the prompt or the output
  float presence_penalty = 0.0f;    // [-2, 2], over output tokens: l -= presence * (count > 0)
  float frequency_penalty = 0.0f;   // [-2, 2], over output tokens: l -= frequency * count
  std::optional<uint64_t> seed;     // per-request seed (the engine draws one when absent)
  int logprobs = -1;  // -1: none; 0: the chosen token's logprob; N > 0: plus the top N
};

// InvalidArgument naming the field at fault (NaN is rejected everywhere).
Status ValidateSamplingParams(const SamplingParams& params, int vocab_size);

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
  // ValidateSamplingParams.
  SampleResult Sample(const float* logits, const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, uint64_t rng_seed, int step);

 private:
  // True when token a ranks before token b: higher penalized logit, ties to the lower id.
  bool Better(int32_t a, int32_t b) const {
    return logits_[a] > logits_[b] || (logits_[a] == logits_[b] && a < b);
  }

  void ApplyPenalties(const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output);
  void ApplyRepetitionPenalty(float penalty, std::span<const int32_t> tokens);
  void FillLogprobs(int32_t token, int n, SampleResult& result);
  int32_t SampleRandom(const SamplingParams& p, double u);
  int ApplyTopK(int top_k);
  int ApplyMinP(int n, float min_p);
  int32_t ApplyTopP(int n, double mass, float top_p);
  int32_t Draw(int32_t pivot, float min_p, double u) const;

  int vocab_size_;
  int32_t argmax_ = 0;
  float max_logit_ = 0.0f;
  std::vector<float> logits_;   // penalized logits
  std::vector<float> weights_;  // exp((l - max) / T), valid for the candidates of this call
  std::vector<int32_t> order_;  // candidate token ids, partially sorted by Better
  std::vector<uint32_t> seen_;  // seen_[t] == epoch_: t already penalized in this call
  uint32_t epoch_ = 0;
  std::vector<int32_t> counts_;   // output-token counts, all zero between calls
  std::vector<int32_t> touched_;  // tokens with counts_ != 0
};

}  // namespace llm
