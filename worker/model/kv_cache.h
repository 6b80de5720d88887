// The paged KV cache of one rank: for every layer a K and a V pool of
// [num_blocks, block_size, kv_heads, head_dim] elements of `dtype` (float, or half:
// engine.kv_cache_dtype) in the backend's memory. Block ids are handed out by the block manager;
// this class only owns the memory.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"

namespace llm {

struct KvCacheShape {
  int num_layers = 0;
  int num_blocks = 0;
  int block_size = 16;
  int kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kF32;  // kF32 or kF16

  size_t elements_per_block() const {
    return static_cast<size_t>(block_size) * kv_heads * head_dim;
  }
  size_t element_bytes() const { return DTypeSize(dtype); }
  // Bytes of one block's K and V over all layers.
  size_t block_bytes() const { return 2 * element_bytes() * elements_per_block() * num_layers; }
  // Bytes for K and V of all layers.
  size_t total_bytes() const { return block_bytes() * num_blocks; }
};

class KvCache {
 public:
  // Allocates (zeroed) pools on `backend`; ResourceExhausted when the memory is not there.
  static StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheShape& shape,
                                                   kernels::Backend& backend);

  const KvCacheShape& shape() const { return shape_; }
  // Layer `layer`'s pools (shape().dtype elements).
  void* k(int layer) { return k_[layer].data(); }
  void* v(int layer) { return v_[layer].data(); }

 private:
  explicit KvCache(const KvCacheShape& shape) : shape_(shape) {}
  KvCacheShape shape_;
  std::vector<kernels::Buffer> k_, v_;
};

}  // namespace llm
