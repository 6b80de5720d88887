// Runs a Grammar (common/grammar.h) over bytes, one byte at a time, as a pushdown automaton with
// every possible parse kept at once (a set of stacks, as llama.cpp's grammar sampler).
//
// Why it is fast enough for a per-step token mask over a whole vocabulary (grammar_vocab.h):
//  - stacks are persistent linked nodes (position in the grammar, parent), interned, so a stack
//    is one integer and pushing/popping never copies;
//  - a set of stacks is interned too: a State is one integer, and Advance(state, byte) is
//    memoized, so walking the vocabulary's trie costs one hash lookup per trie edge once the
//    states around the current position have been seen (inside a JSON string every byte leads
//    back to the same state);
//  - a rule reference that ends its alternative is a tail call (no return address is pushed),
//    so right-recursive repetition keeps stacks flat.
// Memory is bounded: when the tables pass their budget, Trim() keeps only the committed state
// and bumps generation() (callers that cache per State drop their caches).
// Not thread-safe: one matcher per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/grammar.h"

namespace llm {

class GrammarMatcher {
 public:
  using State = uint32_t;
  static constexpr State kDead = 0;  // no parse accepts what was fed

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // The committed state: where the text accepted so far (Consume) left the grammar.
  State state() const { return state_; }
  // The state after one more byte (kDead when no stack takes it). Memoized.
  State Advance(State s, uint8_t byte);
  // The text up to `s` is a complete sentence of the grammar.
  bool Accepting(State s) const;
  // Accepting, and nothing more may follow.
  bool Finished(State s) const;
  // Feeds bytes to the committed state; false (and the state unchanged) when they are rejected.
  bool Consume(std::string_view bytes);
  // Drops memoized states when the tables outgrew their budget (call between steps); `force`:
  // whatever their size (tests).
  void Trim(bool force = false);
  // Changes whenever Trim dropped states: State values from before mean nothing after.
  uint64_t generation() const { return generation_; }
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t pos;     // element index in the grammar; kAcceptPos for the accepted-stack node
    uint32_t parent;  // node to return to at kEnd; 0: the bottom (accept)
  };
  static constexpr uint32_t kAcceptPos = UINT32_MAX;

  void Reset();
  uint32_t Intern(uint32_t pos, uint32_t parent);
  // Adds to `out` the nodes with a byte set on top reachable from `node` (and node 0 when the
  // bottom is reachable).
  // Within one NewEpoch(), each node is expanded once (the callers collect into one set).
  void Expand(uint32_t node, std::vector<uint32_t>* out);
  void NewEpoch();
  State InternSet(std::vector<uint32_t>* nodes);
  std::span<const uint32_t> Set(State s) const {
    return {set_items_.data() + set_begin_[s], set_begin_[s + 1] - set_begin_[s]};
  }

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<uint32_t> set_items_;
  std::vector<uint32_t> set_begin_;  // state s: set_items_[set_begin_[s], set_begin_[s + 1])
  std::unordered_map<std::string, State> set_ids_;
  std::unordered_map<uint64_t, State> transitions_;  // (state << 8 | byte) -> state
  std::vector<uint32_t> visited_;                    // per node: the Expand epoch that saw it
  uint32_t epoch_ = 0;
  std::vector<uint32_t> work_, scratch_;
  State state_ = kDead;
  uint64_t generation_ = 0;
};

}  // namespace llm
