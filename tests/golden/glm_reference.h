// An independent double-precision reference forward pass for GLM-4 (GlmForCausalLM, model_type
// "glm", e.g. THUDM/glm-4-9b-chat-hf) and GLM-4-0414 (Glm4ForCausalLM, model_type "glm4"),
// written from transformers' modeling_glm.py / modeling_glm4.py and configuration_glm*.py
// (eager attention): plain loops over std::vector<double>, no engine code, no KV cache.
//
//   - Glm*RMSNorm: x / sqrt(mean(x^2) + eps) * w (eps default 1.5625e-07).
//   - Attention: q/k/v_proj with bias when attention_bias (default true), o_proj without; scale
//     head_dim^-0.5 (head_dim from the config, default 128), GQA, causal.
//   - RoPE on the first rotary_dim = int(head_dim * partial_rotary_factor) lanes of each head
//     (default factor 0.5; the rest pass through), inv_freq_i = theta^(-2i / rotary_dim), applied
//     interleaved: apply_rotary_pos_emb takes cos[..., :rotary_dim / 2].repeat_interleave(2) and
//     GLM's rotate_half stacks (-x[1::2], x[0::2]), so lanes (2i, 2i + 1) rotate by angle
//     pos * inv_freq_i.
//   - MLP: [gate; up] = gate_up_proj(h) (chunk(2) of the output rows), down_proj(up * silu(gate)).
//   - GlmDecoderLayer: x += attn(input_layernorm(x)); x += mlp(post_attention_layernorm(x)).
//   - Glm4DecoderLayer adds post_self_attn_layernorm on the attention output and
//     post_mlp_layernorm on the MLP output, each before its residual add.
//   - Logits = lm_head(norm(x)) (tie_word_embeddings default false).
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/golden/reference_common.h"

namespace llm::testing::reference {

struct GlmRefConfig {
  bool glm4 = false;
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int intermediate = 0, rotary_dim = 0;
  double eps = 1.5625e-07, theta = 10000.0;
  bool attention_bias = true, interleaved = true, tied = false;
};

inline GlmRefConfig GlmRefConfigFromJson(const nlohmann::json& j) {
  GlmRefConfig c;
  const std::string arch = j.at("architectures").at(0);
  if (arch != "GlmForCausalLM" && arch != "Glm4ForCausalLM") {
    throw std::runtime_error("glm reference: " + arch);
  }
  c.glm4 = arch == "Glm4ForCausalLM";
  c.hidden = j.at("hidden_size");
  c.layers = j.at("num_hidden_layers");
  c.heads = j.at("num_attention_heads");
  c.kv_heads = j.value("num_key_value_heads", c.heads);
  c.head_dim = j.value("head_dim", 128);
  c.vocab = j.at("vocab_size");
  c.intermediate = j.at("intermediate_size");
  c.rotary_dim = static_cast<int>(c.head_dim * JsonNumberOr(j, "partial_rotary_factor", 0.5));
  c.eps = JsonNumberOr(j, "rms_norm_eps", 1.5625e-07);
  c.theta = JsonNumberOr(j, "rope_theta", 10000.0);
  c.attention_bias = j.value("attention_bias", true);
  c.tied = j.value("tie_word_embeddings", false);
  return c;
}

class GlmReference : public ReferenceModel {
 public:
  GlmReference(GlmRefConfig c, const RefTensors* t) : ReferenceModel(t), c_(std::move(c)) {}

  // Logits [ids.size()][vocab] of every position of `ids` (position p = index p).
  std::vector<Vec> Forward(const std::vector<int32_t>& ids) const {
    std::vector<Vec> x = Embed(ids, c_.hidden);
    for (int l = 0; l < c_.layers; ++l) Layer(l, &x);
    return Logits(x, c_.vocab, c_.tied, c_.eps);
  }

 private:
  Vec Project(const std::string& p, int rows, const Vec& h) const {
    Vec y = MatVec(T(p + ".weight"), rows, c_.hidden, h);
    if (c_.attention_bias) {
      const Vec& b = T(p + ".bias");
      for (int r = 0; r < rows; ++r) y[r] += b[r];
    }
    return y;
  }

  void Layer(int l, std::vector<Vec>* x) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int n = static_cast<int>(x->size()), d = c_.head_dim;
    const int qd = c_.heads * d, kd = c_.kv_heads * d, inter = c_.intermediate;
    const Vec inv_freq = DefaultInvFreq(c_.theta, c_.rotary_dim);
    std::vector<Vec> q(n), k(n), v(n);
    for (int i = 0; i < n; ++i) {
      const Vec h = RmsNorm((*x)[i], T(p + "input_layernorm.weight"), c_.eps);
      q[i] = Project(p + "self_attn.q_proj", qd, h);
      k[i] = Project(p + "self_attn.k_proj", kd, h);
      v[i] = Project(p + "self_attn.v_proj", kd, h);
      for (int hd = 0; hd < c_.heads; ++hd) Rope(&q[i][hd * d], inv_freq, i, c_.interleaved);
      for (int hd = 0; hd < c_.kv_heads; ++hd) Rope(&k[i][hd * d], inv_freq, i, c_.interleaved);
    }
    const std::vector<Vec> attn = CausalAttention(
        q, k, v, {c_.heads, c_.kv_heads, d, 1.0 / std::sqrt(static_cast<double>(d))});
    for (int i = 0; i < n; ++i) {
      Vec o = MatVec(T(p + "self_attn.o_proj.weight"), c_.hidden, qd, attn[i]);
      if (c_.glm4) o = RmsNorm(o, T(p + "post_self_attn_layernorm.weight"), c_.eps);
      for (int e = 0; e < c_.hidden; ++e) (*x)[i][e] += o[e];
      const Vec h = RmsNorm((*x)[i], T(p + "post_attention_layernorm.weight"), c_.eps);
      const Vec gu = MatVec(T(p + "mlp.gate_up_proj.weight"), 2 * inter, c_.hidden, h);
      Vec a(inter);
      for (int r = 0; r < inter; ++r) a[r] = gu[inter + r] * Silu(gu[r]);
      Vec y = MatVec(T(p + "mlp.down_proj.weight"), c_.hidden, inter, a);
      if (c_.glm4) y = RmsNorm(y, T(p + "post_mlp_layernorm.weight"), c_.eps);
      for (int e = 0; e < c_.hidden; ++e) (*x)[i][e] += y[e];
    }
  }

  GlmRefConfig c_;
};

}  // namespace llm::testing::reference
