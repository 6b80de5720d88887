// What the random-weight golden tests (Qwen3-MoE, Gemma 3, Phi-3 LongRoPE) share: the float64
// building blocks of their independent reference forward passes (matrix-vector product, RMSNorm,
// rotary embedding, causal GQA attention, greedy decoding), the seeded weight stream, and the
// writing and reading of the F32 safetensors folders the engine loads. No engine code: a
// reference built from these is as independent of the engine as one written out in full.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/worker/tiny_model.h"  // FakeTensor, WriteSafetensors

namespace llm::testing {
namespace reference {

// Tensors by their transformers name, row-major, as double.
using RefTensors = std::map<std::string, std::vector<double>>;
using Vec = std::vector<double>;

inline double JsonNumberOr(const nlohmann::json& j, const char* key, double fallback) {
  return j.contains(key) && !j[key].is_null() ? j[key].get<double>() : fallback;
}

// y = W x with W [rows, cols] row-major.
inline Vec MatVec(const Vec& w, int rows, int cols, const Vec& x) {
  Vec y(rows, 0.0);
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int k = 0; k < cols; ++k) s += w[static_cast<size_t>(r) * cols + k] * x[k];
    y[r] = s;
  }
  return y;
}

// x / sqrt(mean(x^2) + eps) * (w + w_offset) (Gemma stores w and multiplies by 1 + w).
inline Vec RmsNorm(const Vec& x, const Vec& w, double eps, double w_offset = 0.0) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * (w[i] + w_offset);
  return y;
}

// RoPE on one head at `pos`, in place: the first 2 * inv_freq.size() lanes rotate, the rest pass
// through. Rotate-half (NEOX, transformers' default rotate_half) pairs lane i with
// i + rotary_dim / 2; interleaved (GLM's rotate_half over x[..., 0::2] / x[..., 1::2] with
// repeat_interleave'd cos/sin) pairs 2i with 2i + 1. cos and sin are multiplied by `mscale`
// (LongRoPE's attention_factor).
inline void Rope(double* v, const Vec& inv_freq, int pos, bool interleaved = false,
                 double mscale = 1.0) {
  const int half = static_cast<int>(inv_freq.size());
  for (int i = 0; i < half; ++i) {
    const double a = pos * inv_freq[i], cs = std::cos(a) * mscale, sn = std::sin(a) * mscale;
    double& x1 = interleaved ? v[2 * i] : v[i];
    double& x2 = interleaved ? v[2 * i + 1] : v[i + half];
    const double a1 = x1, a2 = x2;
    x1 = a1 * cs - a2 * sn;
    x2 = a2 * cs + a1 * sn;
  }
}

// theta^(-2i / dim) for i < dim / 2: the default rotary inverse frequencies.
inline Vec DefaultInvFreq(double theta, int dim) {
  Vec f(dim / 2);
  for (int i = 0; i < dim / 2; ++i) f[i] = std::pow(theta, -2.0 * i / dim);
  return f;
}

struct AttentionShape {
  int heads = 0, kv_heads = 0, head_dim = 0;
  double scale = 1.0;  // on q . k
  int window = 0;      // > 0: key j is seen from query i only when j > i - window
  double softcap = 0;  // > 0: tanh(s / softcap) * softcap on the scaled scores
};

// Eager causal attention over already-rotated q [n][heads * d], k, v [n][kv_heads * d]: query
// head h reads KV head h / (heads / kv_heads). Returns [n][heads * d].
inline std::vector<Vec> CausalAttention(const std::vector<Vec>& q, const std::vector<Vec>& k,
                                        const std::vector<Vec>& v, const AttentionShape& a) {
  const int n = static_cast<int>(q.size()), d = a.head_dim, group = a.heads / a.kv_heads;
  std::vector<Vec> out(n, Vec(static_cast<size_t>(a.heads) * d, 0.0));
  for (int i = 0; i < n; ++i) {
    const int first = a.window > 0 ? std::max(0, i - a.window + 1) : 0;
    for (int h = 0; h < a.heads; ++h) {
      const int kv = h / group;
      Vec s(i + 1, 0.0);
      double mx = -1e300;
      for (int j = first; j <= i; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += q[i][h * d + e] * k[j][kv * d + e];
        s[j] = dot * a.scale;
        if (a.softcap > 0) s[j] = std::tanh(s[j] / a.softcap) * a.softcap;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = first; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int j = first; j <= i; ++j) {
        for (int e = 0; e < d; ++e) out[i][h * d + e] += s[j] / sum * v[j][kv * d + e];
      }
    }
  }
  return out;
}

inline double Silu(double x) {
  return x / (1.0 + std::exp(-x));
}

// What every reference model does alike: its tensors by name, the embedding rows, and the
// logits (lm_head, or the tied embedding, of the final RMSNorm).
class ReferenceModel {
 public:
  explicit ReferenceModel(const RefTensors* t) : t_(*t) {}

 protected:
  const Vec& T(const std::string& name) const {
    auto it = t_.find(name);
    if (it == t_.end()) throw std::runtime_error("reference: missing tensor " + name);
    return it->second;
  }

  // model.embed_tokens rows of `ids`, times `scale`.
  std::vector<Vec> Embed(const std::vector<int32_t>& ids, int hidden, double scale = 1.0) const {
    const Vec& embed = T("model.embed_tokens.weight");
    std::vector<Vec> x(ids.size(), Vec(hidden));
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int k = 0; k < hidden; ++k) {
        x[i][k] = embed[static_cast<size_t>(ids[i]) * hidden + k] * scale;
      }
    }
    return x;
  }

  // Logits [n][vocab] of the hidden states `x` after model.norm (weight + w_offset).
  std::vector<Vec> Logits(const std::vector<Vec>& x, int vocab, bool tied, double eps,
                          double w_offset = 0.0) const {
    const Vec& head = T(tied ? "model.embed_tokens.weight" : "lm_head.weight");
    std::vector<Vec> logits(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const int hidden = static_cast<int>(x[i].size());
      logits[i] = MatVec(head, vocab, hidden, RmsNorm(x[i], T("model.norm.weight"), eps, w_offset));
    }
    return logits;
  }

 private:
  const RefTensors& t_;
};

// Greedy decoding with a reference: `steps` argmax tokens after `prompt` (no stop at EOS),
// and the logits that chose each (step 0: the last prompt position).
struct RefGreedy {
  std::vector<Vec> prompt_logits;  // every prompt position
  std::vector<int32_t> ids;
  std::vector<Vec> step_logits;
  double min_margin = 1e300;  // smallest top-1 minus top-2 logit over the steps
};

// Any reference with Forward(ids) -> logits per position, or Forward(ids, prompt_len) when its
// result depends on how the tokens were fed (LongRoPE: the prompt in one forward, then one
// token per step, as transformers' generate does with a KV cache).
template <typename Model>
RefGreedy ReferenceGreedy(const Model& ref, const std::vector<int32_t>& prompt, int steps) {
  RefGreedy g;
  std::vector<int32_t> seq = prompt;
  for (int s = 0; s < steps; ++s) {
    std::vector<Vec> all;
    if constexpr (requires { ref.Forward(seq, prompt.size()); }) {
      all = ref.Forward(seq, prompt.size());
    } else {
      all = ref.Forward(seq);
    }
    if (s == 0) g.prompt_logits = all;
    const Vec& last = all.back();
    int best = 0;
    for (int v = 1; v < static_cast<int>(last.size()); ++v) {
      if (last[v] > last[best]) best = v;
    }
    double second = -1e300;
    for (int v = 0; v < static_cast<int>(last.size()); ++v) {
      if (v != best) second = std::max(second, last[v]);
    }
    g.min_margin = std::min(g.min_margin, last[best] - second);
    g.ids.push_back(best);
    g.step_logits.push_back(last);
    seq.push_back(best);
  }
  return g;
}

// The largest |a - b| over every position and vocabulary entry.
inline double MaxAbsDiff(const std::vector<Vec>& a, const std::vector<Vec>& b) {
  double d = 0;
  for (size_t p = 0; p < a.size(); ++p) {
    for (size_t v = 0; v < a[p].size(); ++v) d = std::max(d, std::fabs(a[p][v] - b[p][v]));
  }
  return d;
}

}  // namespace reference

// Stories260K ids (BOS included): "Once upon a time" and "Lily and Tom went to the park", the
// two prompts of ../shared/golden/families (5 and 12 tokens), and a longer one (21 tokens).
inline std::vector<std::vector<int32_t>> StoriesPrompts() {
  return {{1, 403, 407, 261, 378},
          {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433},
          {1,   403, 407, 261, 378, 317, 269, 274, 287, 263, 377,
           267, 265, 282, 295, 433, 403, 407, 261, 378, 269}};
}

// A standard normal stream from SplitMix64 + Box-Muller: every platform draws the same values
// for a seed, so the test models are the same bytes everywhere.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : state_(seed) {}
  double Next() {
    const double u1 = (static_cast<double>(Bits() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = static_cast<double>(Bits() >> 11) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t Bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// A random-weight model: its config.json, its F32 tensors as the file stores them and, for the
// reference, the same values as double.
struct TinyModel {
  nlohmann::json config;
  reference::RefTensors tensors;
  std::map<std::string, FakeTensor> files;

  // Adds tensor `name` of `shape` drawn as mean + std * N(0, 1) from `rng`.
  void Add(NormalStream& rng, const std::string& name, std::vector<int64_t> shape, double mean,
           double std) {
    FakeTensor t;
    int64_t n = 1;
    for (auto d : shape) n *= d;
    t.shape = std::move(shape);
    auto& ref = tensors[name];
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(mean + std * rng.Next());
      t.values.push_back(v);
      ref.push_back(v);
    }
    files[name] = std::move(t);
  }

  // Writes config.json + model.safetensors (+ the tokenizer files found in `tokenizer_dir`)
  // into a fresh folder `dir`.
  void Write(const std::filesystem::path& dir, const std::filesystem::path& tokenizer_dir) const {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump(2);
    WriteSafetensors((dir / "model.safetensors").string(), files);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"}) {
      if (std::filesystem::exists(tokenizer_dir / f)) {
        std::filesystem::copy_file(tokenizer_dir / f, dir / f);
      }
    }
  }
};

// Every F32 tensor of a safetensors file, as double (the reference's own reader).
inline reference::RefTensors ReadSafetensorsF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  std::string header(len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(len));
  const std::string data((std::istreambuf_iterator<char>(in)), {});
  if (!in.eof() && !in) throw std::runtime_error("cannot read " + path);
  reference::RefTensors out;
  const nlohmann::json index = nlohmann::json::parse(header);
  for (const auto& [name, info] : index.items()) {
    if (name == "__metadata__") continue;
    if (info["dtype"] != "F32") throw std::runtime_error(path + ": " + name + " is not F32");
    const size_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    auto& v = out[name];
    for (size_t off = begin; off + 4 <= end; off += 4) {
      float f;
      std::memcpy(&f, data.data() + off, 4);
      v.push_back(f);
    }
  }
  return out;
}

}  // namespace llm::testing
