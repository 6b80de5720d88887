// Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) in C++, reproducing Python
// `transformers` fast tokenizers (Rust `tokenizers`) exactly: added/special tokens, normalizers,
// pre-tokenizers (Split regexes run on Oniguruma like Rust), the BPE model (byte-level and
// SentencePiece-style with byte_fallback), post-processors incl. the LlamaTokenizerFast /
// GemmaTokenizerFast add_bos_token/add_eos_token rule, decoders and clean_up_tokenization_spaces.
//
// Decode skips ids that name no token (like Rust's decode, which filters them out), so invalid
// ids render nothing and never fail.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace llm {

class GgufFile;        // common/gguf.h
struct TokenizerJson;  // common/tokenizer_json.h

// The largest token id a tokenizer file may use (16.7M; real vocabularies stay below 300k): the
// id -> token table is sized by the largest id, so an absurd id must be an error, not 16 GiB.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

class DecodeSession;

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

class Tokenizer {
 public:
  // `dir` holds tokenizer.json and optionally tokenizer_config.json and config.json; or `dir`
  // is a .gguf file (then FromGguf).
  static StatusOr<std::unique_ptr<Tokenizer>> FromDir(const std::string& dir);
  // The tokenizer in a GGUF file's metadata (tokenizer.ggml.*, tokenizer.chat_template), built
  // as the tokenizer.json Hugging Face converts from the same vocabulary: "llama"
  // (SentencePiece BPE: merges from the scores, byte fallback, "▁" for spaces) and "gpt2"
  // (byte-level BPE with the file's merges; pre-tokenizer by tokenizer.ggml.pre).
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special_tokens: run the post-processor (BOS/EOS). parse_special = false: tokens flagged
  // special in the text are not matched (Python split_special_tokens=True); other added tokens
  // still are.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true,
                              bool parse_special = true) const;
  // Encode with parse_special, except inside `plain` (sorted, non-overlapping byte ranges of
  // `text`, e.g. the users' message contents in a rendered chat prompt): a special token's
  // text there stays text. Outside them the ids are exactly Encode's: text between special
  // tokens is tokenized as one piece, whatever the ranges.
  std::vector<int32_t> EncodeWithPlainRanges(std::string_view text,
                                             std::span<const TextRange> plain,
                                             bool add_special_tokens) const;
  // True when Encode (parse_special) would turn some of `text` into a special token.
  bool ContainsSpecialTokenText(std::string_view text) const;
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // What each token adds to the decoded text, byte-exact: bytes that are part of a UTF-8
  // character stay bytes (no U+FFFD), no clean-up of spaces. sequence_start: as the first token
  // of a text (where the decoder strips a leading space), else after other text. Special tokens
  // and ids without a token give "". One entry per id, for structured output's token masks.
  std::vector<std::string> TokenBytes(bool sequence_start) const;

  int32_t vocab_size() const;  // including added tokens (max id + 1)
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  bool IsSpecial(int32_t id) const;
  std::string IdToToken(int32_t id) const;  // "" for an unknown id
  std::optional<int32_t> TokenToId(std::string_view token) const;

  // From tokenizer_config.json ("" when absent).
  const std::string& chat_template() const;
  std::string bos_token() const;
  std::string eos_token() const;
  std::string pad_token() const;
  std::string unk_token() const;

  struct Impl;

 private:
  friend class IncrementalDecoder;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // Builds from a parsed tokenizer.json plus tokenizer_config.json and config.json objects;
  // `file` names the source in errors.
  static StatusOr<std::unique_ptr<Tokenizer>> FromParsed(TokenizerJson parsed,
                                                         const nlohmann::json& config,
                                                         const nlohmann::json& model_config,
                                                         const std::string& file);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer. Add(id) returns the text that became final (never a partial UTF-8
// character); the concatenation of all Add() results and Flush() equals
// Decode(all ids, skip_special_tokens) exactly. The Tokenizer must outlive it.
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  ~IncrementalDecoder();
  IncrementalDecoder(const IncrementalDecoder&) = delete;
  IncrementalDecoder& operator=(const IncrementalDecoder&) = delete;

  std::string Add(int32_t id);
  // Returns the held-back rest; after Flush() the decoder starts a new sequence.
  std::string Flush();
  // Context for what follows (the end of a prompt, so the first generated token decodes as it
  // does in the middle of a text, e.g. keeping a SentencePiece word's space, as vLLM does).
  // Its own text never comes out of Add: not even the part a stage held back when it was fed
  // (clean-up holds the last character until it sees the next).
  void Prime(std::span<const int32_t> ids);

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  size_t skip_ = 0;  // bytes of primed text still to drop from Add's output
  std::unique_ptr<DecodeSession> session_;
};

}  // namespace llm
