// Internal state of llm::Tokenizer (not part of the public API).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/tokenizer.h"
#include "common/tokenizer_added.h"
#include "common/tokenizer_bpe.h"
#include "common/tokenizer_decoder.h"
#include "common/tokenizer_pipeline.h"

namespace llm {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  AddedVocab added;
  std::unordered_set<std::string> special_contents;  // Rust special_tokens_set
  // Post-processor with add_special_tokens: prefix + sequence + suffix.
  std::vector<int32_t> post_prefix;
  std::vector<int32_t> post_suffix;
  std::vector<std::unique_ptr<DecoderSpec>> decoders;
  bool clean_up_spaces = false;
  std::string chat_template;
  std::string bos_token, eos_token, pad_token, unk_token;
  std::optional<int32_t> bos_id, eos_id, pad_id;
  int32_t vocab_size = 0;

  // Token string that Decode feeds to the decoders, or nullptr to skip the id.
  const std::string* TokenForDecode(int32_t id, bool skip_special) const;
};

}  // namespace llm
