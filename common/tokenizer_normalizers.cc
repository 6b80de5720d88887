// Normalizers of tokenizer.json (see tokenizer_pipeline.h).
#include <nlohmann/json.hpp>

#include "common/tokenizer_pipeline.h"
#include "common/tokenizer_regex.h"
#include "common/unicode.h"
#include "common/utf8.h"

namespace llm {
namespace {

using nlohmann::json;

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string Normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& step : steps_) s = step->Normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::NormalForm form) : form_(form) {}
  std::string Normalize(std::string_view text) const override {
    return unicode::Normalize(text, form_);
  }

 private:
  unicode::NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override { return unicode::Lowercase(text); }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  std::string Normalize(std::string_view text) const override {
    if (text.empty()) return std::string();
    return prepend_ + std::string(text);
  }

 private:
  std::string prepend_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<TokRegex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  std::string Normalize(std::string_view text) const override {
    if (!regex_) return literal_.empty() ? std::string(text) : ReplaceAll(text, literal_, content_);
    std::string out;
    size_t prev = 0;
    for (const auto& [b, e] : regex_->FindAll(text)) {
      out.append(text.substr(prev, b - prev));
      out += content_;
      prev = e;
    }
    out.append(text.substr(prev));
    return out;
  }

 private:
  std::string literal_;
  std::unique_ptr<TokRegex> regex_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string_view text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t pos = begin;
        if (!unicode::IsWhiteSpace(utf8::Next(text, &pos))) break;
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!unicode::IsWhiteSpace(utf8::Next(text, &pos))) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

class ByteLevelNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    std::string out;
    for (const char c : text) utf8::Append(unicode::ByteToChar()[static_cast<uint8_t>(c)], &out);
    return out;
  }
};

class StripAccentsNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    std::string out;
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      const char32_t cp = utf8::Next(text, &pos);
      if (unicode::IsNonspacingMark(cp)) continue;  // Rust: is_combining_mark (Mn)
      out.append(text.substr(start, pos - start));
    }
    return out;
  }
};

StatusOr<std::string> PatternString(const json& j, const std::string& where, bool* is_regex) {
  const auto p = j.find("pattern");
  if (p == j.end() || !p->is_object()) return InvalidArgument(where + ": missing \"pattern\"");
  if (p->contains("String") && (*p)["String"].is_string()) {
    *is_regex = false;
    return (*p)["String"].get<std::string>();
  }
  if (p->contains("Regex") && (*p)["Regex"].is_string()) {
    *is_regex = true;
    return (*p)["Regex"].get<std::string>();
  }
  return InvalidArgument(where + ": \"pattern\" must hold \"String\" or \"Regex\"");
}

StatusOr<std::unique_ptr<Normalizer>> MakeReplace(const json& j, const std::string& where) {
  bool is_regex = false;
  LLM_ASSIGN_OR_RETURN(std::string pattern, PatternString(j, where, &is_regex));
  const std::string content = j.value("content", std::string());
  std::unique_ptr<TokRegex> regex;
  if (is_regex) {
    LLM_ASSIGN_OR_RETURN(regex, TokRegex::Compile(pattern, where));
    pattern.clear();
  }
  return std::unique_ptr<Normalizer>(
      new ReplaceNormalizer(std::move(pattern), std::move(regex), content));
}

}  // namespace

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  while (true) {
    const size_t hit = text.find(from, prev);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(prev, hit - prev));
    out.append(to);
    prev = hit + from.size();
  }
  out.append(text.substr(prev));
  return out;
}

StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const json& j, const std::string& where) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return InvalidArgument(where + ": normalizer without a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  const std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    const auto list = j.find("normalizers");
    if (list == j.end() || !list->is_array()) {
      return InvalidArgument(here + ": \"normalizers\" must be an array");
    }
    for (const auto& item : *list) {
      LLM_ASSIGN_OR_RETURN(auto step, MakeNormalizer(item, where));
      if (step) steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  if (type == "NFC")
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(unicode::NormalForm::kNFC));
  if (type == "NFD")
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(unicode::NormalForm::kNFD));
  if (type == "NFKC") {
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(unicode::NormalForm::kNFKC));
  }
  if (type == "NFKD") {
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(unicode::NormalForm::kNFKD));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "Prepend") {
    return std::unique_ptr<Normalizer>(new PrependNormalizer(j.value("prepend", std::string())));
  }
  if (type == "Replace") return MakeReplace(j, here);
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(
        new StripNormalizer(j.value("strip_left", true), j.value("strip_right", true)));
  }
  if (type == "ByteLevel") return std::unique_ptr<Normalizer>(new ByteLevelNormalizer());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  return Unimplemented(here + ": unsupported normalizer type");
}

}  // namespace llm
