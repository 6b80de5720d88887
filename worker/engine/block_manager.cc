#include "worker/engine/block_manager.h"

#include <algorithm>

namespace llm {

BlockManager::BlockManager(int num_blocks, int block_size, bool prefix_caching)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      ref_counts_(num_blocks, 0),
      prev_(num_blocks, kNone),
      next_(num_blocks, kNone),
      parent_(num_blocks, kNone),
      tokens_(num_blocks),
      registered_(num_blocks, false),
      children_(num_blocks) {
  for (int32_t b = 0; b < num_blocks; ++b) PushFree(b);
}

void BlockManager::PushFree(int32_t block) {
  prev_[block] = tail_;
  next_[block] = kNone;
  if (tail_ != kNone) {
    next_[tail_] = block;
  } else {
    head_ = block;
  }
  tail_ = block;
  ++num_free_;
}

void BlockManager::Unlink(int32_t block) {
  const int32_t p = prev_[block], n = next_[block];
  if (p != kNone) {
    next_[p] = n;
  } else {
    head_ = n;
  }
  if (n != kNone) {
    prev_[n] = p;
  } else {
    tail_ = p;
  }
  prev_[block] = next_[block] = kNone;
  --num_free_;
}

int BlockManager::num_cached_free() const {
  int n = 0;
  for (int32_t b = head_; b != kNone; b = next_[b]) n += registered_[b] ? 1 : 0;
  return n;
}

int BlockManager::MissingBlocks(const std::vector<int32_t>& table, int tokens) const {
  const int need = BlocksFor(tokens) - static_cast<int>(table.size());
  return need > 0 ? need : 0;
}

bool BlockManager::Grow(std::vector<int32_t>& table, int tokens) {
  const int need = MissingBlocks(table, tokens);
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) {
    const int32_t b = head_;  // the least recently freed: its cached prefix is the oldest
    Unlink(b);
    if (registered_[b]) Forget(b);
    ref_counts_[b] = 1;
    table.push_back(b);
  }
  return true;
}

void BlockManager::Release(std::vector<int32_t>& table) {
  for (int32_t b : table) {
    if (--ref_counts_[b] == 0) PushFree(b);
  }
  table.clear();
}

uint64_t BlockManager::HashTokens(const int32_t* tokens) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the token ids
  for (int i = 0; i < block_size_; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 1099511628211ull;
  }
  return h;
}

int32_t BlockManager::Lookup(int32_t parent, const int32_t* tokens) const {
  auto it = index_.find(Key{parent, HashTokens(tokens)});
  if (it == index_.end()) return kNone;
  const std::vector<int32_t>& held = tokens_[it->second];
  return std::equal(held.begin(), held.end(), tokens) ? it->second : kNone;
}

int BlockManager::MatchPrefix(const std::vector<int32_t>& tokens, int max_tokens,
                              std::vector<int32_t>& table, int space) {
  if (!prefix_caching_ || !table.empty() || space < 0 || space >= kMaxPrefixSpaces) return 0;
  const int whole = std::min(max_tokens, static_cast<int>(tokens.size())) / block_size_;
  int32_t parent = Root(space);
  for (int i = 0; i < whole; ++i) {
    const int32_t b = Lookup(parent, tokens.data() + static_cast<size_t>(i) * block_size_);
    if (b == kNone) break;
    if (ref_counts_[b]++ == 0) Unlink(b);
    table.push_back(b);
    parent = b;
  }
  return static_cast<int>(table.size()) * block_size_;
}

void BlockManager::Register(const std::vector<int32_t>& table, int index, const int32_t* tokens,
                            int space) {
  if (!prefix_caching_ || space < 0 || space >= kMaxPrefixSpaces) return;
  const int32_t b = table[index];
  const int32_t parent = index > 0 ? table[index - 1] : Root(space);
  // A parent that is not registered (its own content was a duplicate) cannot be matched
  // through, so neither can this block.
  if (registered_[b] || (parent >= 0 && !registered_[parent])) return;
  const Key key{parent, HashTokens(tokens)};
  if (index_.count(key)) return;  // the same content (or a hash twin) is held already
  index_.emplace(key, b);
  registered_[b] = true;
  parent_[b] = parent;
  tokens_[b].assign(tokens, tokens + block_size_);
  if (parent >= 0) children_[parent].push_back(b);
}

void BlockManager::Forget(int32_t block) {
  std::vector<int32_t> stack{block};
  while (!stack.empty()) {
    const int32_t b = stack.back();
    stack.pop_back();
    if (!registered_[b]) continue;
    index_.erase(Key{parent_[b], HashTokens(tokens_[b].data())});
    if (parent_[b] >= 0) {
      auto& siblings = children_[parent_[b]];
      siblings.erase(std::remove(siblings.begin(), siblings.end(), b), siblings.end());
    }
    registered_[b] = false;
    parent_[b] = kNone;
    tokens_[b].clear();
    stack.insert(stack.end(), children_[b].begin(), children_[b].end());
    children_[b].clear();
  }
}

}  // namespace llm
