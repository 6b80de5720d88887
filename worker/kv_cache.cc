#include "worker/kv_cache.h"

namespace llm {

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  const size_t n = shape.floats_per_block() * shape.num_blocks;
  k_.resize(shape.num_layers);
  v_.resize(shape.num_layers);
  for (int l = 0; l < shape.num_layers; ++l) {
    k_[l].assign(n, 0.0f);
    v_[l].assign(n, 0.0f);
  }
}

}  // namespace llm
