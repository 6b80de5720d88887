#include "worker/transformer_model.h"

#include <cmath>

#include "kernels/cpu_ops.h"
#include "kernels/elementwise.h"

namespace llm {

namespace {

void Linear(const std::vector<float>& x, int m, const WeightMatrix& w,
            const std::vector<float>& bias, std::vector<float>& y) {
  kernels::Matmul(x.data(), m, w.cols, w.data, w.dtype, w.rows,
                  bias.empty() ? nullptr : bias.data(), y.data());
}

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

TransformerModel::TransformerModel(const ModelWeights& weights)
    : w_(weights), inv_freq_(RopeInvFreq(weights.config)) {}

KvCacheShape TransformerModel::CacheShape(int num_blocks, int block_size) const {
  return KvCacheShape{w_.config.num_layers, num_blocks, block_size, w_.config.num_kv_heads,
                      w_.config.head_dim};
}

void TransformerModel::Reserve(int tokens, int logit_rows) {
  const ModelConfig& c = w_.config;
  const size_t t = static_cast<size_t>(tokens);
  for (auto* b : {&x_, &h_, &out_}) Grow(*b, t * c.hidden_size);
  Grow(q_, t * c.q_dim());
  Grow(attn_, t * c.q_dim());
  Grow(k_, t * c.kv_dim());
  Grow(v_, t * c.kv_dim());
  for (auto* b : {&gate_, &up_, &act_}) Grow(*b, t * c.intermediate_size);
  Grow(last_, static_cast<size_t>(logit_rows) * c.hidden_size);
  Grow(logits_, static_cast<size_t>(logit_rows) * c.vocab_size);
}

StatusOr<const float*> TransformerModel::Forward(const ForwardBatch& batch, KvCache& cache) {
  const ModelConfig& c = w_.config;
  const int t = batch.num_tokens();
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  const int rows = static_cast<int>(batch.logit_rows.size());
  Reserve(t, rows);
  kernels::Embedding(batch.token_ids.data(), t, w_.embed.data, w_.embed.dtype, c.vocab_size,
                     c.hidden_size, 1.0f, x_.data());
  const long residual = static_cast<long>(t) * c.hidden_size;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    kernels::RmsNorm(x_.data(), lw.input_norm.data(), t, c.hidden_size,
                     static_cast<float>(c.rms_norm_eps), 0.0f, h_.data());
    Attention(l, batch, cache);
    Linear(attn_, t, lw.o, lw.o_bias, out_);
    kernels::AddInPlace(x_.data(), out_.data(), residual);
    kernels::RmsNorm(x_.data(), lw.post_attention_norm.data(), t, c.hidden_size,
                     static_cast<float>(c.rms_norm_eps), 0.0f, h_.data());
    Mlp(l, t);
    kernels::AddInPlace(x_.data(), out_.data(), residual);
  }
  for (int r = 0; r < rows; ++r) {
    const float* src = x_.data() + static_cast<size_t>(batch.logit_rows[r]) * c.hidden_size;
    std::copy(src, src + c.hidden_size, last_.data() + static_cast<size_t>(r) * c.hidden_size);
  }
  kernels::RmsNorm(last_.data(), w_.final_norm.data(), rows, c.hidden_size,
                   static_cast<float>(c.rms_norm_eps), 0.0f, last_.data());
  kernels::Matmul(last_.data(), rows, c.hidden_size, w_.lm_head.data, w_.lm_head.dtype,
                  c.vocab_size, nullptr, logits_.data());
  return static_cast<const float*>(logits_.data());
}

void TransformerModel::Attention(int layer, const ForwardBatch& batch, KvCache& cache) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[layer];
  const int t = batch.num_tokens();
  Linear(h_, t, lw.q, lw.q_bias, q_);
  Linear(h_, t, lw.k, lw.k_bias, k_);
  Linear(h_, t, lw.v, lw.v_bias, v_);
  const float eps = static_cast<float>(c.rms_norm_eps);
  if (c.qk_norm) {
    kernels::RmsNorm(q_.data(), lw.q_norm.data(), t * c.num_heads, c.head_dim, eps, 0, q_.data());
    kernels::RmsNorm(k_.data(), lw.k_norm.data(), t * c.num_kv_heads, c.head_dim, eps, 0,
                     k_.data());
  }
  kernels::Rope(q_.data(), batch.positions.data(), t, c.num_heads, c.head_dim, c.head_dim,
                inv_freq_.data(), false);
  kernels::Rope(k_.data(), batch.positions.data(), t, c.num_kv_heads, c.head_dim, c.head_dim,
                inv_freq_.data(), false);
  const KvCacheShape& cs = cache.shape();
  kernels::ReshapeAndCache(k_.data(), v_.data(), t, c.num_kv_heads, c.head_dim,
                           batch.slot_mapping.data(), cs.block_size, cache.k(layer),
                           cache.v(layer));
  kernels::AttentionBatch ab;
  ab.num_seqs = batch.num_seqs();
  ab.query_start = batch.query_start.data();
  ab.context_len = batch.context_len.data();
  ab.block_tables = batch.block_tables.data();
  ab.max_blocks_per_seq = batch.max_blocks_per_seq;
  kernels::AttentionParams ap;
  ap.q_heads = c.num_heads;
  ap.kv_heads = c.num_kv_heads;
  ap.head_dim = c.head_dim;
  ap.block_size = cs.block_size;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  ap.sliding_window = c.layer_sliding_window[layer];
  kernels::PagedAttention(q_.data(), cache.k(layer), cache.v(layer), ab, ap, attn_.data());
}

void TransformerModel::Mlp(int layer, int tokens) {
  const LayerWeights& lw = w_.layers[layer];
  Linear(h_, tokens, lw.gate, lw.gate_bias, gate_);
  Linear(h_, tokens, lw.up, lw.up_bias, up_);
  kernels::SiluMul(gate_.data(), up_.data(),
                   static_cast<long>(tokens) * w_.config.intermediate_size, act_.data());
  Linear(act_, tokens, lw.down, lw.down_bias, out_);
}

}  // namespace llm
