// Structured output at the token level: which tokens of the vocabulary may come next under a
// grammar (common/grammar_matcher.h).
//
// GrammarVocabulary holds every token's bytes (Tokenizer::TokenBytes) in a trie, built once per
// model; a mask walks the trie depth-first from the matcher's state, one memoized Advance per
// edge, and skips a whole subtree as soon as its prefix is rejected, so tokens sharing a prefix
// share the work. GrammarTokenFilter is one sequence's grammar: its matcher, the mask of the
// current state (cached per state, so the steps inside a long string value cost a lookup), and
// the tokens it accepted. Special tokens are never allowed by the grammar; the caller adds its
// end-of-sequence tokens when the grammar is complete (Accepting).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/grammar_matcher.h"
#include "common/status.h"

namespace llm {

class Tokenizer;

class GrammarVocabulary {
 public:
  // bytes[id]: what token id adds to the text ("" = never allowed), one entry per id. The
  // bytes after other text even for the first output token: the router decodes the output
  // primed with the end of the prompt (so a SentencePiece "▁{" is " {" there too).
  explicit GrammarVocabulary(std::vector<std::string> bytes);
  static std::shared_ptr<const GrammarVocabulary> FromTokenizer(const Tokenizer& tokenizer);

  int vocab_size() const { return static_cast<int>(bytes_.size()); }
  int mask_words() const { return (vocab_size() + 63) / 64; }
  std::string_view Bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // Sets in `mask` (mask_words() words, cleared first) the tokens the matcher's committed state
  // can take whole.
  void FillMask(GrammarMatcher& matcher, uint64_t* mask) const;

 private:
  // A trie in depth-first order: node i's subtree is [i, skip[i]).
  struct Trie {
    std::vector<uint8_t> byte;
    std::vector<uint16_t> depth;  // 1 for children of the root
    std::vector<uint32_t> skip;
    std::vector<uint32_t> tokens_begin;  // tokens ending at node i: ids[tokens_begin[i] ..
    std::vector<uint32_t> ids;           //   tokens_begin[i + 1])
    size_t max_depth = 0;
  };
  static Trie BuildTrie(const std::vector<std::string>& bytes);

  std::vector<std::string> bytes_;
  Trie trie_;
};

class GrammarTokenFilter {
 public:
  GrammarTokenFilter(std::shared_ptr<const Grammar> grammar,
                     std::shared_ptr<const GrammarVocabulary> vocab);

  // The tokens the grammar allows next (vocab_size bits), end-of-sequence tokens not included.
  const uint64_t* AllowedTokens();
  bool Allows(int32_t token);
  // Takes the token's bytes; false (nothing changes) when the grammar rejects them.
  bool Accept(int32_t token);
  // The output so far is a complete value / nothing but the end may follow.
  bool Accepting() const { return matcher_.Accepting(matcher_.state()); }
  bool Finished() const { return matcher_.Finished(matcher_.state()); }
  int num_accepted() const { return accepted_; }

 private:
  static constexpr size_t kMaxCachedMasks = 8;  // vocab/8 bytes each
  GrammarMatcher matcher_;
  std::shared_ptr<const GrammarVocabulary> vocab_;
  int accepted_ = 0;
  uint64_t cache_generation_ = 0;
  // Masks by state; all dropped when full or after a Trim.
  std::unordered_map<uint64_t, std::vector<uint64_t>> masks_;
};

}  // namespace llm
