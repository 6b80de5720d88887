// Added vocabulary of tokenizer.json ("added_tokens"), a port of Rust's AddedVocabulary: tokens
// are split out of the input *before* the normalizer and model, leftmost-longest (the
// aho-corasick LeftmostLongest semantics), with the single_word / lstrip / rstrip / normalized
// flags. With parse_special = false (Rust encode_special_tokens) matches of special tokens are
// skipped, leaving their text to the model; non-special added tokens still match.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/tokenizer_pipeline.h"

namespace llm {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of input after added-token extraction: either an added token (id >= 0) or normalized
// text for the pre-tokenizer and model.
struct AddedSplit {
  std::string text;
  int32_t id = -1;
  bool at_start = false;  // begins at offset 0 of the original input
  size_t raw_begin = 0;   // the bytes of the original input it came from
  size_t raw_end = 0;
};

// Byte range [begin, end) of an input.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
};

class AddedVocab {
 public:
  // `normalizer` (may be null) normalizes the patterns of tokens flagged normalized.
  void Build(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Rust AddedVocabulary::extract_and_normalize.
  std::vector<AddedSplit> ExtractAndNormalize(std::string_view text, const Normalizer* normalizer,
                                              bool parse_special) const;
  // With parse_special, except that special tokens overlapping a `plain` range (sorted byte
  // ranges of `text`) are not matched. Tokens flagged normalized match after normalization,
  // where offsets no longer map to the input: a piece that overlaps a plain range matches no
  // special token at all there (conservative; such tokens are rare).
  std::vector<AddedSplit> ExtractAndNormalize(std::string_view text, const Normalizer* normalizer,
                                              std::span<const ByteRange> plain) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* ById(int32_t id) const;
  std::optional<int32_t> IdOf(std::string_view content) const;

 private:
  // Byte trie with leftmost-longest matching.
  class Trie {
   public:
    void Insert(std::string_view pattern, int32_t token_index);
    // Longest pattern starting at text[pos]: (length, token index) or (0, -1).
    std::pair<size_t, int32_t> LongestAt(std::string_view text, size_t pos) const;
    bool empty() const { return nodes_.size() <= 1; }

   private:
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
      int32_t token = -1;
    };
    std::vector<Node> nodes_ = std::vector<Node>(1);
  };

  struct Match {
    size_t begin, end;
    int32_t id;
  };
  // Where special tokens may match: everywhere, nowhere, or outside `plain` ranges.
  struct SpecialFilter {
    bool parse_special = true;
    std::span<const ByteRange> plain;  // of the text being split; empty: no restriction
    bool Allows(size_t begin, size_t end) const;
  };
  std::vector<AddedSplit> Extract(std::string_view text, const Normalizer* normalizer,
                                  bool parse_special, std::span<const ByteRange> plain) const;
  std::vector<Match> FindMatches(std::string_view text, const Trie& trie,
                                 const SpecialFilter& filter) const;
  void SplitWith(std::string_view text, bool at_start, const Trie& trie,
                 const SpecialFilter& filter, std::vector<AddedSplit>* out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  Trie raw_trie_;
  Trie normalized_trie_;
};

}  // namespace llm
