// Pre-tokenizers of tokenizer.json (see tokenizer_pipeline.h).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/tokenizer_pipeline.h"
#include "common/tokenizer_regex.h"
#include "common/unicode.h"
#include "common/utf8.h"

namespace llm {
namespace {

using nlohmann::json;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool is_match;
};

// Covers the whole of a text of `size` bytes with the given matches (sorted, disjoint).
std::vector<Span> CoverWithMatches(size_t size, const std::vector<std::pair<size_t, size_t>>& m) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (const auto& [b, e] : m) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != size) spans.push_back({prev, size, false});
  return spans;
}

// NormalizedString::split: the spans to keep, in order.
std::vector<Span> ApplyBehaviorCopy(const std::vector<Span>& spans, Behavior behavior) {
  std::vector<Span> acc;
  bool prev_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      return acc;  // handled in place by ApplyBehavior
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) acc.push_back(s);
      }
      return acc;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (!acc.empty() && s.is_match == prev_match) {
          acc.back().end = s.end;
        } else {
          acc.push_back(s);
        }
        prev_match = s.is_match;
      }
      return acc;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (!acc.empty() && s.is_match && !prev_match) {
          acc.back().end = s.end;
        } else {
          acc.push_back(s);
        }
        prev_match = s.is_match;
      }
      return acc;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (!acc.empty() && it->is_match && !prev_match) {
          acc.back().begin = it->begin;
        } else {
          acc.push_back(*it);
        }
        prev_match = it->is_match;
      }
      std::reverse(acc.begin(), acc.end());
      return acc;
  }
  return acc;
}

void ApplyBehavior(std::vector<Span>* spans, Behavior behavior) {
  if (behavior == Behavior::kIsolated) return;
  *spans = ApplyBehaviorCopy(*spans, behavior);
}

// Splits every piece with `find` (returns matches of one piece) and `behavior`.
template <typename Find>
void SplitPieces(std::vector<PreToken>* pieces, Behavior behavior, bool invert, Find find) {
  std::vector<PreToken> out;
  out.reserve(pieces->size());
  for (PreToken& piece : *pieces) {
    std::vector<Span> spans = CoverWithMatches(piece.text.size(), find(piece.text));
    if (invert) {
      for (Span& s : spans) s.is_match = !s.is_match;
    }
    ApplyBehavior(&spans, behavior);
    for (const Span& s : spans) {
      if (s.end <= s.begin) continue;
      out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
    }
  }
  *pieces = std::move(out);
}

std::vector<std::pair<size_t, size_t>> FindLiteral(std::string_view text, std::string_view lit) {
  std::vector<std::pair<size_t, size_t>> m;
  if (lit.empty()) return m;
  for (size_t pos = text.find(lit); pos != std::string_view::npos; pos = text.find(lit, pos)) {
    m.emplace_back(pos, pos + lit.size());
    pos += lit.size();
  }
  return m;
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void PreTokenize(std::vector<PreToken>* pieces) const override {
    for (const auto& step : steps_) step->PreTokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string literal, std::unique_ptr<TokRegex> regex, Behavior behavior,
                    bool invert)
      : literal_(std::move(literal)),
        regex_(std::move(regex)),
        behavior_(behavior),
        invert_(invert) {}
  void PreTokenize(std::vector<PreToken>* pieces) const override {
    SplitPieces(pieces, behavior_, invert_, [this](std::string_view text) {
      return regex_ ? regex_->FindAll(text) : FindLiteral(text, literal_);
    });
  }

 private:
  std::string literal_;
  std::unique_ptr<TokRegex> regex_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<TokRegex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void PreTokenize(std::vector<PreToken>* pieces) const override {
    if (add_prefix_space_) {
      for (PreToken& p : *pieces) {
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, 1, ' ');
      }
    }
    if (regex_) {
      SplitPieces(pieces, Behavior::kIsolated, false,
                  [this](std::string_view text) { return regex_->FindAll(text); });
    }
    const auto& table = unicode::ByteToChar();
    for (PreToken& p : *pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (const char c : p.text) utf8::Append(table[static_cast<uint8_t>(c)], &mapped);
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<TokRegex> regex_;  // GPT-2 regex when use_regex
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void PreTokenize(std::vector<PreToken>* pieces) const override {
    for (PreToken& p : *pieces) {
      p.text = ReplaceAll(p.text, " ", replacement_);
      const bool starts = p.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts &&
          (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start))) {
        p.text.insert(0, replacement_);
      }
    }
    if (split_) {
      SplitPieces(pieces, Behavior::kMergedWithNext, false,
                  [this](std::string_view text) { return FindLiteral(text, replacement_); });
    }
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// Whitespace: keeps the matches of `\w+|[^\w\s]+`; WhitespaceSplit: drops whitespace runs.
class RegexKeepPreTokenizer : public PreTokenizer {
 public:
  RegexKeepPreTokenizer(std::unique_ptr<TokRegex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<PreToken>* pieces) const override {
    SplitPieces(pieces, behavior_, invert_,
                [this](std::string_view text) { return regex_->FindAll(text); });
  }

 private:
  std::unique_ptr<TokRegex> regex_;
  Behavior behavior_;
  bool invert_;
};

StatusOr<Behavior> ParseBehavior(const json& j, const std::string& where, Behavior dflt) {
  const auto it = j.find("behavior");
  if (it == j.end() || it->is_null()) return dflt;
  const std::string b = it->is_string() ? it->get<std::string>() : std::string();
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return InvalidArgument(where + ": unknown split behavior '" + b + "'");
}

std::unique_ptr<PreTokenizer> KeepRegex(std::unique_ptr<TokRegex> re, Behavior b, bool invert) {
  return std::unique_ptr<PreTokenizer>(new RegexKeepPreTokenizer(std::move(re), b, invert));
}

StatusOr<std::unique_ptr<PreTokenizer>> MakeSplit(const json& j, const std::string& where) {
  LLM_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(j, where, Behavior::kRemoved));
  const bool invert = j.value("invert", false);
  const auto p = j.find("pattern");
  if (p == j.end() || !p->is_object()) return InvalidArgument(where + ": missing \"pattern\"");
  if (p->contains("String") && (*p)["String"].is_string()) {
    return std::unique_ptr<PreTokenizer>(
        new SplitPreTokenizer((*p)["String"].get<std::string>(), nullptr, behavior, invert));
  }
  if (p->contains("Regex") && (*p)["Regex"].is_string()) {
    LLM_ASSIGN_OR_RETURN(auto re, TokRegex::Compile((*p)["Regex"].get<std::string>(), where));
    return std::unique_ptr<PreTokenizer>(
        new SplitPreTokenizer(std::string(), std::move(re), behavior, invert));
  }
  return InvalidArgument(where + ": \"pattern\" must hold \"String\" or \"Regex\"");
}

StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevel(const json& j, const std::string& where) {
  std::unique_ptr<TokRegex> re;
  if (j.value("use_regex", true)) {
    LLM_ASSIGN_OR_RETURN(re, TokRegex::Compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                                               "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
                                               where));
  }
  return std::unique_ptr<PreTokenizer>(
      new ByteLevelPreTokenizer(j.value("add_prefix_space", true), std::move(re)));
}

StatusOr<std::unique_ptr<PreTokenizer>> MakeMetaspace(const json& j, const std::string& where) {
  const std::string replacement = j.value("replacement", std::string("\xE2\x96\x81"));
  PrependScheme scheme =
      j.value("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
  if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
    const std::string s = j["prepend_scheme"].get<std::string>();
    if (s == "always") {
      scheme = PrependScheme::kAlways;
    } else if (s == "first") {
      scheme = PrependScheme::kFirst;
    } else if (s == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return InvalidArgument(where + ": unknown prepend_scheme '" + s + "'");
    }
  }
  return std::unique_ptr<PreTokenizer>(
      new MetaspacePreTokenizer(replacement, scheme, j.value("split", true)));
}

StatusOr<std::unique_ptr<PreTokenizer>> MakeSimple(const std::string& type, const json& j,
                                                   const std::string& where) {
  if (type == "Whitespace") {
    LLM_ASSIGN_OR_RETURN(auto re, TokRegex::Compile("\\w+|[^\\w\\s]+", where));
    return KeepRegex(std::move(re), Behavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") {
    LLM_ASSIGN_OR_RETURN(auto re, TokRegex::Compile("\\s+", where));
    return KeepRegex(std::move(re), Behavior::kRemoved, false);
  }
  if (type == "Digits") {
    const bool individual = j.value("individual_digits", false);
    LLM_ASSIGN_OR_RETURN(auto re, TokRegex::Compile(individual ? "\\p{N}" : "\\p{N}+", where));
    return KeepRegex(std::move(re), Behavior::kIsolated, false);
  }
  if (type == "Punctuation") {
    LLM_ASSIGN_OR_RETURN(Behavior b, ParseBehavior(j, where, Behavior::kIsolated));
    LLM_ASSIGN_OR_RETURN(auto re, TokRegex::Compile("[\\p{P}!-/:-@\\[-`{-~]", where));
    return KeepRegex(std::move(re), b, false);
  }
  return Unimplemented(where + ": unsupported pre_tokenizer type");
}

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return InvalidArgument(where + ": pre_tokenizer without a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  const std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    const auto list = j.find("pretokenizers");
    if (list == j.end() || !list->is_array()) {
      return InvalidArgument(here + ": \"pretokenizers\" must be an array");
    }
    for (const auto& item : *list) {
      LLM_ASSIGN_OR_RETURN(auto step, MakePreTokenizer(item, where));
      if (step) steps.push_back(std::move(step));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
  }
  if (type == "Split") return MakeSplit(j, here);
  if (type == "ByteLevel") return MakeByteLevel(j, here);
  if (type == "Metaspace") return MakeMetaspace(j, here);
  return MakeSimple(type, j, here);
}

}  // namespace llm
