#include "worker/transformer_model.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu_ops.h"
#include "kernels/elementwise.h"

namespace llm {

namespace {

// y[m, w.rows] = x · w^T (+ bias). A shard may be empty: no rows writes nothing, no columns
// (an empty row-parallel slice) writes zeros.
void Linear(const std::vector<float>& x, int m, const WeightMatrix& w,
            const std::vector<float>& bias, std::vector<float>& y) {
  if (w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y.begin(), y.begin() + static_cast<long>(m) * w.rows, 0.0f);
    return;
  }
  kernels::Matmul(x.data(), m, w.cols, w.data, w.dtype, w.rows,
                  bias.empty() ? nullptr : bias.data(), y.data());
}

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

TransformerModel::TransformerModel(const ModelWeights& weights, Communicator* comm)
    : w_(weights),
      local_comm_(comm ? nullptr : std::make_unique<LocalCommunicator>()),
      comm_(comm ? comm : local_comm_.get()),
      sharded_(weights.tp.size > 1),
      heads_(weights.shard.heads.size()),
      kv_heads_(weights.shard.kv_heads.size()),
      inter_(weights.shard.intermediate.size()),
      inv_freq_(RopeInvFreq(weights.config)) {}

KvCacheShape TransformerModel::CacheShape(int num_blocks, int block_size) const {
  return KvCacheShape{w_.config.num_layers, num_blocks, block_size, kv_heads_, w_.config.head_dim};
}

void TransformerModel::Reserve(int tokens, int logit_rows) {
  const ModelConfig& c = w_.config;
  const size_t t = static_cast<size_t>(tokens), rows = static_cast<size_t>(logit_rows);
  const size_t q_dim = static_cast<size_t>(heads_) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(kv_heads_) * c.head_dim;
  for (auto* b : {&x_, &h_, &out_}) Grow(*b, t * c.hidden_size);
  Grow(q_, t * q_dim);
  Grow(attn_, t * q_dim);
  Grow(k_, t * kv_dim);
  Grow(v_, t * kv_dim);
  for (auto* b : {&gate_, &up_, &act_}) Grow(*b, t * inter_);
  Grow(last_, rows * c.hidden_size);
  Grow(logits_, rows * c.vocab_size);
  if (sharded_) {
    const size_t chunk = static_cast<size_t>(w_.shard.vocab_chunk);
    Grow(local_logits_, rows * chunk);
    if (comm_->rank() == 0) Grow(gathered_, rows * chunk * w_.tp.size);
  }
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
  Embed(batch);
  const long residual = static_cast<long>(t) * c.hidden_size;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    kernels::RmsNorm(x_.data(), lw.input_norm.data(), t, c.hidden_size,
                     static_cast<float>(c.rms_norm_eps), 0.0f, h_.data());
    Attention(l, batch, cache);
    Linear(attn_, t, lw.o, sharded_ ? no_bias_ : lw.o_bias, out_);
    if (sharded_) ReduceRowParallel(t, lw.o_bias);
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
  LmHead(rows);
  return static_cast<const float*>(logits_.data());
}

// Vocab-parallel embedding: each rank looks up the ids in its row range (others give zero
// rows) and the sum over ranks is the full embedding, exactly (one non-zero term per row).
void TransformerModel::Embed(const ForwardBatch& batch) {
  const ModelConfig& c = w_.config;
  const int t = batch.num_tokens();
  if (!sharded_) {
    kernels::Embedding(batch.token_ids.data(), t, w_.embed.data, w_.embed.dtype, c.vocab_size,
                       c.hidden_size, 1.0f, x_.data());
    return;
  }
  const ShardRange vocab = w_.shard.vocab;
  local_ids_.resize(t);
  for (int i = 0; i < t; ++i) local_ids_[i] = batch.token_ids[i] - vocab.begin;
  kernels::Embedding(local_ids_.data(), t, w_.embed.data, w_.embed.dtype, vocab.size(),
                     c.hidden_size, 1.0f, x_.data());
  comm_->AllReduceSum(x_.data(), static_cast<size_t>(t) * c.hidden_size);
}

void TransformerModel::ReduceRowParallel(int tokens, const std::vector<float>& bias) {
  const int hidden = w_.config.hidden_size;
  comm_->AllReduceSum(out_.data(), static_cast<size_t>(tokens) * hidden);
  if (bias.empty()) return;
  for (int r = 0; r < tokens; ++r) {
    kernels::AddInPlace(out_.data() + static_cast<size_t>(r) * hidden, bias.data(), hidden);
  }
}

// Vocab-parallel lm_head: each rank computes the logits of its vocabulary rows, padded to
// vocab_chunk columns, and rank 0 gathers and reassembles them into [rows, vocab].
void TransformerModel::LmHead(int rows) {
  const ModelConfig& c = w_.config;
  if (!sharded_) {
    kernels::Matmul(last_.data(), rows, c.hidden_size, w_.lm_head.data, w_.lm_head.dtype,
                    c.vocab_size, nullptr, logits_.data());
    return;
  }
  if (rows == 0) return;  // every rank sees the same batch, so all skip the gather together
  const int mine = w_.shard.vocab.size(), chunk = w_.shard.vocab_chunk;
  if (mine > 0) {
    kernels::Matmul(last_.data(), rows, c.hidden_size, w_.lm_head.data, w_.lm_head.dtype, mine,
                    nullptr, logits_.data());
  }
  for (int r = 0; r < rows; ++r) {  // [rows, mine] -> [rows, chunk], zero padded
    const float* src = logits_.data() + static_cast<size_t>(r) * mine;
    float* dst = local_logits_.data() + static_cast<size_t>(r) * chunk;
    std::copy(src, src + mine, dst);
    std::fill(dst + mine, dst + chunk, 0.0f);
  }
  const size_t count = static_cast<size_t>(rows) * chunk;
  comm_->Gather(local_logits_.data(), count, gathered_.data(), 0);
  if (comm_->rank() != 0) return;
  for (int p = 0; p < w_.tp.size; ++p) {
    const ShardRange part = SplitRange(c.vocab_size, w_.tp.size, p);
    for (int r = 0; r < rows; ++r) {
      const float* src = gathered_.data() + p * count + static_cast<size_t>(r) * chunk;
      std::copy(src, src + part.size(),
                logits_.data() + static_cast<size_t>(r) * c.vocab_size + part.begin);
    }
  }
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
    kernels::RmsNorm(q_.data(), lw.q_norm.data(), t * heads_, c.head_dim, eps, 0, q_.data());
    kernels::RmsNorm(k_.data(), lw.k_norm.data(), t * kv_heads_, c.head_dim, eps, 0, k_.data());
  }
  kernels::Rope(q_.data(), batch.positions.data(), t, heads_, c.head_dim, c.head_dim,
                inv_freq_.data(), false);
  kernels::Rope(k_.data(), batch.positions.data(), t, kv_heads_, c.head_dim, c.head_dim,
                inv_freq_.data(), false);
  const KvCacheShape& cs = cache.shape();
  kernels::ReshapeAndCache(k_.data(), v_.data(), t, kv_heads_, c.head_dim,
                           batch.slot_mapping.data(), cs.block_size, cache.k(layer),
                           cache.v(layer));
  kernels::AttentionBatch ab;
  ab.num_seqs = batch.num_seqs();
  ab.query_start = batch.query_start.data();
  ab.context_len = batch.context_len.data();
  ab.block_tables = batch.block_tables.data();
  ab.max_blocks_per_seq = batch.max_blocks_per_seq;
  kernels::AttentionParams ap;
  ap.q_heads = heads_;
  ap.kv_heads = kv_heads_;
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
  kernels::SiluMul(gate_.data(), up_.data(), static_cast<long>(tokens) * inter_, act_.data());
  Linear(act_, tokens, lw.down, sharded_ ? no_bias_ : lw.down_bias, out_);
  if (sharded_) ReduceRowParallel(tokens, lw.down_bias);
}

}  // namespace llm
