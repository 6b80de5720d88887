// Decoders of tokenizer.json (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence;
// no decoder = tokens joined by " ") plus Python's clean_up_tokenization, written as *streaming*
// stages. Tokenizer::Decode runs the very same stages over all tokens at once, so streaming output
// (IncrementalDecoder) concatenates to exactly the full decode by construction.
//
// Stages pass pieces of text along; `new_token` marks the first piece of a token as the Rust
// decoders see it (position-dependent decoders such as Strip and Metaspace need token bounds).
// After Fuse or ByteLevel everything is one token that arrives in several pieces.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace llm {

struct DecodePiece {
  std::string text;
  bool new_token = true;
};

class DecodeStage {
 public:
  virtual ~DecodeStage() = default;
  virtual void Push(DecodePiece piece, std::vector<DecodePiece>* out) = 0;
  virtual void Finish(std::vector<DecodePiece>* out) = 0;
};

// Immutable decoder configuration; makes fresh stage state for every decoding session.
class DecoderSpec {
 public:
  virtual ~DecoderSpec() = default;
  // raw_bytes: bytes that are not valid UTF-8 (a byte token, a piece of a character) pass
  // through as they are instead of becoming U+FFFD (what a token adds to the text, byte-exact).
  virtual std::unique_ptr<DecodeStage> NewStage(bool raw_bytes) const = 0;
};

// Flattens the "decoder" value (Sequence included) into specs; null gives the join-with-space
// decoder of a tokenizer without one.
StatusOr<std::vector<std::unique_ptr<DecoderSpec>>> MakeDecoderSpecs(const nlohmann::json& j,
                                                                     const std::string& where);

// Python PreTrainedTokenizerBase.clean_up_tokenization.
std::string CleanUpTokenization(std::string_view text);

// One decoding run: token strings in, final text out.
class DecodeSession {
 public:
  DecodeSession(const std::vector<std::unique_ptr<DecoderSpec>>& specs, bool clean_up,
                bool raw_bytes = false);
  // Feeds one token string; returns the text that became final.
  std::string Push(std::string_view token);
  // Ends the run; returns the rest of the text.
  std::string Finish();

 private:
  std::string Clean(std::string text, bool last);

  std::vector<std::unique_ptr<DecodeStage>> stages_;
  bool clean_up_;
  std::string clean_held_;
  bool finished_ = false;
};

}  // namespace llm
