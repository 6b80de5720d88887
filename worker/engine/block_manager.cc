#include "worker/engine/block_manager.h"

namespace llm {

BlockManager::BlockManager(int num_blocks, int block_size)
    : block_size_(block_size), ref_counts_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int BlockManager::MissingBlocks(const std::vector<int32_t>& table, int tokens) const {
  const int need = BlocksFor(tokens) - static_cast<int>(table.size());
  return need > 0 ? need : 0;
}

bool BlockManager::Grow(std::vector<int32_t>& table, int tokens) {
  const int need = MissingBlocks(table, tokens);
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    ref_counts_[b] = 1;
    table.push_back(b);
  }
  return true;
}

void BlockManager::Release(std::vector<int32_t>& table) {
  for (int32_t b : table) {
    if (--ref_counts_[b] == 0) free_.push_back(b);
  }
  table.clear();
}

}  // namespace llm
