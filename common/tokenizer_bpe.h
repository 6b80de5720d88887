// Byte-pair-encoding model of tokenizer.json ("model": {"type": "BPE", ...}), a port of the Rust
// `tokenizers` BPE: rank-ordered merging with a priority queue (`Word::merge_all`), byte_fallback
// to <0xNN> tokens, unk_token with fuse_unk, ignore_merges, continuing_subword_prefix and
// end_of_word_suffix. Merges may be "a b" strings or ["a", "b"] pairs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace llm {

struct TokStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokVocab = std::unordered_map<std::string, int32_t, TokStringHash, std::equal_to<>>;

class BpeModel {
 public:
  using Merges = std::vector<std::pair<std::string, std::string>>;
  // `model` is the "model" object of tokenizer.json without "vocab" and "merges", which come
  // pre-parsed (see tokenizer_json.h); `file` names the file in errors.
  static StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model, TokVocab vocab,
                                                      const Merges& merges,
                                                      const std::string& file);

  // Appends the ids of one pre-tokenized word to `out`.
  void Tokenize(std::string_view word, std::vector<int32_t>* out) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // nullptr when the model has no token with this id.
  const std::string* IdToToken(int32_t id) const;
  // Largest id in the vocabulary (-1 when empty).
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    size_t len;
  };
  void TakeVocab(TokVocab vocab);
  Status LoadMerges(const Merges& merges, const std::string& file);
  void InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const;
  void MergeAll(std::vector<Symbol>* symbols) const;
  const std::pair<uint32_t, int32_t>* FindMerge(int32_t a, int32_t b) const;

  TokVocab vocab_;
  std::vector<const std::string*> id_to_token_;  // keys of vocab_ (stable), nullptr for holes
  std::unordered_map<uint64_t, std::pair<uint32_t, int32_t>> merges_;  // pair -> (rank, new id)
  std::optional<std::string> unk_token_;
  std::optional<std::string> prefix_;  // continuing_subword_prefix
  std::optional<std::string> suffix_;  // end_of_word_suffix
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::vector<int32_t> byte_ids_;  // <0xNN> token ids, -1 where missing

  // Word -> ids cache (bounded); words repeat a lot in real text.
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, TokStringHash, std::equal_to<>>
      cache_;
};

}  // namespace llm
