#include "common/grammar_vocab.h"

#include <algorithm>
#include <cstring>

#include "common/tokenizer.h"

namespace llm {

GrammarVocabulary::GrammarVocabulary(std::vector<std::string> bytes)
    : bytes_(std::move(bytes)), trie_(BuildTrie(bytes_)) {}

std::shared_ptr<const GrammarVocabulary> GrammarVocabulary::FromTokenizer(
    const Tokenizer& tokenizer) {
  return std::make_shared<GrammarVocabulary>(tokenizer.TokenBytes(/*sequence_start=*/false));
}

GrammarVocabulary::Trie GrammarVocabulary::BuildTrie(const std::vector<std::string>& bytes) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes.size(); ++id) {
    // Longer tokens than a trie depth can say are never allowed (none exist in practice).
    if (!bytes[id].empty() && bytes[id].size() < 65535) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int c = bytes[static_cast<size_t>(a)].compare(bytes[static_cast<size_t>(b)]);
    return c != 0 ? c < 0 : a < b;
  });
  Trie t;
  std::vector<uint32_t> path;  // node index per depth - 1 along the current string
  std::string_view prev;
  const auto close_from = [&](size_t depth) {
    for (size_t d = depth; d < path.size(); ++d)
      t.skip[path[d]] = static_cast<uint32_t>(t.byte.size());
    path.resize(depth);
  };
  for (int32_t id : order) {
    const std::string_view s = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    close_from(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(s[d]));
      t.depth.push_back(static_cast<uint16_t>(d + 1));
      t.skip.push_back(0);
      t.tokens_begin.push_back(static_cast<uint32_t>(t.ids.size()));
    }
    t.max_depth = std::max(t.max_depth, s.size());
    // Sorted: tokens with the same bytes are adjacent and end at the newest node.
    t.ids.push_back(static_cast<uint32_t>(id));
    prev = s;
  }
  close_from(0);
  t.tokens_begin.push_back(static_cast<uint32_t>(t.ids.size()));
  return t;
}

void GrammarVocabulary::FillMask(GrammarMatcher& m, uint64_t* mask) const {
  std::memset(mask, 0, sizeof(uint64_t) * static_cast<size_t>(mask_words()));
  const Trie& t = trie_;
  std::vector<GrammarMatcher::State> states(t.max_depth + 1);
  states[0] = m.state();
  const size_t n = t.byte.size();
  for (size_t i = 0; i < n;) {
    const GrammarMatcher::State s = m.Advance(states[t.depth[i] - 1], t.byte[i]);
    if (s == GrammarMatcher::kDead) {
      i = t.skip[i];
      continue;
    }
    states[t.depth[i]] = s;
    for (uint32_t k = t.tokens_begin[i]; k < t.tokens_begin[i + 1]; ++k) {
      const uint32_t id = t.ids[k];
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

GrammarTokenFilter::GrammarTokenFilter(std::shared_ptr<const Grammar> grammar,
                                       std::shared_ptr<const GrammarVocabulary> vocab)
    : matcher_(std::move(grammar)), vocab_(std::move(vocab)) {}

const uint64_t* GrammarTokenFilter::AllowedTokens() {
  if (matcher_.generation() != cache_generation_ || masks_.size() >= kMaxCachedMasks) {
    masks_.clear();
    cache_generation_ = matcher_.generation();
  }
  auto [it, inserted] = masks_.try_emplace(matcher_.state());
  if (inserted) {
    it->second.resize(static_cast<size_t>(vocab_->mask_words()));
    vocab_->FillMask(matcher_, it->second.data());
  }
  return it->second.data();
}

bool GrammarTokenFilter::Allows(int32_t token) {
  if (token < 0 || token >= vocab_->vocab_size()) return false;
  const std::string_view bytes = vocab_->Bytes(token);
  if (bytes.empty()) return false;
  GrammarMatcher::State s = matcher_.state();
  for (char c : bytes) {
    s = matcher_.Advance(s, static_cast<uint8_t>(c));
    if (s == GrammarMatcher::kDead) return false;
  }
  return true;
}

bool GrammarTokenFilter::Accept(int32_t token) {
  if (!Allows(token)) return false;
  const bool ok = matcher_.Consume(vocab_->Bytes(token));
  if (ok) {
    ++accepted_;
    matcher_.Trim();
  }
  return ok;
}

}  // namespace llm
