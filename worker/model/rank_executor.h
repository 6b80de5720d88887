// The model on one rank: the forward pass on a kernel backend plus this rank's shard of the
// paged KV cache. Rank 0's Engine and every follower (worker/engine/follower.h) each own one and
// run the same batches in the same order; neither holds a model or a cache of its own.
// Thread affinity: one caller at a time.
#pragma once

#include <memory>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/model/communicator.h"
#include "worker/model/forward_batch.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_weights.h"
#include "worker/model/transformer_model.h"

namespace llm {

class RankExecutor {
 public:
  // `weights` (placed on `backend` when its memory is not host memory), `backend`, `comm`
  // (this stage's tensor-parallel ranks; nullptr: one rank) and `pipeline` (every rank of the
  // engine, with pipeline stages; see TransformerModel::Create) must outlive the executor.
  // Errors name the config key when the model exceeds what the backend can do.
  static StatusOr<std::unique_ptr<RankExecutor>> Create(
      const ModelWeights& weights, kernels::Backend& backend = kernels::CpuBackend(),
      Communicator* comm = nullptr, Communicator* pipeline = nullptr);

  const ModelConfig& config() const { return model_->config(); }
  const kernels::BackendCaps& caps() const { return model_->backend().caps(); }
  // Bytes one KV block of `block_size` tokens takes on this rank (its KV heads and its
  // pipeline stage's layers only), in a cache of `kv_dtype` elements.
  size_t BlockBytes(int block_size, DType kv_dtype = DType::kF32) const;
  // InvalidArgument naming engine.block_size when the backend cannot use it.
  Status CheckBlockSize(int block_size) const;
  // (Re)allocates the KV cache (`kv_dtype` elements: engine.kv_cache_dtype): the old one is
  // freed first. ResourceExhausted when the memory is not there; InvalidArgument naming
  // engine.kv_cache_dtype when the backend has no cache of that type.
  Status AllocateCache(int num_blocks, int block_size, DType kv_dtype = DType::kF32);
  bool has_cache() const { return cache_ != nullptr; }
  const KvCacheShape& cache_shape() const { return cache_->shape(); }

  // The batch of the next Execute: the caller fills it (BuildForwardBatch).
  ForwardBatch& batch() { return batch_; }
  // Runs batch() on the model and the cache; returns its logits (see TransformerModel::Forward).
  StatusOr<const float*> Execute();
  // Pipeline stages: Execute returns logits on the last stage's tensor-parallel rank 0 only
  // (nullptr elsewhere); that rank samples and sends the tokens to rank 0.
  bool pipelined() const { return model_->pipelined(); }
  // Decode graphs (TransformerModel::EnableGraphs); every rank must ask the same.
  bool EnableGraphs(int max_batch, int max_blocks_per_seq) {
    return model_->EnableGraphs(max_batch, max_blocks_per_seq);
  }
  const TransformerModel& model() const { return *model_; }

 private:
  explicit RankExecutor(std::unique_ptr<TransformerModel> model) : model_(std::move(model)) {}
  std::unique_ptr<TransformerModel> model_;
  std::unique_ptr<KvCache> cache_;
  ForwardBatch batch_;
};

}  // namespace llm
