#include "worker/model/transformer_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace llm {

namespace {

// Grows `buf` to hold at least `count` elements of T (never shrinks, so steady-state steps
// allocate nothing).
template <typename T>
Status Grow(kernels::Backend& backend, kernels::Buffer& buf, size_t count) {
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(T);
  if (buf.bytes() >= bytes) return Status::Ok();
  buf = kernels::Buffer();  // free the old one first: device memory may be tight
  LLM_ASSIGN_OR_RETURN(buf, backend.Allocate(bytes));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<TransformerModel>> TransformerModel::Create(const ModelWeights& weights,
                                                                     kernels::Backend& backend,
                                                                     Communicator* comm,
                                                                     Communicator* pipeline) {
  const kernels::BackendCaps& caps = backend.caps();
  const ModelConfig& c = weights.config;
  if (c.head_dim > caps.max_head_dim) {
    return InvalidArgument("config.json: head_dim " + std::to_string(c.head_dim) + " exceeds the " +
                           caps.name + " backend's maximum of " +
                           std::to_string(caps.max_head_dim));
  }
  if (!caps.host_memory && weights.placed_on != &backend) {
    return FailedPrecondition("the weights are not in the " + caps.name +
                              " backend's memory (PlaceWeights first)");
  }
  LLM_RETURN_IF_ERROR(CheckWeightFormats(weights, caps));
  // The all-reduces and the logits gather run on the backend's buffers.
  if (!caps.host_memory && comm != nullptr && comm->world_size() > 1 && !comm->device_memory()) {
    return FailedPrecondition(
        "the tensor-parallel communicator works on host memory but the " + caps.name +
        " backend's buffers are device memory (tensor parallelism on a device needs a device "
        "communicator: NCCL)");
  }
  if (comm && (weights.tp.size != comm->world_size() || weights.tp.rank != comm->rank())) {
    return InvalidArgument("weights hold shard " + std::to_string(weights.tp.rank) + " of " +
                           std::to_string(weights.tp.size) + " but this is rank " +
                           std::to_string(comm->rank()) + " of " +
                           std::to_string(comm->world_size()));
  }
  const PipelineStage& pp = weights.pipeline;
  if (pp.num_stages > 1) {
    const int want = pp.num_stages * weights.tp.size;
    const int rank = pp.stage * weights.tp.size + weights.tp.rank;
    if (pipeline == nullptr || pipeline->world_size() != want || pipeline->rank() != rank) {
      return InvalidArgument("weights hold tensor-parallel shard " +
                             std::to_string(weights.tp.rank) + " of pipeline stage " +
                             std::to_string(pp.stage) + " of " + std::to_string(pp.num_stages) +
                             ", which is engine rank " + std::to_string(rank) + " of " +
                             std::to_string(want) + ", but the pipeline communicator is " +
                             (pipeline ? "rank " + std::to_string(pipeline->rank()) + " of " +
                                             std::to_string(pipeline->world_size())
                                       : std::string("missing")));
    }
  } else {
    pipeline = nullptr;
  }
  std::unique_ptr<TransformerModel> m(new TransformerModel(weights, backend, comm, pipeline));
  const std::vector<float> inv_freq = RopeInvFreq(c);
  LLM_RETURN_IF_ERROR(Grow<float>(backend, m->inv_freq_, inv_freq.size()));
  backend.CopyToDevice(m->inv_freq_.data(), inv_freq.data(), sizeof(float) * inv_freq.size());
  if (c.rope_scaling.type == RopeScalingType::kLongRope) {
    const std::vector<float> long_freq = RopeInvFreq(c, /*long_factors=*/true);
    LLM_RETURN_IF_ERROR(Grow<float>(backend, m->inv_freq_long_, long_freq.size()));
    backend.CopyToDevice(m->inv_freq_long_.data(), long_freq.data(),
                         sizeof(float) * long_freq.size());
  }
  const std::vector<float> local = RopeInvFreqLocal(c);  // Gemma 3's sliding layers
  if (!local.empty()) {
    LLM_RETURN_IF_ERROR(Grow<float>(backend, m->inv_freq_local_, local.size()));
    backend.CopyToDevice(m->inv_freq_local_.data(), local.data(), sizeof(float) * local.size());
  }
  return m;
}

TransformerModel::TransformerModel(const ModelWeights& weights, kernels::Backend& backend,
                                   Communicator* comm, Communicator* pipeline)
    : w_(weights),
      backend_(backend),
      host_memory_(backend.caps().host_memory),
      local_comm_(comm ? nullptr : std::make_unique<LocalCommunicator>()),
      comm_(comm ? comm : local_comm_.get()),
      pipeline_(pipeline),
      sharded_(weights.tp.size > 1),
      heads_(weights.shard.heads.size()),
      kv_heads_(weights.shard.kv_heads.size()),
      inter_(std::max({weights.shard.intermediate.size(), weights.shard.moe_intermediate.size(),
                       weights.shard.shared_intermediate.size()})) {}

KvCacheShape TransformerModel::CacheShape(int num_blocks, int block_size, DType kv_dtype) const {
  return KvCacheShape{w_.pipeline.layers.size(), num_blocks, block_size, kv_heads_,
                      w_.config.head_dim,        kv_dtype};
}

Status TransformerModel::Reserve(const ForwardBatch& batch) {
  const ModelConfig& c = w_.config;
  const size_t t = static_cast<size_t>(batch.num_tokens());
  const size_t rows = batch.logit_rows.size();
  const size_t q_dim = static_cast<size_t>(heads_) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(kv_heads_) * c.head_dim;
  const size_t vocab_cols = sharded_ ? static_cast<size_t>(w_.shard.vocab_chunk) : c.vocab_size;
  kernels::Backend& b = backend_;
  for (auto* buf : {&x_, &h_, &out_}) LLM_RETURN_IF_ERROR(Grow<float>(b, *buf, t * c.hidden_size));
  for (auto* buf : {&q_, &attn_}) LLM_RETURN_IF_ERROR(Grow<float>(b, *buf, t * q_dim));
  for (auto* buf : {&k_, &v_}) LLM_RETURN_IF_ERROR(Grow<float>(b, *buf, t * kv_dim));
  for (auto* buf : {&gate_, &up_, &act_}) LLM_RETURN_IF_ERROR(Grow<float>(b, *buf, t * inter_));
  LLM_RETURN_IF_ERROR(Grow<float>(b, last_, rows * c.hidden_size));
  if (c.num_experts > 0) {
    LLM_RETURN_IF_ERROR(Grow<float>(b, router_, t * c.num_experts));
    for (auto* buf : {&xe_, &ye_}) LLM_RETURN_IF_ERROR(Grow<float>(b, *buf, t * c.hidden_size));
    LLM_RETURN_IF_ERROR(Grow<int32_t>(b, route_rows_, t));
    LLM_RETURN_IF_ERROR(Grow<float>(b, route_weights_, t));
  }
  if (!host_memory_) {
    const size_t ids = 3 * t + batch.query_start.size() + batch.context_len.size() +
                       batch.block_tables.size() + rows;
    LLM_RETURN_IF_ERROR(Grow<int32_t>(b, ids_, ids));
  }
  if (!w_.pipeline.last()) return Status::Ok();  // no lm_head here
  LLM_RETURN_IF_ERROR(Grow<float>(b, logits_, rows * vocab_cols));
  if (sharded_ && comm_->rank() == 0) {
    LLM_RETURN_IF_ERROR(Grow<float>(b, gathered_, rows * vocab_cols * w_.tp.size));
  }
  return Status::Ok();
}

void TransformerModel::PlanRope(const ForwardBatch& batch) {
  rope_runs_.clear();
  const RopeScaling& rs = w_.config.rope_scaling;
  if (rs.type != RopeScalingType::kLongRope) {
    rope_runs_.push_back({0, batch.num_tokens(), false});
    return;
  }
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int begin = batch.query_start[s], count = batch.query_start[s + 1] - begin;
    const bool by_prompt = batch.rope_len.size() == batch.context_len.size();
    const bool long_factors =
        RopeUsesLongFactors(rs, by_prompt ? batch.rope_len[s] : batch.context_len[s]);
    if (!rope_runs_.empty() && rope_runs_.back().long_factors == long_factors) {
      rope_runs_.back().count += count;
    } else {
      rope_runs_.push_back({begin, count, long_factors});
    }
  }
}

TransformerModel::DeviceBatch TransformerModel::Upload(const ForwardBatch& batch) {
  const std::vector<int32_t>* arrays[] = {
      &batch.token_ids,   &batch.positions,    &batch.slot_mapping, &batch.query_start,
      &batch.context_len, &batch.block_tables, &batch.logit_rows};
  const int32_t* ptrs[7];
  if (host_memory_) {
    for (int i = 0; i < 7; ++i) ptrs[i] = arrays[i]->data();
  } else {
    // One copy for all seven arrays.
    packed_ids_.clear();
    size_t offsets[7];
    for (int i = 0; i < 7; ++i) {
      offsets[i] = packed_ids_.size();
      packed_ids_.insert(packed_ids_.end(), arrays[i]->begin(), arrays[i]->end());
    }
    backend_.CopyToDevice(ids_.data(), packed_ids_.data(), sizeof(int32_t) * packed_ids_.size());
    for (int i = 0; i < 7; ++i) ptrs[i] = ids_.as<int32_t>() + offsets[i];
  }
  return DeviceBatch{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6]};
}

StatusOr<const float*> TransformerModel::Forward(const ForwardBatch& batch, KvCache& cache) {
  const ModelConfig& c = w_.config;
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  if (GraphBatchFor(batch) > 0) return ForwardWithGraph(batch, cache);
  LLM_RETURN_IF_ERROR(Reserve(batch));
  const DeviceBatch db = Upload(batch);
  PlanRope(batch);
  Enqueue(batch, db, cache);
  return FinishStep(static_cast<int>(batch.logit_rows.size()));
}

void TransformerModel::Enqueue(const ForwardBatch& batch, const DeviceBatch& db, KvCache& cache) {
  const ModelConfig& c = w_.config;
  const int t = batch.num_tokens();
  const int rows = static_cast<int>(batch.logit_rows.size());
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* x = x_.as<float>();
  float* h = h_.as<float>();
  float* out = out_.as<float>();
  const PipelineStage& pp = w_.pipeline;
  const size_t hidden_floats = static_cast<size_t>(t) * c.hidden_size;
  if (pp.first()) {
    Embed(db, t);
  } else {  // the residual stream after the layers of the stage before
    RecvFrom(x, hidden_floats, PeerOf(pp.stage - 1));
  }
  for (int l = pp.layers.begin; l < pp.layers.end; ++l) {
    const LayerWeights& lw = w_.layers[l];
    const float* in_norm = static_cast<const float*>(lw.input_norm.data);
    if (l == pp.layers.begin) {
      backend_.RmsNorm(x, in_norm, t, c.hidden_size, eps, h);
    } else {  // the previous layer's MLP residual, fused with this layer's input norm
      backend_.AddRmsNorm(x, out, in_norm, t, c.hidden_size, eps, h);
    }
    Attention(l, batch, db, cache);
    Linear(attn_.as<float>(), t, lw.o, sharded_ ? Weight{} : lw.o_bias, out);
    if (sharded_) ReduceRowParallel(t, lw.o_bias);
    if (c.sandwich_norms) {  // Gemma 2: norm the attention output, then the MLP input
      backend_.RmsNorm(out, static_cast<const float*>(lw.post_attention_norm.data), t,
                       c.hidden_size, eps, out);
      backend_.AddRmsNorm(x, out, static_cast<const float*>(lw.pre_ffw_norm.data), t, c.hidden_size,
                          eps, h);
    } else {
      backend_.AddRmsNorm(x, out, static_cast<const float*>(lw.post_attention_norm.data), t,
                          c.hidden_size, eps, h);
    }
    Mlp(l, t);
    if (c.sandwich_norms) {
      backend_.RmsNorm(out, static_cast<const float*>(lw.post_ffw_norm.data), t, c.hidden_size, eps,
                       out);
    }
  }
  if (pp.layers.size() > 0) backend_.Add(x, out, static_cast<int64_t>(t) * c.hidden_size);
  if (!pp.last()) {  // the last stage computes the logits
    SendTo(x, hidden_floats, PeerOf(pp.stage + 1));
    return;
  }
  float* last = last_.as<float>();
  backend_.GatherRows(x, db.logit_rows, rows, c.hidden_size, last);
  backend_.RmsNorm(last, static_cast<const float*>(w_.final_norm.data), rows, c.hidden_size, eps,
                   last);
  LmHeadOnDevice(rows);
}

StatusOr<const float*> TransformerModel::FinishStep(int rows) {
  const ModelConfig& c = w_.config;
  if (!w_.pipeline.last()) {
    if (!host_memory_) LLM_RETURN_IF_ERROR(backend_.Synchronize());
    return static_cast<const float*>(nullptr);
  }
  const float* logits = LogitsToHost(rows);
  // A device backend's ops only enqueue: the first error of the step surfaces here.
  if (!host_memory_) LLM_RETURN_IF_ERROR(backend_.Synchronize());
  if (c.final_logit_softcap > 0 && logits != nullptr && (!sharded_ || comm_->rank() == 0)) {
    // Gemma 2: on the host logits (the sampler's input), tanh(l / cap) * cap.
    float* l = const_cast<float*>(logits);  // this model's own buffer
    const float cap = static_cast<float>(c.final_logit_softcap);
    for (size_t i = 0; i < static_cast<size_t>(rows) * c.vocab_size; ++i) {
      l[i] = std::tanh(l[i] / cap) * cap;
    }
  }
  return logits;
}

void TransformerModel::SendTo(const float* data, size_t count, int rank) {
  if (host_memory_) return pipeline_->Send(data, count, rank);
  host_pipe_.resize(std::max(host_pipe_.size(), count));
  backend_.CopyToHost(host_pipe_.data(), data, sizeof(float) * count);
  pipeline_->Send(host_pipe_.data(), count, rank);
}

void TransformerModel::RecvFrom(float* data, size_t count, int rank) {
  if (host_memory_) return pipeline_->Recv(data, count, rank);
  host_pipe_.resize(std::max(host_pipe_.size(), count));
  pipeline_->Recv(host_pipe_.data(), count, rank);
  backend_.CopyToDevice(data, host_pipe_.data(), sizeof(float) * count);
}

void TransformerModel::Linear(const float* x, int m, const Weight& w, const Weight& bias,
                              float* y) {
  // A shard may be empty: no rows writes nothing, no columns (an empty row-parallel slice)
  // writes zeros.
  if (w.rows == 0) return;
  if (w.cols == 0) {
    backend_.Zero(y, sizeof(float) * static_cast<size_t>(m) * w.rows);
    return;
  }
  backend_.Matmul(x, m, w, static_cast<const float*>(bias.data), y);
}

// Linear of each output on the same x, as one backend call where every weight has rows and
// columns (an empty tensor-parallel shard goes through Linear's cases).
void TransformerModel::LinearSameInput(const float* x, int m, std::span<const LinearOut> outs) {
  kernels::Backend::MatmulOut calls[4];
  int count = 0;
  for (const LinearOut& o : outs) {
    if (o.w->rows == 0 || o.w->cols == 0 || count == 4) {
      Linear(x, m, *o.w, *o.bias, o.y);
    } else {
      calls[count++] = {o.w, static_cast<const float*>(o.bias->data), o.y};
    }
  }
  if (count > 0) backend_.MatmulSameInput(x, m, calls, count);
}

// Vocab-parallel embedding: each rank looks up the ids in its row range (others give zero
// rows) and the sum over ranks is the full embedding, exactly (one non-zero term per row).
void TransformerModel::Embed(const DeviceBatch& db, int tokens) {
  const int first = sharded_ ? w_.shard.vocab.begin : 0;
  backend_.Embedding(db.token_ids, tokens, w_.embed, first, x_.as<float>());
  if (w_.config.embedding_scale > 0) {  // Gemma: sqrt(hidden); exact per rank before the sum
    backend_.Scale(x_.as<float>(), w_.config.embedding_scale,
                   static_cast<int64_t>(tokens) * w_.config.hidden_size);
  }
  if (sharded_) {
    comm_->AllReduceSum(x_.as<float>(), static_cast<size_t>(tokens) * w_.config.hidden_size);
  }
}

void TransformerModel::ReduceRowParallel(int tokens, const Weight& bias) {
  const int hidden = w_.config.hidden_size;
  comm_->AllReduceSum(out_.as<float>(), static_cast<size_t>(tokens) * hidden);
  if (!bias.empty()) {
    backend_.AddBias(out_.as<float>(), static_cast<const float*>(bias.data), tokens, hidden);
  }
}

// Vocab-parallel lm_head: each rank computes the logits of its vocabulary rows, vocab_chunk
// columns wide (its lm_head shard is zero-padded to that), and rank 0 gathers them (in device
// memory: this part may be recorded in a graph) and reassembles [rows, vocab] in host memory.
void TransformerModel::LmHeadOnDevice(int rows) {
  if (rows <= 0) return;  // every rank sees the same batch, so all skip the gather together
  backend_.Matmul(last_.as<float>(), rows, w_.lm_head, nullptr, logits_.as<float>());
  if (!sharded_) return;
  const size_t count = static_cast<size_t>(rows) * w_.shard.vocab_chunk;
  comm_->Gather(logits_.as<float>(), count, gathered_.as<float>(), 0);
}

const float* TransformerModel::LogitsToHost(int rows) {
  const ModelConfig& c = w_.config;
  float* logits = logits_.as<float>();
  const size_t cols = sharded_ ? static_cast<size_t>(w_.shard.vocab_chunk) : c.vocab_size;
  const size_t count = static_cast<size_t>(rows) * cols;
  if (!sharded_) {
    if (host_memory_) return logits;
    host_logits_.resize(std::max(host_logits_.size(), count));
    backend_.CopyToHost(host_logits_.data(), logits, sizeof(float) * count);
    return host_logits_.data();
  }
  if (rows == 0 || comm_->rank() != 0) return logits;
  const float* gathered = gathered_.as<float>();
  if (!host_memory_) {
    host_gathered_.resize(std::max(host_gathered_.size(), count * w_.tp.size));
    backend_.CopyToHost(host_gathered_.data(), gathered, sizeof(float) * count * w_.tp.size);
    gathered = host_gathered_.data();
  }
  host_logits_.resize(std::max(host_logits_.size(), static_cast<size_t>(rows) * c.vocab_size));
  for (int p = 0; p < w_.tp.size; ++p) {
    const ShardRange part = SplitRange(c.vocab_size, w_.tp.size, p);
    for (int r = 0; r < rows; ++r) {
      const float* src = gathered + p * count + static_cast<size_t>(r) * cols;
      std::copy(src, src + part.size(),
                host_logits_.data() + static_cast<size_t>(r) * c.vocab_size + part.begin);
    }
  }
  return host_logits_.data();
}

void TransformerModel::Attention(int layer, const ForwardBatch& batch, const DeviceBatch& db,
                                 KvCache& cache) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[layer];
  const int t = batch.num_tokens();
  const float* h = h_.as<float>();
  float* q = q_.as<float>();
  float* k = k_.as<float>();
  float* v = v_.as<float>();
  LinearSameInput(h, t, {{{&lw.q, &lw.q_bias, q}, {&lw.k, &lw.k_bias, k}, {&lw.v, &lw.v_bias, v}}});
  const float eps = static_cast<float>(c.rms_norm_eps);
  if (c.qk_norm) {
    backend_.RmsNorm(q, static_cast<const float*>(lw.q_norm.data), t * heads_, c.head_dim, eps, q);
    backend_.RmsNorm(k, static_cast<const float*>(lw.k_norm.data), t * kv_heads_, c.head_dim, eps,
                     k);
  }
  const bool local = c.layer_uses_local_rope(layer) && inv_freq_local_.bytes() > 0;
  // LongRoPE multiplies cos and sin by attention_factor: the rotated lanes of q and k scale by
  // it, the lanes past a partial rotary dimension (Phi-4-mini) do not. Gemma 3's local layers
  // rotate unscaled.
  const kernels::RopeLayout layout{
      c.head_dim, c.rope_dim(), c.rope_interleaved,
      local ? 1.0f : static_cast<float>(c.rope_scaling.attention_factor)};
  for (const RopeRun& run : rope_runs_) {
    const float* inv_freq = local              ? inv_freq_local_.as<float>()
                            : run.long_factors ? inv_freq_long_.as<float>()
                                               : inv_freq_.as<float>();
    const size_t row = static_cast<size_t>(run.begin) * c.head_dim;
    backend_.Rope(q + row * heads_, db.positions + run.begin, run.count, heads_, layout, inv_freq);
    backend_.Rope(k + row * kv_heads_, db.positions + run.begin, run.count, kv_heads_, layout,
                  inv_freq);
  }
  const KvCacheShape& cs = cache.shape();
  const int cl = layer - w_.pipeline.layers.begin;  // this stage's cache holds its layers only
  backend_.ReshapeAndCache(k, v, t, kv_heads_, c.head_dim, db.slot_mapping, cs.block_size,
                           cache.k(cl), cache.v(cl), cs.dtype);
  kernels::AttentionBatch ab;
  ab.num_seqs = batch.num_seqs();
  ab.query_start = db.query_start;
  ab.context_len = db.context_len;
  ab.block_tables = db.block_tables;
  ab.max_blocks_per_seq = batch.max_blocks_per_seq;
  ab.num_tokens = t;
  kernels::AttentionParams ap;
  ap.q_heads = heads_;
  ap.kv_heads = kv_heads_;
  ap.head_dim = c.head_dim;
  ap.block_size = cs.block_size;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(
                        c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : c.head_dim));
  ap.softcap = static_cast<float>(c.attn_logit_softcap);
  ap.sliding_window = c.layer_sliding_window[layer];
  ap.kv_dtype = cs.dtype;
  backend_.PagedAttention(q, cache.k(cl), cache.v(cl), ab, ap, attn_.as<float>());
}

void TransformerModel::Mlp(int layer, int tokens) {
  if (w_.config.layer_is_moe(layer)) return Moe(layer, tokens);
  const LayerWeights& lw = w_.layers[layer];
  const float* h = h_.as<float>();
  LinearSameInput(
      h, tokens,
      {{{&lw.gate, &lw.gate_bias, gate_.as<float>()}, {&lw.up, &lw.up_bias, up_.as<float>()}}});
  // This rank's intermediate columns (a MoE model's dense layers are wider or narrower than
  // its experts, and inter_ is the widest of them).
  const int64_t count = static_cast<int64_t>(tokens) * lw.gate.rows;
  if (w_.config.hidden_act == Activation::kGeluTanh) {
    backend_.GeluTanhMul(gate_.as<float>(), up_.as<float>(), count, act_.as<float>());
  } else {
    backend_.SiluMul(gate_.as<float>(), up_.as<float>(), count, act_.as<float>());
  }
  Linear(act_.as<float>(), tokens, lw.down, sharded_ ? Weight{} : lw.down_bias, out_.as<float>());
  if (sharded_) ReduceRowParallel(tokens, lw.down_bias);
}

void TransformerModel::SwiGlu(const float* x, int tokens, const Weight& gate, const Weight& up,
                              const Weight& down, float* y) {
  Linear(x, tokens, gate, Weight{}, gate_.as<float>());
  Linear(x, tokens, up, Weight{}, up_.as<float>());
  backend_.SiluMul(gate_.as<float>(), up_.as<float>(), static_cast<int64_t>(tokens) * gate.rows,
                   act_.as<float>());
  Linear(act_.as<float>(), tokens, down, Weight{}, y);
}

const float* TransformerModel::HostView(const float* device, size_t count,
                                        std::vector<float>* copy) {
  if (host_memory_) return device;
  copy->resize(count);
  backend_.CopyToHost(copy->data(), device, sizeof(float) * count);
  return copy->data();
}

void TransformerModel::Moe(int layer, int tokens) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[layer];
  const int n = c.num_experts, k = c.experts_per_token, hidden = c.hidden_size;
  const float* h = h_.as<float>();
  float* out = out_.as<float>();
  backend_.Zero(out, sizeof(float) * static_cast<size_t>(tokens) * hidden);
  // Routing on the host (every rank computes the same: the router is replicated): softmax over
  // all experts, the top k (ties: the lower index), renormalized to sum 1 when norm_topk_prob.
  Linear(h, tokens, lw.router, Weight{}, router_.as<float>());
  const float* logits =
      HostView(router_.as<float>(), static_cast<size_t>(tokens) * n, &host_router_);
  routed_.assign(n, {});
  std::vector<double> p(n);
  std::vector<int> order(n);
  for (int t = 0; t < tokens; ++t) {
    const float* l = logits + static_cast<size_t>(t) * n;
    const double mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int e = 0; e < n; ++e) sum += (p[e] = std::exp(static_cast<double>(l[e]) - mx));
    for (int e = 0; e < n; ++e) p[e] /= sum;
    for (int e = 0; e < n; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    double top = 0;
    for (int i = 0; i < k; ++i) top += p[order[i]];
    for (int i = 0; i < k; ++i) {
      const double wgt = c.norm_topk_prob ? p[order[i]] / top : p[order[i]];
      routed_[order[i]].push_back({t, static_cast<float>(wgt)});
    }
  }
  std::vector<int32_t> rows;
  std::vector<float> weights;
  for (int e = 0; e < n; ++e) {
    const auto& mine = routed_[e];
    if (mine.empty()) continue;  // every rank skips the same experts
    const int m = static_cast<int>(mine.size());
    rows.resize(m);
    weights.resize(m);
    for (int i = 0; i < m; ++i) {
      rows[i] = mine[i].first;
      weights[i] = mine[i].second;
    }
    backend_.CopyToDevice(route_rows_.data(), rows.data(), sizeof(int32_t) * m);
    backend_.CopyToDevice(route_weights_.data(), weights.data(), sizeof(float) * m);
    backend_.GatherRows(h, route_rows_.as<int32_t>(), m, hidden, xe_.as<float>());
    const ExpertWeights& ew = lw.experts[e];
    SwiGlu(xe_.as<float>(), m, ew.gate, ew.up, ew.down, ye_.as<float>());
    backend_.ScatterAddRows(ye_.as<float>(), route_rows_.as<int32_t>(), route_weights_.as<float>(),
                            m, hidden, out);
  }
  if (!lw.shared_expert.down.empty()) {  // Qwen2-MoE: + sigmoid(shared_expert_gate(h)) * MLP(h)
    SwiGlu(h, tokens, lw.shared_expert.gate, lw.shared_expert.up, lw.shared_expert.down,
           ye_.as<float>());
    Linear(h, tokens, lw.shared_expert_gate, Weight{}, router_.as<float>());
    const float* g = HostView(router_.as<float>(), tokens, &host_gate_);
    rows.resize(tokens);
    weights.resize(tokens);
    for (int t = 0; t < tokens; ++t) {
      rows[t] = t;
      weights[t] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(g[t]))));
    }
    backend_.CopyToDevice(route_rows_.data(), rows.data(), sizeof(int32_t) * tokens);
    backend_.CopyToDevice(route_weights_.data(), weights.data(), sizeof(float) * tokens);
    backend_.ScatterAddRows(ye_.as<float>(), route_rows_.as<int32_t>(), route_weights_.as<float>(),
                            tokens, hidden, out);
  }
  if (sharded_) ReduceRowParallel(tokens, Weight{});
}

}  // namespace llm
