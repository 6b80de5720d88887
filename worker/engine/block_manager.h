// KV block allocation with reference counts. Pure logic: no I/O, no threads, no clocks.
// The coordinator owns it; workers only own the memory the block ids index.
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size);

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  int BlocksFor(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Extra blocks `table` needs to hold `tokens` tokens.
  int MissingBlocks(const std::vector<int32_t>& table, int tokens) const;
  // Appends blocks to `table` until it covers `tokens` tokens. Returns false and changes
  // nothing when there are not enough free blocks.
  bool Grow(std::vector<int32_t>& table, int tokens);
  // Drops one reference to every block of `table` and clears it; blocks whose count reaches
  // zero are free again.
  void Release(std::vector<int32_t>& table);

 private:
  int block_size_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<int32_t> ref_counts_;
};

}  // namespace llm
