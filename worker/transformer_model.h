// The decoder-only transformer of the Llama family (Llama 2/3, Mistral, Qwen2, Qwen3) over a
// flat batch with a paged KV cache. Thread affinity: one caller at a time; kernels fan out on
// OpenMP threads. Workspace buffers only grow, so steady-state steps allocate nothing.
#pragma once

#include <vector>

#include "common/status.h"
#include "worker/forward_batch.h"
#include "worker/kv_cache.h"
#include "worker/model_weights.h"

namespace llm {

class TransformerModel {
 public:
  explicit TransformerModel(const ModelWeights& weights);

  const ModelConfig& config() const { return w_.config; }
  // Shape of a KV cache this model can use.
  KvCacheShape CacheShape(int num_blocks, int block_size) const;

  // Runs the batch, writes its K/V into `cache` and returns logits for batch.logit_rows as
  // [logit_rows.size(), vocab] (valid until the next call). The batch must be well formed
  // (the engine builds it); token ids are checked against the vocabulary.
  StatusOr<const float*> Forward(const ForwardBatch& batch, KvCache& cache);

 private:
  void Attention(int layer, const ForwardBatch& batch, KvCache& cache);
  void Mlp(int layer, int tokens);
  void Reserve(int tokens, int logit_rows);

  const ModelWeights& w_;
  std::vector<float> inv_freq_;
  // Workspace, [tokens, ...] each.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, act_, out_, last_, logits_;
};

}  // namespace llm
