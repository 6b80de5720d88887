#include "common/tokenizer_added.h"

#include <algorithm>

#include "common/unicode.h"
#include "common/utf8.h"

namespace llm {
namespace {

// Code point that ends at byte `end` of `s` (end > 0).
char32_t LastChar(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  return utf8::Next(s, &start);
}

bool EndsWithWord(std::string_view s, size_t end) {
  return end > 0 && unicode::IsWordChar(LastChar(s, end));
}

bool StartsWithWord(std::string_view s, size_t pos) {
  return pos < s.size() && unicode::IsWordChar(utf8::Next(s, &pos));
}

// Start of the whitespace run that ends at `end`.
size_t SpaceRunStart(std::string_view s, size_t end) {
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t p = start;
    if (!unicode::IsWhiteSpace(utf8::Next(s, &p))) break;
    end = start;
  }
  return end;
}

// End of the whitespace run that starts at `pos`.
size_t SpaceRunEnd(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t p = pos;
    if (!unicode::IsWhiteSpace(utf8::Next(s, &p))) break;
    pos = p;
  }
  return pos;
}

}  // namespace

void AddedVocab::Trie::Insert(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (const char ch : pattern) {
    const auto b = static_cast<uint8_t>(ch);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, INT32_MIN));
    if (it != children.end() && it->first == b) {
      node = it->second;
      continue;
    }
    const auto child = static_cast<int32_t>(nodes_.size());
    children.insert(it, {b, child});
    nodes_.emplace_back();
    node = child;
  }
  // The first token with this pattern wins (like the aho-corasick pattern order).
  if (nodes_[node].token < 0) nodes_[node].token = token_index;
}

std::pair<size_t, int32_t> AddedVocab::Trie::LongestAt(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    const auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, INT32_MIN));
    if (it == children.end() || it->first != b) break;
    node = it->second;
    if (nodes_[node].token >= 0) best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

void AddedVocab::Build(std::vector<AddedToken> tokens, const Normalizer* normalizer) {
  tokens_ = std::move(tokens);
  by_id_.clear();
  by_content_.clear();
  raw_trie_ = Trie();
  normalized_trie_ = Trie();
  // Rust builds its tries from the special tokens first, then the others.
  std::vector<size_t> order(tokens_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return tokens_[i].special; });
  for (const size_t i : order) {
    const AddedToken& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_.emplace(t.content, t.id);
    if (t.normalized) {
      normalized_trie_.Insert(normalizer ? normalizer->Normalize(t.content) : t.content,
                              static_cast<int32_t>(i));
    } else {
      raw_trie_.Insert(t.content, static_cast<int32_t>(i));
    }
  }
}

const AddedToken* AddedVocab::ById(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocab::IdOf(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

// Rust AddedVocabulary::find_matches (only the matched tokens; the gaps are implied).
bool AddedVocab::SpecialFilter::Allows(size_t begin, size_t end) const {
  if (!parse_special) return false;
  for (const ByteRange& r : plain) {
    if (begin < r.end && r.begin < end) return false;
  }
  return true;
}

std::vector<AddedVocab::Match> AddedVocab::FindMatches(std::string_view text, const Trie& trie,
                                                       const SpecialFilter& filter) const {
  std::vector<Match> matches;
  size_t start_offset = 0;
  for (size_t pos = 0; pos < text.size();) {
    const auto [len, index] = trie.LongestAt(text, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    const AddedToken& t = tokens_[index];
    if (t.special && !filter.Allows(start, stop)) continue;
    if (t.single_word) {
      const bool start_space = start == 0 || !EndsWithWord(text, start);
      const bool stop_space = stop == text.size() || !StartsWithWord(text, stop);
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) start = std::max(SpaceRunStart(text, start), start_offset);
    if (t.rstrip) stop = SpaceRunEnd(text, stop);
    matches.push_back({start, stop, t.id});
    start_offset = stop;
  }
  return matches;
}

void AddedVocab::SplitWith(std::string_view text, bool at_start, const Trie& trie,
                           const SpecialFilter& filter, std::vector<AddedSplit>* out) const {
  size_t prev = 0;
  const auto gap = [&](size_t b, size_t e) {
    if (e > b) out->push_back({std::string(text.substr(b, e - b)), -1, at_start && b == 0, b, e});
  };
  if (!trie.empty()) {
    for (const Match& m : FindMatches(text, trie, filter)) {
      gap(prev, m.begin);
      out->push_back(
          {std::string(text.substr(m.begin, m.end - m.begin)), m.id, false, m.begin, m.end});
      prev = m.end;
    }
  }
  gap(prev, text.size());
}

std::vector<AddedSplit> AddedVocab::ExtractAndNormalize(std::string_view text,
                                                        const Normalizer* normalizer,
                                                        bool parse_special) const {
  return Extract(text, normalizer, parse_special, {});
}

std::vector<AddedSplit> AddedVocab::ExtractAndNormalize(std::string_view text,
                                                        const Normalizer* normalizer,
                                                        std::span<const ByteRange> plain) const {
  return Extract(text, normalizer, true, plain);
}

std::vector<AddedSplit> AddedVocab::Extract(std::string_view text, const Normalizer* normalizer,
                                            bool parse_special,
                                            std::span<const ByteRange> plain) const {
  std::vector<AddedSplit> raw;
  SplitWith(text, true, raw_trie_, SpecialFilter{parse_special, plain}, &raw);
  std::vector<AddedSplit> out;
  out.reserve(raw.size());
  for (AddedSplit& s : raw) {
    if (s.id >= 0) {
      out.push_back(std::move(s));
      continue;
    }
    const std::string normalized = normalizer ? normalizer->Normalize(s.text) : std::move(s.text);
    const bool overlaps_plain = !SpecialFilter{true, plain}.Allows(s.raw_begin, s.raw_end);
    SplitWith(normalized, s.at_start, normalized_trie_,
              SpecialFilter{parse_special && !overlaps_plain, {}}, &out);
  }
  return out;
}

}  // namespace llm
