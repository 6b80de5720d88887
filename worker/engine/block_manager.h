// KV block allocation with reference counts, and the prefix cache. Pure logic: no I/O, no
// threads, no clocks. The coordinator owns it; workers only own the memory the block ids index.
//
// Prefix caching (vLLM's automatic prefix caching): a block whose tokens are all computed is
// registered under its content, (parent block, its block_size tokens). A new sequence whose
// prompt starts with the same tokens takes those blocks (one more reference each) instead of
// computing them again. A block no sequence references is free but keeps its content until it
// is handed out again, least recently freed first, so a prefix used a moment ago survives.
// Blocks are matched by content compared in full (not by hash alone): a hash collision can
// never hand out a wrong KV block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace llm {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool prefix_caching = false);

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  // Blocks no sequence references (cached ones included: they are handed out when needed).
  int num_free() const { return num_free_; }
  // Free blocks that still hold a registered prefix.
  int num_cached_free() const;
  bool prefix_caching() const { return prefix_caching_; }
  // Sequences holding `block` (tests check these balance).
  int ref_count(int32_t block) const { return ref_counts_[static_cast<size_t>(block)]; }
  int BlocksFor(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Extra blocks `table` needs to hold `tokens` tokens.
  int MissingBlocks(const std::vector<int32_t>& table, int tokens) const;
  // Appends blocks to `table` until it covers `tokens` tokens. Returns false and changes
  // nothing when there are not enough free blocks.
  bool Grow(std::vector<int32_t>& table, int tokens);
  // Drops one reference to every block of `table` and clears it; blocks whose count reaches
  // zero are free again (at the end of the eviction order).
  void Release(std::vector<int32_t>& table);

  // For an empty `table`: appends the registered blocks holding the longest prefix of
  // `tokens` in whole blocks, at most `max_tokens` tokens, and returns how many tokens they
  // hold (0 without prefix caching). Prefixes registered in another `space` (0 ..
  // kMaxPrefixSpaces - 1) never match: each space's chains start from a root of their own.
  int MatchPrefix(const std::vector<int32_t>& tokens, int max_tokens, std::vector<int32_t>& table,
                  int space = 0);
  // Registers table[index], whose block_size tokens are `tokens` and all computed, so that
  // later sequences of the same `space` can share it. A block already registered, or content
  // already held by another block, is left as it is.
  void Register(const std::vector<int32_t>& table, int index, const int32_t* tokens, int space = 0);
  static constexpr int kMaxPrefixSpaces = 2;

 private:
  static constexpr int32_t kNone = -1;
  struct Key {
    int32_t parent;  // the block before it in the sequence; for the first, Root(space) < 0
    uint64_t hash;   // of the tokens
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return k.hash ^ (static_cast<uint64_t>(k.parent) << 1);
    }
  };

  // The parent of a space's first blocks: negative, so never a block id.
  static int32_t Root(int space) { return -2 - space; }
  uint64_t HashTokens(const int32_t* tokens) const;
  int32_t Lookup(int32_t parent, const int32_t* tokens) const;
  // Drops the registration of `block` and of its registered descendants (it is handed out for
  // new content).
  void Forget(int32_t block);
  // The free list: a doubly linked list over block ids, oldest free first.
  void PushFree(int32_t block);
  void Unlink(int32_t block);

  int block_size_;
  bool prefix_caching_;
  std::vector<int32_t> ref_counts_;
  int num_free_ = 0;
  int32_t head_ = kNone, tail_ = kNone;
  std::vector<int32_t> prev_, next_;
  // Registered content per block: its parent, its tokens, and the registered blocks whose
  // parent it is (forgotten with it: their prefix is gone).
  std::vector<int32_t> parent_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<bool> registered_;
  std::vector<std::vector<int32_t>> children_;
  std::unordered_map<Key, int32_t, KeyHash> index_;
};

}  // namespace llm
