// The decoder-only transformer of the Llama family (Llama 2/3, Mistral, Qwen2, Qwen3) over a
// flat batch with a paged KV cache, on one tensor-parallel rank: the weights hold this rank's
// shard (see ModelWeights) and the communicator joins the ranks (all-reduce after the
// row-parallel o/down projections and the vocab-parallel embedding, gather of the
// vocab-parallel logits to rank 0). Every rank runs Forward on the same batch in the same order.
// Thread affinity: one caller at a time; kernels fan out on OpenMP threads. Workspace buffers
// only grow, so steady-state steps allocate nothing.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "worker/communicator.h"
#include "worker/forward_batch.h"
#include "worker/kv_cache.h"
#include "worker/model_weights.h"

namespace llm {

class TransformerModel {
 public:
  // `comm` (not owned) must outlive the model and match weights.tp; nullptr means one rank.
  explicit TransformerModel(const ModelWeights& weights, Communicator* comm = nullptr);

  const ModelConfig& config() const { return w_.config; }
  // Shape of a KV cache this model can use: this rank's KV heads only.
  KvCacheShape CacheShape(int num_blocks, int block_size) const;

  // Runs the batch, writes its K/V into `cache` and returns logits for batch.logit_rows as
  // [logit_rows.size(), vocab] (valid until the next call; with several ranks, significant on
  // rank 0 only). The batch must be well formed (the engine builds it); token ids are checked
  // against the vocabulary before any collective, so every rank fails alike.
  StatusOr<const float*> Forward(const ForwardBatch& batch, KvCache& cache);

 private:
  void Embed(const ForwardBatch& batch);
  void Attention(int layer, const ForwardBatch& batch, KvCache& cache);
  void Mlp(int layer, int tokens);
  // out_ holds this rank's partial [tokens, hidden]: sum it over ranks and add `bias` once.
  void ReduceRowParallel(int tokens, const std::vector<float>& bias);
  void LmHead(int rows);
  void Reserve(int tokens, int logit_rows);

  const ModelWeights& w_;
  std::unique_ptr<Communicator> local_comm_;  // when none is given
  Communicator* comm_;
  bool sharded_;
  int heads_, kv_heads_, inter_;  // this rank's share
  std::vector<float> inv_freq_;
  const std::vector<float> no_bias_;  // row-parallel biases are added after the reduce
  // Workspace, [tokens, ...] each.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, act_, out_, last_, logits_;
  std::vector<float> local_logits_, gathered_;
  std::vector<int32_t> local_ids_;
};

}  // namespace llm
