// Fast reading of tokenizer.json: a SAX pass that builds the JSON tree for everything except
// model.vocab and model.merges, which go straight into their final containers (the vocabulary
// and merge list are most of a 33 MB file; a DOM for them would double the load time).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/tokenizer_bpe.h"

namespace llm {

struct TokenizerJson {
  nlohmann::json root;  // model.vocab / model.merges left out
  TokVocab vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool has_vocab = false;
  bool has_merges = false;
};

// `file` names the file in errors.
StatusOr<TokenizerJson> ParseTokenizerJson(const std::string& text, const std::string& file);

}  // namespace llm
