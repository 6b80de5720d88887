#include "worker/model/kv_cache.h"

#include <string>

namespace llm {

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheShape& shape,
                                                   kernels::Backend& backend) {
  std::unique_ptr<KvCache> cache(new KvCache(shape));
  const kernels::BackendCaps& caps = backend.caps();
  if (!caps.SupportsKvCacheDtype(shape.dtype)) {
    std::string has;
    for (DType t : caps.kv_cache_dtypes) has += std::string(has.empty() ? "" : ", ") + DTypeName(t);
    return InvalidArgument("engine.kv_cache_dtype: the " + caps.name +
                           " backend keeps no KV cache in " + DTypeName(shape.dtype) + " (only " +
                           has + ")");
  }
  const size_t bytes = shape.element_bytes() * shape.elements_per_block() * shape.num_blocks;
  for (auto* pools : {&cache->k_, &cache->v_}) {
    pools->reserve(shape.num_layers);
    for (int l = 0; l < shape.num_layers; ++l) {
      LLM_ASSIGN_OR_RETURN(kernels::Buffer b, backend.Allocate(bytes));
      // Never-written slots are never read, but zeros keep a stray read finite.
      backend.Zero(b.data(), bytes);
      pools->push_back(std::move(b));
    }
  }
  return cache;
}

}  // namespace llm
