// Tokenizer::FromDir: reads tokenizer.json, tokenizer_config.json and config.json (or a .gguf
// file: tokenizer_gguf.cc).
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "common/gguf.h"
#include "common/tokenizer.h"
#include "common/tokenizer_impl.h"
#include "common/tokenizer_json.h"

namespace llm {
namespace {

using nlohmann::json;

// The value under `key`, or a null value; never copies (tokenizer.json objects are large).
const json& Member(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// Iterable view of an array member (empty when missing or not an array).
const json& ArrayMember(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& m = Member(j, key);
  return m.is_array() ? m : kEmpty;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<json> ReadJson(const std::string& path, bool required, bool* found) {
  *found = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (required) return NotFound(path + ": cannot open file");
    return json();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss(path + ": not valid JSON");
  *found = true;
  return j;
}

// A special token in tokenizer_config.json: "<s>", {"content": "<s>", ...} or null.
std::string SpecialTokenString(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::string();
}

StatusOr<AddedToken> ParseAddedToken(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("content") || !j["content"].is_string()) {
    return InvalidArgument(where + ": added token without \"content\"");
  }
  AddedToken t;
  t.content = j["content"].get<std::string>();
  t.special = j.value("special", false);
  t.single_word = j.value("single_word", false);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  t.normalized = j.value("normalized", !t.special);
  if (j.contains("id") && j["id"].is_number_integer()) {
    const int64_t id = j["id"].get<int64_t>();
    if (id < 0 || id > kMaxTokenId) {
      return InvalidArgument(where + ": added token '" + t.content + "' has id " +
                             std::to_string(id) + ", outside [0, " + std::to_string(kMaxTokenId) +
                             "]");
    }
    t.id = static_cast<int32_t>(id);
  }
  return t;
}

// Post-processor: collects the ids put before / after the sequence.
Status ParsePostProcessor(const json& j, const std::string& where, std::vector<int32_t>* prefix,
                          std::vector<int32_t>* suffix) {
  if (j.is_null()) return Status::Ok();
  const std::string type = j.value("type", std::string());
  if (type == "Sequence") {
    for (const auto& p : ArrayMember(j, "processors")) {
      LLM_RETURN_IF_ERROR(ParsePostProcessor(p, where, prefix, suffix));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") return Status::Ok();
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json& cls = ArrayMember(j, "cls");
    const json& sep = ArrayMember(j, "sep");
    if (cls.size() != 2 || sep.size() != 2) return InvalidArgument(where + ": bad cls/sep");
    prefix->insert(prefix->begin(), cls[1].get<int32_t>());
    suffix->push_back(sep[1].get<int32_t>());
    return Status::Ok();
  }
  if (type != "TemplateProcessing") return Unimplemented(where + ": post_processor " + type);
  const json& specials = Member(j, "special_tokens");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const auto& item : ArrayMember(j, "single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.contains("SpecialToken")
                                 ? item["SpecialToken"].value("id", std::string())
                                 : std::string();
    if (!specials.is_object() || !specials.contains(name)) {
      return InvalidArgument(where + ": special token '" + name + "' not in special_tokens");
    }
    for (const auto& id : ArrayMember(specials[name], "ids")) {
      (seen_sequence ? after : before).push_back(id.get<int32_t>());
    }
  }
  prefix->insert(prefix->begin(), before.begin(), before.end());
  suffix->insert(suffix->end(), after.begin(), after.end());
  return Status::Ok();
}

// Python's AutoTokenizer class: tokenizer_config.json's tokenizer_class, else from model_type.
std::string TokenizerClass(const json& config, const json& model_config) {
  std::string cls = config.value("tokenizer_class", std::string());
  if (!cls.empty()) return cls;
  const std::string type = model_config.value("model_type", std::string());
  static const std::set<std::string> kLlama = {"llama", "mistral", "mixtral", "phi3"};
  static const std::set<std::string> kGemma = {"gemma", "gemma2", "gemma3", "gemma3_text"};
  if (kLlama.count(type)) return "LlamaTokenizerFast";
  if (kGemma.count(type)) return "GemmaTokenizerFast";
  return std::string();
}

}  // namespace

namespace {

Status LoadPipeline(TokenizerJson* parsed, const std::string& file, Tokenizer::Impl* m) {
  const json& tj = parsed->root;
  const json& model = Member(tj, "model");
  if (!model.is_object()) return InvalidArgument(file + ": missing \"model\"");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") return Unimplemented(file + ": model type " + type + " is not supported");
  if (!parsed->has_vocab) return InvalidArgument(file + ": model.vocab must be an object");
  if (!parsed->has_merges && !Member(model, "merges").is_null()) {
    return InvalidArgument(file + ": model.merges must be an array");
  }
  LLM_ASSIGN_OR_RETURN(m->model,
                       BpeModel::FromJson(model, std::move(parsed->vocab), parsed->merges, file));
  parsed->merges.clear();
  parsed->merges.shrink_to_fit();
  LLM_ASSIGN_OR_RETURN(m->normalizer,
                       MakeNormalizer(Member(tj, "normalizer"), file + ": normalizer"));
  LLM_ASSIGN_OR_RETURN(m->pre_tokenizer,
                       MakePreTokenizer(Member(tj, "pre_tokenizer"), file + ": pre_tokenizer"));
  LLM_ASSIGN_OR_RETURN(m->decoders, MakeDecoderSpecs(Member(tj, "decoder"), file + ": decoder"));
  return ParsePostProcessor(Member(tj, "post_processor"), file + ": post_processor",
                            &m->post_prefix, &m->post_suffix);
}

// Next free id for a new added token (Rust AddedVocabulary::add_tokens).
int32_t NextId(const Tokenizer::Impl& m, const std::vector<AddedToken>& tokens) {
  int32_t next = m.model->max_id() + 1;
  for (const auto& t : tokens) next = std::max(next, t.id + 1);
  return next;
}

// Added tokens of tokenizer.json, plus what Python's PreTrainedTokenizerFast adds from
// tokenizer_config.json: added_tokens_decoder entries that differ, and special tokens
// (bos/eos/unk/pad/additional_special_tokens) that are not added tokens yet.
Status LoadAddedTokens(const json& tj, const json& config, const std::string& file,
                       Tokenizer::Impl* m) {
  std::vector<AddedToken> tokens;
  for (const auto& j : ArrayMember(tj, "added_tokens")) {
    LLM_ASSIGN_OR_RETURN(AddedToken t, ParseAddedToken(j, file + ": added_tokens"));
    if (t.id < 0) return InvalidArgument(file + ": added token '" + t.content + "' has no id");
    tokens.push_back(std::move(t));
  }
  std::unordered_map<std::string, size_t> index;  // content -> position in tokens
  for (size_t i = 0; i < tokens.size(); ++i) index.emplace(tokens[i].content, i);
  const auto find = [&](const std::string& content) -> AddedToken* {
    const auto it = index.find(content);
    return it == index.end() ? nullptr : &tokens[it->second];
  };
  const auto append = [&](AddedToken t) {
    index.emplace(t.content, tokens.size());
    tokens.push_back(std::move(t));
  };
  const json& decoder = Member(config, "added_tokens_decoder");
  for (const auto& [key, value] : decoder.items()) {
    if (!decoder.is_object()) break;
    LLM_ASSIGN_OR_RETURN(AddedToken t, ParseAddedToken(value, "tokenizer_config.json"));
    if (AddedToken* existing = find(t.content)) {
      t.id = existing->id;
      *existing = t;
      continue;
    }
    const auto model_id = m->model->TokenToId(t.content);
    t.id = model_id ? *model_id : NextId(*m, tokens);
    append(std::move(t));
  }
  std::vector<std::string> specials;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    specials.push_back(SpecialTokenString(config, key));
  }
  for (const auto& s : ArrayMember(config, "additional_special_tokens")) {
    if (s.is_string()) specials.push_back(s.get<std::string>());
    if (s.is_object() && s.contains("content")) specials.push_back(s["content"].get<std::string>());
  }
  for (const std::string& s : specials) {
    if (s.empty() || find(s) != nullptr) continue;
    AddedToken t;
    t.content = s;
    t.special = true;
    t.normalized = false;
    const auto model_id = m->model->TokenToId(s);
    t.id = model_id ? *model_id : NextId(*m, tokens);
    append(std::move(t));
  }
  for (const auto& t : tokens) {
    if (t.special) m->special_contents.insert(t.content);
  }
  m->added.Build(std::move(tokens), m->normalizer.get());
  return Status::Ok();
}

std::optional<int32_t> IdFromModelConfig(const json& model_config, const char* key) {
  const auto it = model_config.find(key);
  if (it == model_config.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int32_t>();
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    return (*it)[0].get<int32_t>();
  }
  return std::nullopt;
}

void ApplyConfig(const json& config, const json& model_config, const Tokenizer& tok,
                 Tokenizer::Impl* m) {
  m->bos_token = SpecialTokenString(config, "bos_token");
  m->eos_token = SpecialTokenString(config, "eos_token");
  m->pad_token = SpecialTokenString(config, "pad_token");
  m->unk_token = SpecialTokenString(config, "unk_token");
  const auto ct = config.find("chat_template");
  if (ct != config.end() && ct->is_string()) m->chat_template = ct->get<std::string>();
  const auto cu = config.find("clean_up_tokenization_spaces");
  m->clean_up_spaces = cu != config.end() && cu->is_boolean() && cu->get<bool>();
  const auto lookup = [&](const std::string& token, const char* key) -> std::optional<int32_t> {
    if (!token.empty()) return tok.TokenToId(token);
    return IdFromModelConfig(model_config, key);
  };
  m->bos_id = lookup(m->bos_token, "bos_token_id");
  m->eos_id = lookup(m->eos_token, "eos_token_id");
  m->pad_id = lookup(m->pad_token, "pad_token_id");

  // LlamaTokenizerFast / GemmaTokenizerFast rebuild the post-processor from add_bos_token and
  // add_eos_token (defaults true / false) in __init__ (update_post_processor).
  static const std::set<std::string> kRebuild = {"LlamaTokenizer",     "LlamaTokenizerFast",
                                                 "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                                                 "GemmaTokenizer",     "GemmaTokenizerFast"};
  if (kRebuild.count(TokenizerClass(config, model_config)) == 0) return;
  const auto flag = [&](const char* key, bool dflt) {
    const auto it = config.find(key);
    return it != config.end() && it->is_boolean() ? it->get<bool>() : dflt;
  };
  const bool add_bos = flag("add_bos_token", true);
  const bool add_eos = flag("add_eos_token", false);
  m->post_prefix.clear();
  m->post_suffix.clear();
  if (add_bos && !m->bos_token.empty() && m->bos_id.has_value()) {
    m->post_prefix.push_back(m->bos_id.value_or(0));
  }
  if (add_eos && !m->eos_token.empty() && m->eos_id.has_value()) {
    m->post_suffix.push_back(m->eos_id.value_or(0));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromDir(const std::string& dir) {
  if (IsGgufPath(dir)) {
    LLM_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(dir));
    return FromGguf(*gguf);
  }
  const std::string file = dir + "/tokenizer.json";
  bool found = false;
  LLM_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  LLM_ASSIGN_OR_RETURN(TokenizerJson parsed, ParseTokenizerJson(text, file));
  text = std::string();
  LLM_ASSIGN_OR_RETURN(json config, ReadJson(dir + "/tokenizer_config.json", false, &found));
  if (!config.is_object()) config = json::object();
  LLM_ASSIGN_OR_RETURN(json model_config, ReadJson(dir + "/config.json", false, &found));
  if (!model_config.is_object()) model_config = json::object();
  return FromParsed(std::move(parsed), config, model_config, file);
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromParsed(TokenizerJson parsed, const json& config,
                                                           const json& model_config,
                                                           const std::string& file) {
  const json& tj = parsed.root;
  if (!tj.is_object()) return InvalidArgument(file + ": not a JSON object");
  auto impl = std::make_unique<Impl>();
  try {
    LLM_RETURN_IF_ERROR(LoadPipeline(&parsed, file, impl.get()));
    LLM_RETURN_IF_ERROR(LoadAddedTokens(tj, config, file, impl.get()));
    int32_t max_id = impl->model->max_id();
    for (const auto& t : impl->added.tokens()) max_id = std::max(max_id, t.id);
    impl->vocab_size = max_id + 1;
    Impl* raw = impl.get();
    std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(impl)));
    ApplyConfig(config, model_config, *tok, raw);
    return tok;
  } catch (const json::exception& e) {
    return InvalidArgument(file + ": unexpected value in tokenizer files: " + e.what());
  }
}

}  // namespace llm
