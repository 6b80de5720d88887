// An independent double-precision reference forward pass for Qwen3-MoE (and, for
// cross-checking it, the Qwen3 and Qwen2-MoE families it is made of), written directly from
// transformers' modeling_qwen3_moe.py / modeling_qwen3.py / modeling_qwen2_moe.py in eager mode:
// plain loops over std::vector<double>, no engine code, no KV cache (every call recomputes the
// whole sequence).
//
// Per layer: x += o_proj(attention(rope(q_norm(q_proj(h))), rope(k_norm(k_proj(h))),
// v_proj(h))) with h = input_layernorm(x); then x += mlp(post_attention_layernorm(x)), where
// the MLP of a sparse layer is: router logits = gate(h), p = softmax over all experts, keep the
// top num_experts_per_tok (ties: the lower index, as torch.topk on CPU), renormalize them to sum
// 1 when norm_topk_prob, and sum p_e * down_e(silu(gate_e(h)) * up_e(h)); Qwen2-MoE adds
// sigmoid(shared_expert_gate(h)) * shared_expert(h). A layer is sparse unless it is in
// mlp_only_layers or (layer + 1) % decoder_sparse_step != 0; a dense layer is the SwiGLU
// mlp.{gate,up,down}_proj of intermediate_size. RoPE is rotate-half (NEOX) with
// inv_freq_i = theta^(-2i / head_dim); attention is causal with scale head_dim^-0.5 and
// grouped KV heads (query head j reads KV head j / (heads / kv_heads)).
//
// How it is known to be right: qwen3moe_golden_test.cc runs this same code on the shared
// qwen3 and qwen2moe random-weight models of ../shared/golden/families (whose references come
// from an independent NumPy float64 implementation, cross-checked against llama.cpp) and
// requires their greedy ids exactly and their logits to the 7 digits they are stored with.
// Qwen3-MoE is exactly the union of what those two exercise — Qwen3's attention (q/k norms,
// head_dim from the config, no biases, tied embeddings) and Qwen2-MoE's router, top-k and experts —
// with only norm_topk_prob = true (a division by the top-k sum) and the absent shared expert new.
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

// The hyper-parameters the reference reads from a config.json, with transformers' defaults.
struct RefConfig {
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int intermediate = 0;  // dense MLP width
  int num_experts = 0;   // 0: every layer dense
  int top_k = 0, moe_intermediate = 0, shared_intermediate = 0;
  bool norm_topk_prob = false, qk_norm = false, qkv_bias = false, tied = false;
  double eps = 1e-6, theta = 10000.0;
  std::vector<bool> sparse;  // per layer
};

inline RefConfig RefConfigFromJson(const nlohmann::json& j) {
  RefConfig c;
  const std::string arch = j.at("architectures").at(0).get<std::string>();
  const bool qwen3 = arch == "Qwen3ForCausalLM", qwen3moe = arch == "Qwen3MoeForCausalLM",
             qwen2moe = arch == "Qwen2MoeForCausalLM";
  if (!qwen3 && !qwen3moe && !qwen2moe) throw std::runtime_error("reference: " + arch);
  c.hidden = j.at("hidden_size");
  c.layers = j.at("num_hidden_layers");
  c.heads = j.at("num_attention_heads");
  c.kv_heads = j.value("num_key_value_heads", c.heads);
  c.head_dim = j.contains("head_dim") ? j["head_dim"].get<int>() : c.hidden / c.heads;
  c.vocab = j.at("vocab_size");
  c.intermediate = j.at("intermediate_size");
  c.eps = j.value("rms_norm_eps", 1e-6);
  c.theta = j.value("rope_theta", 10000.0);
  c.tied = j.value("tie_word_embeddings", false);
  c.qk_norm = !qwen2moe;
  c.qkv_bias = qwen2moe;
  c.sparse.assign(c.layers, false);
  if (qwen3) return c;
  c.num_experts = j.at("num_experts");
  c.top_k = j.at("num_experts_per_tok");
  c.moe_intermediate = j.at("moe_intermediate_size");
  c.shared_intermediate = qwen2moe ? j.value("shared_expert_intermediate_size", 0) : 0;
  c.norm_topk_prob = j.value("norm_topk_prob", false);
  const int step = j.value("decoder_sparse_step", 1);
  std::vector<int> dense;
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array()) {
    dense = j["mlp_only_layers"].get<std::vector<int>>();
  }
  for (int l = 0; l < c.layers; ++l) {
    c.sparse[l] = std::find(dense.begin(), dense.end(), l) == dense.end() && (l + 1) % step == 0;
  }
  return c;
}

class Reference : public ReferenceModel {
 public:
  Reference(RefConfig c, const RefTensors* t) : ReferenceModel(t), c_(std::move(c)) {}

  // Logits [ids.size()][vocab] of every position of `ids` (position p = index p).
  std::vector<Vec> Forward(const std::vector<int32_t>& ids) const {
    std::vector<Vec> x = Embed(ids, c_.hidden);
    for (int l = 0; l < c_.layers; ++l) Layer(l, &x);
    return Logits(x, c_.vocab, c_.tied, c_.eps);
  }

  // The smallest gap, over every token and sparse layer of Forward(ids), between the top_k-th
  // and the next router probability: how far routing is from a tie.
  double MinRouterGap(const std::vector<int32_t>& ids) const {
    min_gap_ = 1e300;
    Forward(ids);
    return min_gap_;
  }

  // The sparse MoE block under `p` ("model.layers.N.mlp.") on one normalized hidden vector.
  Vec SparseMoe(const std::string& p, const Vec& h) const {
    const int n = c_.num_experts;
    const Vec logits = MatVec(T(p + "gate.weight"), n, c_.hidden, h);
    const double mx = *std::max_element(logits.begin(), logits.end());
    Vec prob(n);
    double sum = 0;
    for (int e = 0; e < n; ++e) sum += (prob[e] = std::exp(logits[e] - mx));
    for (int e = 0; e < n; ++e) prob[e] /= sum;
    std::vector<int> order(n);
    for (int e = 0; e < n; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
    if (c_.top_k < n) {
      min_gap_ = std::min(min_gap_, prob[order[c_.top_k - 1]] - prob[order[c_.top_k]]);
    }
    double top = 0;
    for (int i = 0; i < c_.top_k; ++i) top += prob[order[i]];
    Vec y(c_.hidden, 0.0);
    for (int i = 0; i < c_.top_k; ++i) {
      const int e = order[i];
      const double w = c_.norm_topk_prob ? prob[e] / top : prob[e];
      const Vec ye = SwiGlu(p + "experts." + std::to_string(e) + ".", c_.moe_intermediate, h);
      for (int k = 0; k < c_.hidden; ++k) y[k] += w * ye[k];
    }
    if (c_.shared_intermediate > 0) {
      const Vec ys = SwiGlu(p + "shared_expert.", c_.shared_intermediate, h);
      const double g = MatVec(T(p + "shared_expert_gate.weight"), 1, c_.hidden, h)[0];
      const double s = 1.0 / (1.0 + std::exp(-g));
      for (int k = 0; k < c_.hidden; ++k) y[k] += s * ys[k];
    }
    return y;
  }

 private:
  Vec RmsNorm(const Vec& x, const Vec& w) const { return reference::RmsNorm(x, w, c_.eps); }

  // One head's vector of head_dim at `pos`: per-head RMSNorm (q_norm/k_norm), then rotate-half.
  void NormRope(double* v, const Vec* norm, int pos) const {
    const int d = c_.head_dim;
    if (norm) {
      const Vec normed = RmsNorm(Vec(v, v + d), *norm);
      std::copy(normed.begin(), normed.end(), v);
    }
    Rope(v, DefaultInvFreq(c_.theta, d), pos);
  }

  Vec Project(const std::string& p, int rows, const Vec& h, bool bias) const {
    Vec y = MatVec(T(p + ".weight"), rows, c_.hidden, h);
    if (bias) {
      const Vec& b = T(p + ".bias");
      for (int r = 0; r < rows; ++r) y[r] += b[r];
    }
    return y;
  }

  void Attention(const std::string& p, const std::vector<Vec>& h, std::vector<Vec>* x) const {
    const int n = static_cast<int>(h.size()), d = c_.head_dim;
    const int qd = c_.heads * d, kd = c_.kv_heads * d;
    std::vector<Vec> q(n), k(n), v(n);
    for (int i = 0; i < n; ++i) {
      q[i] = Project(p + "q_proj", qd, h[i], c_.qkv_bias);
      k[i] = Project(p + "k_proj", kd, h[i], c_.qkv_bias);
      v[i] = Project(p + "v_proj", kd, h[i], c_.qkv_bias);
      const Vec* qn = c_.qk_norm ? &T(p + "q_norm.weight") : nullptr;
      const Vec* kn = c_.qk_norm ? &T(p + "k_norm.weight") : nullptr;
      for (int hd = 0; hd < c_.heads; ++hd) NormRope(&q[i][hd * d], qn, i);
      for (int hd = 0; hd < c_.kv_heads; ++hd) NormRope(&k[i][hd * d], kn, i);
    }
    const std::vector<Vec> attn = CausalAttention(
        q, k, v, {c_.heads, c_.kv_heads, d, 1.0 / std::sqrt(static_cast<double>(d))});
    for (int i = 0; i < n; ++i) {
      const Vec o = MatVec(T(p + "o_proj.weight"), c_.hidden, qd, attn[i]);
      for (int e = 0; e < c_.hidden; ++e) (*x)[i][e] += o[e];
    }
  }

  // down(silu(gate(h)) * up(h)) for the SwiGLU MLP under `p` (p + "gate_proj.weight", ...).
  Vec SwiGlu(const std::string& p, int inter, const Vec& h) const {
    const Vec g = MatVec(T(p + "gate_proj.weight"), inter, c_.hidden, h);
    const Vec u = MatVec(T(p + "up_proj.weight"), inter, c_.hidden, h);
    Vec a(inter);
    for (int i = 0; i < inter; ++i) a[i] = Silu(g[i]) * u[i];
    return MatVec(T(p + "down_proj.weight"), c_.hidden, inter, a);
  }

  void Layer(int l, std::vector<Vec>* x) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int n = static_cast<int>(x->size());
    std::vector<Vec> h(n);
    for (int i = 0; i < n; ++i) h[i] = RmsNorm((*x)[i], T(p + "input_layernorm.weight"));
    Attention(p + "self_attn.", h, x);
    for (int i = 0; i < n; ++i) {
      const Vec hn = RmsNorm((*x)[i], T(p + "post_attention_layernorm.weight"));
      const Vec y =
          c_.sparse[l] ? SparseMoe(p + "mlp.", hn) : SwiGlu(p + "mlp.", c_.intermediate, hn);
      for (int k = 0; k < c_.hidden; ++k) (*x)[i][k] += y[k];
    }
  }

  RefConfig c_;
  mutable double min_gap_ = 1e300;
};

}  // namespace llm::testing::reference
