// An independent double-precision reference forward pass for the Gemma 2 and Gemma 3 text
// models, written directly from transformers' modeling_gemma2.py / modeling_gemma3.py (eager
// attention) and configuration_gemma2.py / configuration_gemma3.py: plain loops over
// std::vector<double>, no engine code, no KV cache (every call recomputes the whole sequence).
//
// Both (Gemma2ForCausalLM, Gemma3ForCausalLM):
//   - Gemma*RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w), w as stored.
//   - Embedding scaled by hidden_size ** 0.5 (Gemma*TextScaledWordEmbedding / Gemma2Model).
//   - Layer: x += post_attention_layernorm(attn(input_layernorm(x)));
//            x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))),
//     mlp(h) = down(gelu_tanh(gate(h)) * up(h)).
//   - Attention: scores = q.k * query_pre_attn_scalar ** -0.5, then when
//     attn_logit_softcapping is set tanh(s / cap) * cap, then the causal mask, on sliding layers
//     also kv_idx > q_idx - sliding_window (masking_utils.sliding_window_overlay), softmax,
//     GQA (query head j reads KV head j / (heads / kv_heads)).
//   - RoPE rotate-half with inv_freq_i = base ** (-2i / head_dim).
//   - Logits = norm(x) . embed_tokens (tied) or lm_head; final_logit_softcapping when set.
// Gemma 2: sliding layers are the even ones ((i + 1) % 2 != 0), one RoPE base rope_theta.
// Gemma 3 (Gemma3TextConfig / Gemma3Attention / Gemma3RotaryEmbedding):
//   - q_norm / k_norm: Gemma3RMSNorm over head_dim on each head of q and k, before RoPE.
//   - layer_types when given, else layer i is "sliding_attention" unless
//     (i + 1) % sliding_window_pattern == 0 (default pattern 6).
//   - sliding layers: RoPE base rope_local_base_freq (default 1e4), no scaling; full layers:
//     rope_theta (default 1e6) with rope_scaling (linear: inv_freq / factor).
//   - Defaults: query_pre_attn_scalar 256, sliding_window 4096, no soft-caps, tied embeddings.
//
// How it is known to be right: gemma3_golden_test.cc runs this code on the shared gemma2
// random-weight model of ../shared/golden/families (whose reference comes from an independent
// NumPy float64 implementation, cross-checked against llama.cpp) and requires its greedy ids
// exactly and its logits to the 7 digits they are stored with. That covers everything but the
// Gemma 3 additions (q/k norms, the layer pattern, two RoPE bases, linear scaling), which are
// each a few lines above and are checked by hand in the same test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/golden/reference_common.h"

namespace llm::testing::reference {

struct GemmaRefConfig {
  bool gemma3 = false;
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int intermediate = 0;
  int window = 0;  // 0: no sliding window
  double eps = 1e-6, query_pre_attn_scalar = 0;
  double attn_softcap = 0, final_softcap = 0;  // 0: none
  double theta = 10000.0, local_theta = 10000.0;
  double linear_factor = 1.0;  // rope_scaling linear on full-attention layers
  bool tied = true;
  bool qk_norm = false;       // Gemma 3
  std::vector<bool> sliding;  // per layer
};

inline GemmaRefConfig GemmaRefConfigFromJson(const nlohmann::json& j) {
  GemmaRefConfig c;
  const std::string arch = j.at("architectures").at(0).get<std::string>();
  if (arch != "Gemma2ForCausalLM" && arch != "Gemma3ForCausalLM") {
    throw std::runtime_error("gemma reference: " + arch);
  }
  c.gemma3 = c.qk_norm = arch == "Gemma3ForCausalLM";
  c.hidden = j.at("hidden_size");
  c.layers = j.at("num_hidden_layers");
  c.heads = j.at("num_attention_heads");
  c.kv_heads = j.value("num_key_value_heads", c.heads);
  c.head_dim = j.contains("head_dim") ? j["head_dim"].get<int>() : c.hidden / c.heads;
  c.vocab = j.at("vocab_size");
  c.intermediate = j.at("intermediate_size");
  c.eps = JsonNumberOr(j, "rms_norm_eps", 1e-6);
  c.query_pre_attn_scalar = JsonNumberOr(j, "query_pre_attn_scalar", 256);
  c.attn_softcap = JsonNumberOr(j, "attn_logit_softcapping", c.gemma3 ? 0 : 50.0);
  c.final_softcap = JsonNumberOr(j, "final_logit_softcapping", c.gemma3 ? 0 : 30.0);
  c.window = static_cast<int>(JsonNumberOr(j, "sliding_window", 4096));
  c.tied = j.value("tie_word_embeddings", true);
  c.theta = JsonNumberOr(j, "rope_theta", c.gemma3 ? 1e6 : 10000.0);
  c.local_theta = c.gemma3 ? JsonNumberOr(j, "rope_local_base_freq", 10000.0) : c.theta;
  if (c.gemma3 && j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const auto& rs = j["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    if (type == "linear") {
      c.linear_factor = rs.at("factor").get<double>();
    } else if (type != "default") {
      throw std::runtime_error("gemma reference: rope_scaling " + type);
    }
  }
  c.sliding.assign(c.layers, false);
  if (c.gemma3 && j.contains("layer_types") && j["layer_types"].is_array()) {
    for (int l = 0; l < c.layers; ++l) c.sliding[l] = j["layer_types"][l] == "sliding_attention";
  } else {
    const int pattern = c.gemma3 ? j.value("sliding_window_pattern", 6) : 2;
    for (int l = 0; l < c.layers; ++l) c.sliding[l] = (l + 1) % pattern != 0;
  }
  return c;
}

class GemmaReference : public ReferenceModel {
 public:
  GemmaReference(GemmaRefConfig c, const RefTensors* t) : ReferenceModel(t), c_(std::move(c)) {}

  // Logits [ids.size()][vocab] of every position of `ids` (position p = index p).
  std::vector<Vec> Forward(const std::vector<int32_t>& ids) const {
    std::vector<Vec> x = Embed(ids, c_.hidden, std::sqrt(static_cast<double>(c_.hidden)));
    for (int l = 0; l < c_.layers; ++l) Layer(l, &x);
    std::vector<Vec> logits = Logits(x, c_.vocab, c_.tied, c_.eps, /*w_offset=*/1.0);
    if (c_.final_softcap > 0) {
      for (Vec& row : logits) {
        for (double& v : row) v = std::tanh(v / c_.final_softcap) * c_.final_softcap;
      }
    }
    return logits;
  }

  // The RoPE inverse frequencies of `layer` (exposed for the hand checks).
  Vec InvFreq(int layer) const {
    const int d = c_.head_dim;
    const bool local = c_.gemma3 && c_.sliding[layer];
    const double base = local ? c_.local_theta : c_.theta;
    Vec f(d / 2);
    for (int i = 0; i < d / 2; ++i) {
      f[i] = std::pow(base, -2.0 * i / d);
      if (c_.gemma3 && !local) f[i] /= c_.linear_factor;
    }
    return f;
  }

  // Gemma RMSNorm: x / rms * (1 + w).
  Vec RmsNorm(const Vec& x, const Vec& w) const { return reference::RmsNorm(x, w, c_.eps, 1.0); }

 private:
  // One head of head_dim at `pos`: the per-head norm (Gemma 3), then rotate-half.
  void NormRope(double* v, const Vec* norm, const Vec& inv_freq, int pos) const {
    const int d = c_.head_dim;
    if (norm) {
      const Vec normed = RmsNorm(Vec(v, v + d), *norm);
      std::copy(normed.begin(), normed.end(), v);
    }
    Rope(v, inv_freq, pos);
  }

  std::vector<Vec> Attention(int l, const std::string& p, const std::vector<Vec>& h) const {
    const int n = static_cast<int>(h.size()), d = c_.head_dim;
    const int qd = c_.heads * d, kd = c_.kv_heads * d;
    const Vec inv_freq = InvFreq(l);
    std::vector<Vec> q(n), k(n), v(n);
    for (int i = 0; i < n; ++i) {
      q[i] = MatVec(T(p + "q_proj.weight"), qd, c_.hidden, h[i]);
      k[i] = MatVec(T(p + "k_proj.weight"), kd, c_.hidden, h[i]);
      v[i] = MatVec(T(p + "v_proj.weight"), kd, c_.hidden, h[i]);
      const Vec* qn = c_.qk_norm ? &T(p + "q_norm.weight") : nullptr;
      const Vec* kn = c_.qk_norm ? &T(p + "k_norm.weight") : nullptr;
      for (int hd = 0; hd < c_.heads; ++hd) NormRope(&q[i][hd * d], qn, inv_freq, i);
      for (int hd = 0; hd < c_.kv_heads; ++hd) NormRope(&k[i][hd * d], kn, inv_freq, i);
    }
    AttentionShape shape{c_.heads, c_.kv_heads, d, 1.0 / std::sqrt(c_.query_pre_attn_scalar)};
    shape.window = c_.sliding[l] ? c_.window : 0;
    shape.softcap = c_.attn_softcap;
    const std::vector<Vec> attn = CausalAttention(q, k, v, shape);
    std::vector<Vec> out(n);
    for (int i = 0; i < n; ++i) out[i] = MatVec(T(p + "o_proj.weight"), c_.hidden, qd, attn[i]);
    return out;
  }

  Vec Mlp(const std::string& p, const Vec& h) const {
    const int inter = c_.intermediate;
    const Vec g = MatVec(T(p + "gate_proj.weight"), inter, c_.hidden, h);
    const Vec u = MatVec(T(p + "up_proj.weight"), inter, c_.hidden, h);
    Vec a(inter);
    const double k0 = std::sqrt(2.0 / M_PI);
    for (int i = 0; i < inter; ++i) {
      const double x = g[i];
      a[i] = 0.5 * x * (1.0 + std::tanh(k0 * (x + 0.044715 * x * x * x))) * u[i];
    }
    return MatVec(T(p + "down_proj.weight"), c_.hidden, inter, a);
  }

  void Layer(int l, std::vector<Vec>* x) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int n = static_cast<int>(x->size());
    std::vector<Vec> h(n);
    for (int i = 0; i < n; ++i) h[i] = RmsNorm((*x)[i], T(p + "input_layernorm.weight"));
    const std::vector<Vec> a = Attention(l, p + "self_attn.", h);
    for (int i = 0; i < n; ++i) {
      const Vec an = RmsNorm(a[i], T(p + "post_attention_layernorm.weight"));
      for (int k = 0; k < c_.hidden; ++k) (*x)[i][k] += an[k];
      const Vec hn = RmsNorm((*x)[i], T(p + "pre_feedforward_layernorm.weight"));
      const Vec m = RmsNorm(Mlp(p + "mlp.", hn), T(p + "post_feedforward_layernorm.weight"));
      for (int k = 0; k < c_.hidden; ++k) (*x)[i][k] += m[k];
    }
  }

  GemmaRefConfig c_;
};

}  // namespace llm::testing::reference
