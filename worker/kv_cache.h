// The paged KV cache of one rank: for every layer a K and a V pool of
// [num_blocks, block_size, kv_heads, head_dim] floats. Block ids are handed out by the block
// manager; this class only owns the memory.
#pragma once

#include <cstddef>
#include <vector>

namespace llm {

struct KvCacheShape {
  int num_layers = 0;
  int num_blocks = 0;
  int block_size = 16;
  int kv_heads = 0;
  int head_dim = 0;

  size_t floats_per_block() const { return static_cast<size_t>(block_size) * kv_heads * head_dim; }
  // Bytes for K and V of all layers.
  size_t total_bytes() const {
    return 2 * sizeof(float) * floats_per_block() * num_blocks * num_layers;
  }
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  float* k(int layer) { return k_[layer].data(); }
  float* v(int layer) { return v_[layer].data(); }

 private:
  KvCacheShape shape_;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace llm
