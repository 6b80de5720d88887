// Normalizers and pre-tokenizers of tokenizer.json, ported from the Rust `tokenizers` crate.
// Normalizers: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, ByteLevel.
// Pre-tokenizers: Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit,
// Punctuation. Regex patterns are compiled with Oniguruma (see tokenizer_regex.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace llm {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Normalize(std::string_view text) const = 0;
};

// A piece of text between pre-tokenization steps. `at_start` is true when the piece begins at
// offset 0 of the original input (Metaspace's prepend_scheme "first" needs it).
struct PreToken {
  std::string text;
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits every piece of `pieces` further (empty pieces are dropped).
  virtual void PreTokenize(std::vector<PreToken>* pieces) const = 0;
};

// `j` is the "normalizer" / "pre_tokenizer" value (may be null: returns nullptr).
StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const nlohmann::json& j,
                                                     const std::string& where);
StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const nlohmann::json& j,
                                                         const std::string& where);

// Replaces every non-overlapping occurrence of `from` (non-empty) by `to`.
std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to);

}  // namespace llm
