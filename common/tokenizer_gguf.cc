// Tokenizer::FromGguf: the tokenizer of a GGUF file, built as the tokenizer.json Hugging Face
// makes from the same vocabulary, then loaded like one (Tokenizer::FromParsed), so encode and
// decode follow the same code as a model folder.
//
// tokenizer.ggml.model "llama" (SentencePiece BPE; transformers' LlamaConverter, legacy mode):
// normalizer Prepend("▁") (when tokenizer.ggml.add_space_prefix, default true) + Replace(" ",
// "▁"), no pre-tokenizer, BPE with byte_fallback whose merges come from the scores as
// SentencePieceExtractor makes them (every split of a piece into two pieces, ordered by the
// piece's score, highest first, stable), decoder Replace("▁", " ") + ByteFallback + Fuse +
// Strip(1 leading space); BOS/EOS by tokenizer.ggml.add_bos_token / add_eos_token (defaults
// true / false) as LlamaTokenizerFast does.
// tokenizer.ggml.model "gpt2" (byte-level BPE): the file's merges, the pre-tokenizer regex of
// tokenizer.ggml.pre (gpt2/default, llama-bpe, qwen2, chatglm-bpe/glm4), ByteLevel decoder; BOS
// when tokenizer.ggml.add_bos_token says so (default false), never for chatglm-bpe/glm4 (GLM-4's
// GGUFs: llama.cpp drops their BOS and uses Llama 3's split regex, without ignore_merges).
// Token types: control (3) and unknown (2) tokens are special added tokens, user-defined (4)
// ones plain added tokens; tokenizer.chat_template is the chat template.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/gguf.h"
#include "common/tokenizer.h"
#include "common/tokenizer_json.h"
#include "common/utf8.h"

namespace llm {
namespace {

using nlohmann::json;

constexpr const char* kSpace = "\xE2\x96\x81";  // "▁"

enum TokenType {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;  // empty: all normal
  std::vector<double> scores;  // empty: none
};

// An id key of the file, if present and inside the vocabulary.
StatusOr<std::optional<int32_t>> OptionalId(const GgufFile& f, const char* key, size_t vocab) {
  if (!f.Find(key)) return std::optional<int32_t>();
  LLM_ASSIGN_OR_RETURN(int64_t id, f.GetInt(key));
  if (id < 0 || static_cast<uint64_t>(id) >= vocab) {
    // llama.cpp writes -1 (as uint32 0xFFFFFFFF) for "none"; anything outside is none.
    return std::optional<int32_t>();
  }
  return std::optional<int32_t>(static_cast<int32_t>(id));
}

StatusOr<bool> OptionalBool(const GgufFile& f, const char* key, bool fallback) {
  if (!f.Find(key)) return fallback;
  return f.GetBool(key);
}

// SentencePieceExtractor's merges: for every piece, each split into two pieces of the
// vocabulary (at character boundaries, ordered by the ids of the halves), all ordered by the
// piece's score, highest first; ties keep vocabulary order.
std::vector<std::pair<std::string, std::string>> MergesFromScores(const GgufVocab& v,
                                                                  const TokVocab& vocab) {
  struct Merge {
    double score;
    size_t order;
    int32_t left, right;
    std::string l, r;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& piece = v.tokens[id];
    if (vocab.find(piece)->second != static_cast<int32_t>(id)) continue;  // a duplicate
    std::vector<Merge> local;
    size_t pos = 0;
    utf8::Next(piece, &pos);
    while (pos < piece.size()) {
      const auto l = vocab.find(std::string_view(piece).substr(0, pos));
      const auto r = vocab.find(std::string_view(piece).substr(pos));
      if (l != vocab.end() && r != vocab.end()) {
        local.push_back({v.scores[id], 0, l->second, r->second, l->first, r->first});
      }
      utf8::Next(piece, &pos);
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    for (auto& m : local) {
      m.order = merges.size();
      merges.push_back(std::move(m));
    }
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (auto& m : merges) out.emplace_back(std::move(m.l), std::move(m.r));
  return out;
}

json ReplaceSpec(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

// The pre-tokenizer Hugging Face uses for a tokenizer.ggml.pre value.
StatusOr<json> Gpt2PreTokenizer(const std::string& pre, const std::string& path) {
  const auto split_then_bytes = [](const std::string& regex) {
    return json{{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"},
                   {"pattern", {{"Regex", regex}}},
                   {"behavior", "Isolated"},
                   {"invert", false}},
                  {{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", true},
                   {"use_regex", false}}}}};
  };
  if (pre == "default" || pre == "gpt2" || pre.empty()) {
    return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  }
  // llama.cpp's CHATGLM4 regex (chatglm-bpe, glm4) is LLAMA3's.
  if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe" || pre == "chatglm-bpe" ||
      pre == "glm4") {
    return split_then_bytes(
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    return split_then_bytes(
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
  }
  // SmolLM / SmolLM2 (llama architecture): StarCoder's tokenizer.json pre-tokenizer, each digit
  // its own piece, then GPT-2's byte-level regex (llama.cpp's SMOLLM: "\\p{N}", then GPT-2's).
  if (pre == "smollm") {
    return json{{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Digits"}, {"individual_digits", true}},
                  {{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", true},
                   {"use_regex", true}}}}};
  }
  // Mistral's Tekken (Mistral NeMo, Mistral Small 3: llama architecture) and the o200k
  // pre-tokenizer of GPT-4o that Phi-4-mini uses (llama.cpp's "gpt-4o"): the regexes of their
  // tokenizer.json files, which llama.cpp's llama-vocab.cpp quotes as "original regex from
  // tokenizer.json" before its own approximation. Case-aware letter runs: an upper-case run ends
  // a piece where a lower-case run follows ("HelloWorld" = "Hello" + "World"); tekken splits
  // digits one by one, gpt-4o by three and keeps contractions on the word ("I'm").
  constexpr const char* kCaseRuns =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+";
  constexpr const char* kUpperRuns =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*";
  constexpr const char* kRest = " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  if (pre == "tekken") {
    return split_then_bytes(std::string(kCaseRuns) + "|" + kUpperRuns + "|\\p{N}|" + kRest);
  }
  if (pre == "gpt-4o") {
    const std::string contraction = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?";
    return split_then_bytes(std::string(kCaseRuns) + contraction + "|" + kUpperRuns + contraction +
                            "|\\p{N}{1,3}|" + kRest);
  }
  return Unimplemented(path + ": tokenizer.ggml.pre '" + pre +
                       "' is not supported (supported: default, gpt2, llama-bpe, qwen2, "
                       "deepseek-r1-qwen, chatglm-bpe, glm4, smollm, tekken, gpt-4o)");
}

StatusOr<GgufVocab> ReadVocab(const GgufFile& f) {
  GgufVocab v;
  LLM_ASSIGN_OR_RETURN(v.tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  if (v.tokens.empty() || static_cast<int64_t>(v.tokens.size()) > kMaxTokenId + 1) {
    return InvalidArgument(f.path() + ": key 'tokenizer.ggml.tokens' must hold 1 to " +
                           std::to_string(kMaxTokenId + 1) + " tokens");
  }
  if (f.Find("tokenizer.ggml.token_type")) {
    LLM_ASSIGN_OR_RETURN(v.types, f.GetIntArray("tokenizer.ggml.token_type"));
    if (v.types.size() != v.tokens.size()) {
      return InvalidArgument(f.path() + ": key 'tokenizer.ggml.token_type' has " +
                             std::to_string(v.types.size()) + " entries for " +
                             std::to_string(v.tokens.size()) + " tokens");
    }
  }
  if (f.Find("tokenizer.ggml.scores")) {
    LLM_ASSIGN_OR_RETURN(v.scores, f.GetFloatArray("tokenizer.ggml.scores"));
    if (v.scores.size() != v.tokens.size()) {
      return InvalidArgument(f.path() + ": key 'tokenizer.ggml.scores' has " +
                             std::to_string(v.scores.size()) + " entries for " +
                             std::to_string(v.tokens.size()) + " tokens");
    }
  }
  return v;
}

json AddedTokens(const GgufVocab& v) {
  json added = json::array();
  for (size_t id = 0; id < v.types.size(); ++id) {
    const int64_t t = v.types[id];
    if (t != kUnknown && t != kControl && t != kUserDefined) continue;
    added.push_back({{"id", id},
                     {"content", v.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", t != kUserDefined}});
  }
  return added;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& f) {
  const std::string& path = f.path();
  LLM_ASSIGN_OR_RETURN(std::string model, f.GetString("tokenizer.ggml.model"));
  if (model != "llama" && model != "gpt2") {
    return Unimplemented(path + ": tokenizer.ggml.model '" + model +
                         "' is not supported (supported: llama, gpt2)");
  }
  LLM_ASSIGN_OR_RETURN(GgufVocab v, ReadVocab(f));
  const bool spm = model == "llama";
  if (spm && v.scores.empty()) {
    return InvalidArgument(path + ": a 'llama' tokenizer needs 'tokenizer.ggml.scores'");
  }
  TokenizerJson parsed;
  parsed.has_vocab = true;
  parsed.has_merges = true;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    parsed.vocab.emplace(v.tokens[id], static_cast<int32_t>(id));  // the first of duplicates
  }
  const size_t n = v.tokens.size();
  LLM_ASSIGN_OR_RETURN(auto bos, OptionalId(f, "tokenizer.ggml.bos_token_id", n));
  LLM_ASSIGN_OR_RETURN(auto eos, OptionalId(f, "tokenizer.ggml.eos_token_id", n));
  LLM_ASSIGN_OR_RETURN(auto unk, OptionalId(f, "tokenizer.ggml.unknown_token_id", n));
  LLM_ASSIGN_OR_RETURN(auto pad, OptionalId(f, "tokenizer.ggml.padding_token_id", n));
  LLM_ASSIGN_OR_RETURN(bool add_bos, OptionalBool(f, "tokenizer.ggml.add_bos_token", spm));
  if (!spm && f.Find("tokenizer.ggml.pre")) {  // GLM-4: llama.cpp never adds the BOS
    LLM_ASSIGN_OR_RETURN(const std::string file_pre, f.GetString("tokenizer.ggml.pre"));
    if (file_pre == "chatglm-bpe" || file_pre == "glm4") add_bos = false;
  }
  LLM_ASSIGN_OR_RETURN(bool add_eos, OptionalBool(f, "tokenizer.ggml.add_eos_token", false));
  const auto text = [&](const std::optional<int32_t>& id) {
    return id ? json(v.tokens[*id]) : json(nullptr);
  };
  json& root = parsed.root;
  root = json::object();
  root["added_tokens"] = AddedTokens(v);
  json config = {{"bos_token", text(bos)},
                 {"eos_token", text(eos)},
                 {"unk_token", text(unk)},
                 {"pad_token", text(pad)},
                 {"add_bos_token", add_bos},
                 {"add_eos_token", add_eos},
                 {"clean_up_tokenization_spaces", false}};
  if (f.Find("tokenizer.chat_template")) {
    LLM_ASSIGN_OR_RETURN(std::string tmpl, f.GetString("tokenizer.chat_template"));
    config["chat_template"] = tmpl;
  }
  if (spm) {
    LLM_ASSIGN_OR_RETURN(bool prefix, OptionalBool(f, "tokenizer.ggml.add_space_prefix", true));
    parsed.merges = MergesFromScores(v, parsed.vocab);
    root["normalizer"] =
        prefix ? json{{"type", "Sequence"},
                      {"normalizers",
                       {{{"type", "Prepend"}, {"prepend", kSpace}}, ReplaceSpec(" ", kSpace)}}}
               : ReplaceSpec(" ", kSpace);
    root["pre_tokenizer"] = nullptr;
    root["model"] = {
        {"type", "BPE"}, {"unk_token", text(unk)}, {"fuse_unk", true}, {"byte_fallback", true}};
    json decoders = {ReplaceSpec(kSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
    if (prefix)
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    root["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    root["post_processor"] = nullptr;  // LlamaTokenizerFast builds it from add_bos/add_eos
    config["tokenizer_class"] = "LlamaTokenizerFast";
  } else {
    LLM_ASSIGN_OR_RETURN(std::vector<std::string> merges,
                         f.GetStringArray("tokenizer.ggml.merges"));
    for (const std::string& m : merges) {
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) {
        return InvalidArgument(path + ": merge '" + m +
                               "' in tokenizer.ggml.merges is not two "
                               "tokens separated by a space");
      }
      parsed.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    std::string pre;
    if (f.Find("tokenizer.ggml.pre")) {
      LLM_ASSIGN_OR_RETURN(pre, f.GetString("tokenizer.ggml.pre"));
    }
    LLM_ASSIGN_OR_RETURN(root["pre_tokenizer"], Gpt2PreTokenizer(pre, path));
    const bool qwen = pre == "qwen2" || pre == "deepseek-r1-qwen";
    root["normalizer"] = qwen ? json{{"type", "NFC"}} : json(nullptr);
    root["model"] = {{"type", "BPE"},
                     {"unk_token", text(unk)},
                     {"fuse_unk", false},
                     {"byte_fallback", false},
                     {"ignore_merges", pre == "llama-bpe" || pre == "llama3"}};
    root["decoder"] = {{"type", "ByteLevel"},
                       {"add_prefix_space", true},
                       {"trim_offsets", true},
                       {"use_regex", true}};
    json single = json::array(), specials = json::object();
    const auto add = [&](const std::optional<int32_t>& id) {
      const std::string& t = v.tokens[*id];
      single.push_back({{"SpecialToken", {{"id", t}, {"type_id", 0}}}});
      specials[t] = {{"id", t}, {"ids", {*id}}, {"tokens", {t}}};
    };
    if (add_bos && bos) add(bos);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (add_eos && eos) add(eos);
    root["post_processor"] = {
        {"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
    config["clean_up_tokenization_spaces"] = pre == "llama-bpe" || pre == "llama3";
  }
  return FromParsed(std::move(parsed), config, json::object(), path);
}

}  // namespace llm
