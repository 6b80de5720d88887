#include "worker/model/rank_executor.h"

#include <string>

namespace llm {

StatusOr<std::unique_ptr<RankExecutor>> RankExecutor::Create(const ModelWeights& weights,
                                                             kernels::Backend& backend,
                                                             Communicator* comm,
                                                             Communicator* pipeline) {
  LLM_ASSIGN_OR_RETURN(auto model, TransformerModel::Create(weights, backend, comm, pipeline));
  return std::unique_ptr<RankExecutor>(new RankExecutor(std::move(model)));
}

size_t RankExecutor::BlockBytes(int block_size, DType kv_dtype) const {
  return model_->CacheShape(1, block_size, kv_dtype).block_bytes();
}

Status RankExecutor::CheckBlockSize(int block_size) const {
  const int max = caps().max_block_size;
  if (block_size < 1 || block_size > max) {
    return InvalidArgument("engine.block_size must be in [1, " + std::to_string(max) + "] (the " +
                           caps().name + " backend's limit), got " + std::to_string(block_size));
  }
  return Status::Ok();
}

Status RankExecutor::AllocateCache(int num_blocks, int block_size, DType kv_dtype) {
  LLM_RETURN_IF_ERROR(CheckBlockSize(block_size));
  if (num_blocks <= 0) return InvalidArgument("a KV cache needs at least one block");
  cache_.reset();  // a restarted engine: free the old cache first
  LLM_ASSIGN_OR_RETURN(cache_, KvCache::Create(model_->CacheShape(num_blocks, block_size, kv_dtype),
                                               model_->backend()));
  return Status::Ok();
}

StatusOr<const float*> RankExecutor::Execute() {
  if (!cache_) return FailedPrecondition("no KV cache: AllocateCache first");
  return model_->Forward(batch_, *cache_);
}

}  // namespace llm
