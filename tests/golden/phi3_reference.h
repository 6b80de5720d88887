// An independent double-precision reference forward pass for Phi-3 (Phi3ForCausalLM) with
// LongRoPE, written from transformers' modeling_phi3.py (eager attention) and
// modeling_rope_utils.py: plain loops over std::vector<double>, no engine code, no KV cache.
//
//   - Layer: x += o_proj(attn(input_layernorm(x))); x += down_proj(up * silu(gate)) where
//     [gate; up] = gate_up_proj(post_attention_layernorm(x)) (chunk(2) of the output rows);
//     q, k, v are the rows [q; k; v] of qkv_proj. RMSNorm x / sqrt(mean(x^2) + eps) * w.
//     Attention causal, scale head_dim^-0.5, GQA. Logits = lm_head(norm(x)).
//   - RoPE rotate-half on the first d = int(head_dim * partial_rotary_factor) lanes of each head
//     (apply_rotary_pos_emb's q_rot / q_pass). _compute_longrope_parameters: inv_freq_i =
//     1 / (ext_i * theta^(2i/d))
//     with ext = long_factor when the sequence length exceeds original_max_position_embeddings,
//     else short_factor; cos and sin multiplied by attention_factor, which defaults to
//     sqrt(1 + ln(factor) / ln(original)) with factor = max_position_embeddings / original
//     (1 when factor <= 1). original_max_position_embeddings: the top-level key (Phi-3's), else
//     max_position_embeddings.
//   - Which factors: Phi3RotaryEmbedding (dynamic longrope update) picks them per forward call
//     from max(position_ids) + 1. Generating with a KV cache, the prompt is one call and each
//     new token another, and cached keys keep their rotation; so position p of a sequence whose
//     prompt has `prompt_len` tokens was rotated with the long factors iff
//     max(p + 1, prompt_len) > original_max_position_embeddings. Forward(ids, prompt_len)
//     recomputes every position with exactly those rotations.
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

struct Phi3RefConfig {
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int intermediate = 0;
  // RoPE (rotate-half) on the first rotary_dim = int(head_dim × partial_rotary_factor) lanes of
  // each head (Phi-4-mini: 0.75); the rest pass through.
  int rotary_dim = 0;
  double eps = 1e-5, theta = 10000.0;
  bool longrope = false;
  int original_max = 0;
  Vec short_factor, long_factor;
  double attention_factor = 1.0;
};

inline Phi3RefConfig Phi3RefConfigFromJson(const nlohmann::json& j) {
  Phi3RefConfig c;
  if (j.at("architectures").at(0) != "Phi3ForCausalLM") throw std::runtime_error("phi3 reference");
  c.hidden = j.at("hidden_size");
  c.layers = j.at("num_hidden_layers");
  c.heads = j.at("num_attention_heads");
  c.kv_heads = j.value("num_key_value_heads", c.heads);
  c.head_dim = c.hidden / c.heads;
  c.rotary_dim = static_cast<int>(c.head_dim * JsonNumberOr(j, "partial_rotary_factor", 1.0));
  c.vocab = j.at("vocab_size");
  c.intermediate = j.at("intermediate_size");
  c.eps = JsonNumberOr(j, "rms_norm_eps", 1e-5);
  c.theta = JsonNumberOr(j, "rope_theta", 10000.0);
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return c;
  const auto& rs = j["rope_scaling"];
  const std::string type = rs.value("rope_type", rs.value("type", std::string()));
  if (type != "longrope" && type != "su") throw std::runtime_error("phi3 reference: " + type);
  c.longrope = true;
  c.short_factor = rs.at("short_factor").get<Vec>();
  c.long_factor = rs.at("long_factor").get<Vec>();
  const double max_pos = j.at("max_position_embeddings");
  double factor = JsonNumberOr(rs, "factor", 1.0);
  if (j.contains("original_max_position_embeddings")) {
    c.original_max = j["original_max_position_embeddings"];
    factor = max_pos / c.original_max;
  } else {
    c.original_max = static_cast<int>(max_pos);
  }
  c.attention_factor = JsonNumberOr(
      rs, "attention_factor",
      factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(c.original_max)));
  return c;
}

class Phi3Reference : public ReferenceModel {
 public:
  Phi3Reference(Phi3RefConfig c, const RefTensors* t) : ReferenceModel(t), c_(std::move(c)) {}

  // Logits [ids.size()][vocab] of every position, the first `prompt_len` tokens fed as one call.
  std::vector<Vec> Forward(const std::vector<int32_t>& ids, size_t prompt_len) const {
    std::vector<Vec> x = Embed(ids, c_.hidden);
    for (int l = 0; l < c_.layers; ++l) Layer(l, prompt_len, &x);
    return Logits(x, c_.vocab, /*tied=*/false, c_.eps);
  }

  // The inverse frequencies of the short or long factors (exposed for the hand checks).
  Vec InvFreq(bool long_factors) const {
    Vec f = DefaultInvFreq(c_.theta, c_.rotary_dim);
    if (!c_.longrope) return f;
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] /= (long_factors ? c_.long_factor : c_.short_factor)[i];
    }
    return f;
  }

 private:
  bool UsesLong(int pos, size_t prompt_len) const {
    return c_.longrope && std::max<int64_t>(pos + 1, static_cast<int64_t>(prompt_len)) >
                              static_cast<int64_t>(c_.original_max);
  }

  void Layer(int l, size_t prompt_len, std::vector<Vec>* x) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int n = static_cast<int>(x->size()), d = c_.head_dim;
    const int qd = c_.heads * d, kd = c_.kv_heads * d;
    const Vec short_freq = InvFreq(false), long_freq = InvFreq(true);
    std::vector<Vec> q(n), k(n), v(n);
    for (int i = 0; i < n; ++i) {
      const Vec h = RmsNorm((*x)[i], T(p + "input_layernorm.weight"), c_.eps);
      const Vec qkv = MatVec(T(p + "self_attn.qkv_proj.weight"), qd + 2 * kd, c_.hidden, h);
      q[i].assign(qkv.begin(), qkv.begin() + qd);
      k[i].assign(qkv.begin() + qd, qkv.begin() + qd + kd);
      v[i].assign(qkv.begin() + qd + kd, qkv.end());
      const Vec& freq = UsesLong(i, prompt_len) ? long_freq : short_freq;
      for (int hd = 0; hd < c_.heads; ++hd)
        Rope(&q[i][hd * d], freq, i, false, c_.attention_factor);
      for (int hd = 0; hd < c_.kv_heads; ++hd) {
        Rope(&k[i][hd * d], freq, i, false, c_.attention_factor);
      }
    }
    const std::vector<Vec> attn = CausalAttention(
        q, k, v, {c_.heads, c_.kv_heads, d, 1.0 / std::sqrt(static_cast<double>(d))});
    const int inter = c_.intermediate;
    for (int i = 0; i < n; ++i) {
      const Vec o = MatVec(T(p + "self_attn.o_proj.weight"), c_.hidden, qd, attn[i]);
      for (int e = 0; e < c_.hidden; ++e) (*x)[i][e] += o[e];
      const Vec h = RmsNorm((*x)[i], T(p + "post_attention_layernorm.weight"), c_.eps);
      const Vec gu = MatVec(T(p + "mlp.gate_up_proj.weight"), 2 * inter, c_.hidden, h);
      Vec a(inter);
      for (int r = 0; r < inter; ++r) a[r] = gu[inter + r] * Silu(gu[r]);
      const Vec y = MatVec(T(p + "mlp.down_proj.weight"), c_.hidden, inter, a);
      for (int e = 0; e < c_.hidden; ++e) (*x)[i][e] += y[e];
    }
  }

  Phi3RefConfig c_;
};

}  // namespace llm::testing::reference
