#include "common/grammar_matcher.h"

#include <algorithm>
#include <cstring>

namespace llm {
namespace {

// Past these, Trim() starts over from the committed state: a sequence's tables stay around
// 20 MB at worst between steps (a few KB for usual schemas).
constexpr size_t kMaxNodes = 1 << 18;
constexpr size_t kMaxTransitions = 1 << 19;
constexpr size_t kMaxSetItems = 1 << 20;

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
  Reset();
  std::vector<uint32_t> top;
  NewEpoch();
  for (uint32_t alt : grammar_->rules[grammar_->root]) Expand(Intern(alt, 0), &top);
  state_ = InternSet(&top);
}

void GrammarMatcher::Reset() {
  nodes_.clear();
  node_ids_.clear();
  set_items_.clear();
  set_ids_.clear();
  transitions_.clear();
  visited_.clear();
  nodes_.push_back({kAcceptPos, 0});  // node 0: the empty stack, the input is complete
  visited_.push_back(0);
  set_begin_.assign(2, 0);  // state 0 (kDead): the empty set
  set_ids_.emplace(std::string(), kDead);
}

uint32_t GrammarMatcher::Intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  const auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({pos, parent});
    visited_.push_back(0);
  }
  return it->second;
}

void GrammarMatcher::NewEpoch() {
  if (++epoch_ == 0) {
    std::fill(visited_.begin(), visited_.end(), 0);
    epoch_ = 1;
  }
}

void GrammarMatcher::Expand(uint32_t node, std::vector<uint32_t>* out) {
  // Iterative (a deep JSON nesting means a long chain of returns) and with a visited mark per
  // epoch, so an empty loop in a grammar cannot run forever. One epoch spans all the Expand
  // calls into the same `out` (a node seen before has already put its expansion there), so
  // stacks that share their continuation (ambiguous repetitions, a regex's nested counts) are
  // expanded once per step, not once per stack.
  const auto& elements = grammar_->elements;
  work_.clear();
  work_.push_back(node);
  while (!work_.empty()) {
    const uint32_t n = work_.back();
    work_.pop_back();
    if (visited_[n] == epoch_) continue;
    visited_[n] = epoch_;
    if (n == 0) {
      out->push_back(0);
      continue;
    }
    const Node nd = nodes_[n];
    const GrammarElement e = elements[nd.pos];
    switch (e.kind) {
      case GrammarElement::kEnd:
        work_.push_back(nd.parent);  // pop (the bottom, node 0, means accepted)
        break;
      case GrammarElement::kBytes:
        out->push_back(n);
        break;
      case GrammarElement::kRule: {
        // A reference that ends its alternative returns straight to our parent (tail call).
        const uint32_t ret = elements[nd.pos + 1].kind == GrammarElement::kEnd
                                 ? nd.parent
                                 : Intern(nd.pos + 1, nd.parent);
        for (uint32_t alt : grammar_->rules[e.arg]) work_.push_back(Intern(alt, ret));
        break;
      }
    }
  }
}

GrammarMatcher::State GrammarMatcher::InternSet(std::vector<uint32_t>* nodes) {
  std::sort(nodes->begin(), nodes->end());
  nodes->erase(std::unique(nodes->begin(), nodes->end()), nodes->end());
  if (nodes->empty()) return kDead;
  std::string key(nodes->size() * sizeof(uint32_t), '\0');
  std::memcpy(key.data(), nodes->data(), key.size());
  const auto [it, inserted] =
      set_ids_.try_emplace(std::move(key), static_cast<State>(set_begin_.size() - 1));
  if (inserted) {
    set_items_.insert(set_items_.end(), nodes->begin(), nodes->end());
    set_begin_.push_back(static_cast<uint32_t>(set_items_.size()));
  }
  return it->second;
}

GrammarMatcher::State GrammarMatcher::Advance(State s, uint8_t byte) {
  if (s == kDead) return kDead;
  const uint64_t key = (static_cast<uint64_t>(s) << 8) | byte;
  if (const auto it = transitions_.find(key); it != transitions_.end()) return it->second;
  std::vector<uint32_t>& next = scratch_;
  next.clear();
  const auto& elements = grammar_->elements;
  const auto& sets = grammar_->byte_sets;
  NewEpoch();
  // Set(s) points into set_items_, which Expand does not touch.
  const size_t begin = set_begin_[s], end = set_begin_[s + 1];
  for (size_t i = begin; i < end; ++i) {
    const uint32_t n = set_items_[i];
    if (n == 0) continue;  // a complete parse takes no more bytes
    const Node nd = nodes_[n];
    if (!sets[elements[nd.pos].arg].Contains(byte)) continue;
    Expand(Intern(nd.pos + 1, nd.parent), &next);
  }
  const State result = InternSet(&next);
  transitions_.emplace(key, result);
  return result;
}

bool GrammarMatcher::Accepting(State s) const {
  if (s == kDead) return false;
  const auto set = Set(s);
  return set.front() == 0;  // sorted: node 0 comes first
}

bool GrammarMatcher::Finished(State s) const {
  if (s == kDead) return false;
  const auto set = Set(s);
  return set.size() == 1 && set.front() == 0;
}

bool GrammarMatcher::Consume(std::string_view bytes) {
  State s = state_;
  for (char c : bytes) {
    s = Advance(s, static_cast<uint8_t>(c));
    if (s == kDead) return false;
  }
  state_ = s;
  return true;
}

void GrammarMatcher::Trim(bool force) {
  if (!force && nodes_.size() <= kMaxNodes && transitions_.size() <= kMaxTransitions &&
      set_items_.size() <= kMaxSetItems) {
    return;
  }
  // Each stack of the committed state, as its positions from the top down.
  std::vector<std::vector<uint32_t>> stacks;
  for (uint32_t n : Set(state_)) {
    std::vector<uint32_t>& positions = stacks.emplace_back();
    for (uint32_t m = n; m != 0; m = nodes_[m].parent) positions.push_back(nodes_[m].pos);
  }
  Reset();
  std::vector<uint32_t> top;
  for (const auto& positions : stacks) {
    uint32_t node = 0;
    for (auto it = positions.rbegin(); it != positions.rend(); ++it) node = Intern(*it, node);
    top.push_back(node);
  }
  state_ = InternSet(&top);
  ++generation_;
}

bool GrammarAccepts(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<Grammar>(g));
  return m.Consume(text) && m.Accepting(m.state());
}

}  // namespace llm
