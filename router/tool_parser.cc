#include "router/tool_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace llm::router {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kHermesStart = "<tool_call>";
constexpr std::string_view kHermesEnd = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralStart = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

size_t SkipSpace(std::string_view s, size_t pos) {
  while (pos < s.size() && IsSpace(s[pos])) ++pos;
  return pos;
}

bool StartsAt(std::string_view s, size_t pos, std::string_view what) {
  return pos <= s.size() && s.substr(pos, what.size()) == what;
}

// The end (one past) of the JSON object or array that opens at `pos`, by bracket matching
// outside strings; npos when it does not close.
size_t JsonValueEnd(std::string_view s, size_t pos) {
  if (pos >= s.size() || (s[pos] != '{' && s[pos] != '[')) return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<ojson> ParseJson(std::string_view s) {
  ojson j = ojson::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string Dump(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// {"name": "...", "arguments"|"parameters": {...}} → a call; arguments may be absent ({}) or a
// JSON string holding an object.
std::optional<ParsedToolCall> CallFromObject(const ojson& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ParsedToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = Dump(*args);
  } else if (args->is_string()) {
    auto inner = ParseJson(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = Dump(*inner);
  } else {
    return std::nullopt;
  }
  return call;
}

// Where the calls start; npos: no call (yet). A start marker is searched from `from` (the
// streamer knows none starts before).
size_t FindStart(ToolParserKind kind, std::string_view text, size_t from = 0) {
  switch (kind) {
    case ToolParserKind::kHermes:
      return text.find(kHermesStart, from);
    case ToolParserKind::kMistral:
      return text.find(kMistralStart, from);
    case ToolParserKind::kDeepSeekV3:
      return text.find(kDsCallsBegin, from);
    case ToolParserKind::kLlama3Json: {
      const size_t first = SkipSpace(text, 0);
      if (first < text.size() && text[first] == '{') return first;
      return text.find(kPythonTag, from);
    }
    case ToolParserKind::kJsonArray: {
      const size_t first = SkipSpace(text, 0);
      if (first < text.size() && text[first] == '[') return first;
      break;
    }
    case ToolParserKind::kNone:
      break;
  }
  return std::string_view::npos;
}

// How many bytes at the end of `text` (which holds no start) could begin one.
size_t HeldBack(ToolParserKind kind, std::string_view text) {
  std::string_view marker;
  switch (kind) {
    case ToolParserKind::kHermes:
      marker = kHermesStart;
      break;
    case ToolParserKind::kMistral:
      marker = kMistralStart;
      break;
    case ToolParserKind::kDeepSeekV3:
      marker = kDsCallsBegin;
      break;
    case ToolParserKind::kLlama3Json:
      if (SkipSpace(text, 0) == text.size()) return text.size();  // a '{' may follow
      marker = kPythonTag;
      break;
    case ToolParserKind::kJsonArray:
      return SkipSpace(text, 0) == text.size() ? text.size() : 0;  // a '[' may follow
    case ToolParserKind::kNone:
      return 0;
  }
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

bool ParseHermes(std::string_view s, std::vector<ParsedToolCall>* calls) {
  size_t pos = 0;
  while (true) {
    pos = SkipSpace(s, pos);
    if (pos == s.size()) return !calls->empty();
    if (!StartsAt(s, pos, kHermesStart)) return !calls->empty();  // trailing text: ignored
    const size_t body = pos + kHermesStart.size();
    const size_t end = s.find(kHermesEnd, body);
    if (end == std::string_view::npos) return false;
    auto j = ParseJson(s.substr(body, end - body));
    if (!j) return false;
    auto call = CallFromObject(*j);
    if (!call) return false;
    calls->push_back(std::move(*call));
    pos = end + kHermesEnd.size();
  }
}

bool ParseLlama3(std::string_view s, std::vector<ParsedToolCall>* calls) {
  size_t pos = SkipSpace(s, 0);
  if (StartsAt(s, pos, kPythonTag)) pos = SkipSpace(s, pos + kPythonTag.size());
  while (true) {
    const size_t end = JsonValueEnd(s, pos);
    if (end == std::string_view::npos || s[pos] != '{') return false;
    auto j = ParseJson(s.substr(pos, end - pos));
    if (!j) return false;
    auto call = CallFromObject(*j);
    if (!call) return false;
    calls->push_back(std::move(*call));
    pos = SkipSpace(s, end);
    if (pos == s.size()) return true;
    if (s[pos] != ';') return false;
    pos = SkipSpace(s, pos + 1);
    if (pos == s.size()) return true;
  }
}

// [{...}, ...] and nothing but space after it.
bool ParseJsonArray(std::string_view s, std::vector<ParsedToolCall>* calls) {
  const size_t end = JsonValueEnd(s, 0);
  if (end == std::string_view::npos || SkipSpace(s, end) != s.size()) return false;
  auto j = ParseJson(s.substr(0, end));
  if (!j || !j->is_array() || j->empty()) return false;
  for (const ojson& o : *j) {
    auto call = CallFromObject(o);
    if (!call) return false;
    calls->push_back(std::move(*call));
  }
  return true;
}

bool ParseMistral(std::string_view s, std::vector<ParsedToolCall>* calls) {
  size_t pos = 0;
  while (true) {
    pos = SkipSpace(s, pos);
    if (pos == s.size()) return !calls->empty();
    if (!StartsAt(s, pos, kMistralStart)) return !calls->empty();
    pos = SkipSpace(s, pos + kMistralStart.size());
    if (pos < s.size() && s[pos] == '[') {  // [TOOL_CALLS][{...}, ...]
      const size_t end = JsonValueEnd(s, pos);
      if (end == std::string_view::npos) return false;
      auto j = ParseJson(s.substr(pos, end - pos));
      if (!j || !j->is_array() || j->empty()) return false;
      for (const ojson& o : *j) {
        auto call = CallFromObject(o);
        if (!call) return false;
        calls->push_back(std::move(*call));
      }
      pos = end;
    } else {  // [TOOL_CALLS]name[ARGS]{...} (the v11 tokenizer's form)
      const size_t args = s.find(kMistralArgs, pos);
      if (args == std::string_view::npos || args == pos) return false;
      const size_t obj = args + kMistralArgs.size();
      const size_t end = JsonValueEnd(s, obj);
      if (end == std::string_view::npos) return false;
      auto j = ParseJson(s.substr(obj, end - obj));
      if (!j || !j->is_object()) return false;
      calls->push_back({std::string(s.substr(pos, args - pos)), Dump(*j)});
      pos = end;
    }
  }
}

bool ParseDeepSeekV3(std::string_view s, std::vector<ParsedToolCall>* calls) {
  size_t pos = kDsCallsBegin.size();
  while (true) {
    pos = SkipSpace(s, pos);
    if (pos == s.size() || StartsAt(s, pos, kDsCallsEnd)) return !calls->empty();
    if (!StartsAt(s, pos, kDsCallBegin)) return false;
    const size_t sep = s.find(kDsSep, pos);
    if (sep == std::string_view::npos) return false;
    const size_t name_at = sep + kDsSep.size();
    const size_t nl = s.find('\n', name_at);
    if (nl == std::string_view::npos || nl == name_at) return false;
    std::string name(s.substr(name_at, nl - name_at));
    pos = nl + 1;
    if (StartsAt(s, pos, "```json")) pos += 7;
    pos = SkipSpace(s, pos);
    const size_t end = JsonValueEnd(s, pos);
    if (end == std::string_view::npos) return false;
    auto j = ParseJson(s.substr(pos, end - pos));
    if (!j || !j->is_object()) return false;
    pos = SkipSpace(s, end);
    if (StartsAt(s, pos, "```")) pos = SkipSpace(s, pos + 3);
    if (!StartsAt(s, pos, kDsCallEnd)) return false;
    pos += kDsCallEnd.size();
    calls->push_back({std::move(name), Dump(*j)});
  }
}

}  // namespace

std::optional<ToolParserKind> ToolParserFromName(std::string_view name) {
  if (name == "none") return ToolParserKind::kNone;
  if (name == "hermes") return ToolParserKind::kHermes;
  if (name == "llama3_json") return ToolParserKind::kLlama3Json;
  if (name == "mistral") return ToolParserKind::kMistral;
  if (name == "deepseek_v3") return ToolParserKind::kDeepSeekV3;
  if (name == "json_array") return ToolParserKind::kJsonArray;
  return std::nullopt;
}

const char* ToolParserName(ToolParserKind kind) {
  switch (kind) {
    case ToolParserKind::kHermes:
      return "hermes";
    case ToolParserKind::kLlama3Json:
      return "llama3_json";
    case ToolParserKind::kMistral:
      return "mistral";
    case ToolParserKind::kDeepSeekV3:
      return "deepseek_v3";
    case ToolParserKind::kJsonArray:
      return "json_array";
    case ToolParserKind::kNone:
      break;
  }
  return "none";
}

ToolParserKind DetectToolParser(std::string_view t) {
  if (t.find(kHermesStart) != std::string_view::npos) return ToolParserKind::kHermes;
  if (t.find(kDsCallsBegin) != std::string_view::npos) return ToolParserKind::kDeepSeekV3;
  if (t.find(kMistralStart) != std::string_view::npos) return ToolParserKind::kMistral;
  if (t.find(kPythonTag) != std::string_view::npos ||
      t.find("\"parameters\": ") != std::string_view::npos) {
    return ToolParserKind::kLlama3Json;
  }
  return ToolParserKind::kNone;
}

ToolParseResult ParseToolCalls(ToolParserKind kind, std::string_view text) {
  ToolParseResult r;
  const size_t start = FindStart(kind, text);
  if (start != std::string_view::npos) {
    const std::string_view rest = text.substr(start);
    bool ok = false;
    switch (kind) {
      case ToolParserKind::kHermes:
        ok = ParseHermes(rest, &r.calls);
        break;
      case ToolParserKind::kLlama3Json:
        ok = ParseLlama3(rest, &r.calls);
        break;
      case ToolParserKind::kMistral:
        ok = ParseMistral(rest, &r.calls);
        break;
      case ToolParserKind::kDeepSeekV3:
        ok = ParseDeepSeekV3(rest, &r.calls);
        break;
      case ToolParserKind::kJsonArray:
        ok = ParseJsonArray(rest, &r.calls);
        break;
      case ToolParserKind::kNone:
        break;
    }
    if (ok) {
      r.content = std::string(text.substr(0, start));
      return r;
    }
    r.calls.clear();
  }
  r.content = std::string(text);
  return r;
}

namespace {

// Incremental compact re-serialisation of one JSON value fed byte by byte: the output equals
// nlohmann's dump (indent -1, ensure_ascii false) of the parsed value, for values without
// duplicate object keys. Whitespace is dropped, strings stream as their bytes come (escapes
// normalised: \/ → /, \uXXXX decoded unless a control character), numbers and literals go out
// once complete (a number ends at the byte after it, which is then not consumed).
class JsonCanon {
 public:
  enum class Step { kMore, kDone, kDoneBefore, kBad };

  Step Feed(char c, std::string* out) {
    if (bad_) return Step::kBad;
    const Step step = FeedImpl(c, out);
    if (step == Step::kBad) bad_ = true;
    return step;
  }
  // The value opened with '{' (what arguments must be) — known after the first byte.
  bool started() const { return started_; }
  char first() const { return first_; }

 private:
  enum class Expect { kValue, kValueOrClose, kKeyOrClose, kKey, kColon, kCommaOrClose };
  enum class Token { kNone, kString, kNumber, kLiteral };

  // A value ended: kDone at the top level.
  Step ValueEnded() {
    if (stack_.empty()) return Step::kDone;
    expect_ = Expect::kCommaOrClose;
    return Step::kMore;
  }

  static void AppendCodepoint(uint32_t cp, std::string* out) {
    switch (cp) {
      case 0x08:
        *out += "\\b";
        return;
      case 0x09:
        *out += "\\t";
        return;
      case 0x0A:
        *out += "\\n";
        return;
      case 0x0C:
        *out += "\\f";
        return;
      case 0x0D:
        *out += "\\r";
        return;
      case 0x22:
        *out += "\\\"";
        return;
      case 0x5C:
        *out += "\\\\";
        return;
      default:
        break;
    }
    if (cp < 0x20) {
      static const char* kHex = "0123456789abcdef";
      *out += "\\u00";
      *out += kHex[cp >> 4];
      *out += kHex[cp & 15];
    } else if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  Step FeedString(char c, std::string* out) {
    const auto u = static_cast<unsigned char>(c);
    if (escape_ == 0) {
      if (c == '\\') {
        escape_ = 1;
        return Step::kMore;
      }
      if (high_surrogate_ != 0 || u < 0x20) return Step::kBad;
      if (c != '"') {
        *out += c;
        return Step::kMore;
      }
      *out += '"';
      token_ = Token::kNone;
      if (string_is_key_) {
        expect_ = Expect::kColon;
        return Step::kMore;
      }
      return ValueEnded();
    }
    if (escape_ == 1) {
      escape_ = 0;
      if (c == 'u') {
        escape_ = 2;
        buf_.clear();
        return Step::kMore;
      }
      if (high_surrogate_ != 0) return Step::kBad;
      switch (c) {
        case '"':
          *out += "\\\"";
          break;
        case '\\':
          *out += "\\\\";
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += "\\b";
          break;
        case 'f':
          *out += "\\f";
          break;
        case 'n':
          *out += "\\n";
          break;
        case 'r':
          *out += "\\r";
          break;
        case 't':
          *out += "\\t";
          break;
        default:
          return Step::kBad;
      }
      return Step::kMore;
    }
    // \uXXXX
    if (!std::isxdigit(u)) return Step::kBad;
    buf_ += c;
    if (buf_.size() < 4) return Step::kMore;
    escape_ = 0;
    const auto cp = static_cast<uint32_t>(std::stoul(buf_, nullptr, 16));
    if (high_surrogate_ != 0) {
      if (cp < 0xDC00 || cp > 0xDFFF) return Step::kBad;
      AppendCodepoint(0x10000 + ((high_surrogate_ - 0xD800) << 10) + (cp - 0xDC00), out);
      high_surrogate_ = 0;
    } else if (cp >= 0xD800 && cp <= 0xDBFF) {
      high_surrogate_ = cp;
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return Step::kBad;
    } else {
      AppendCodepoint(cp, out);
    }
    return Step::kMore;
  }

  Step Open(char c, std::string* out) {
    stack_.push_back(c);
    *out += c;
    expect_ = c == '{' ? Expect::kKeyOrClose : Expect::kValueOrClose;
    return Step::kMore;
  }

  Step Close(char c, std::string* out) {
    if (stack_.empty() || (c == '}') != (stack_.back() == '{')) return Step::kBad;
    stack_.pop_back();
    *out += c;
    return ValueEnded();
  }

  Step FeedImpl(char c, std::string* out) {
    if (!started_ && !IsSpace(c)) {
      started_ = true;
      first_ = c;
    }
    switch (token_) {
      case Token::kString:
        return FeedString(c, out);
      case Token::kNumber:
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
          buf_ += c;
          return Step::kMore;
        } else {
          auto j = ParseJson(buf_);
          if (!j || !j->is_number()) return Step::kBad;
          *out += Dump(*j);
          token_ = Token::kNone;
          if (ValueEnded() == Step::kDone) return Step::kDoneBefore;
        }
        break;  // c is the byte after the number
      case Token::kLiteral: {
        buf_ += c;
        for (std::string_view word : {"true", "false", "null"}) {
          if (buf_ == word) {
            *out += buf_;
            token_ = Token::kNone;
            return ValueEnded();
          }
          if (word.starts_with(buf_)) return Step::kMore;
        }
        return Step::kBad;
      }
      case Token::kNone:
        break;
    }
    if (IsSpace(c)) return Step::kMore;
    switch (expect_) {
      case Expect::kValueOrClose:
        if (c == ']') return Close(c, out);
        [[fallthrough]];
      case Expect::kValue:
        if (c == '{' || c == '[') return Open(c, out);
        if (c == '"') {
          token_ = Token::kString;
          string_is_key_ = false;
          *out += c;
          return Step::kMore;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
          token_ = Token::kNumber;
          buf_.assign(1, c);
          return Step::kMore;
        }
        if (c == 't' || c == 'f' || c == 'n') {
          token_ = Token::kLiteral;
          buf_.assign(1, c);
          return Step::kMore;
        }
        return Step::kBad;
      case Expect::kKeyOrClose:
        if (c == '}') return Close(c, out);
        [[fallthrough]];
      case Expect::kKey:
        if (c != '"') return Step::kBad;
        token_ = Token::kString;
        string_is_key_ = true;
        *out += c;
        return Step::kMore;
      case Expect::kColon:
        if (c != ':') return Step::kBad;
        *out += c;
        expect_ = Expect::kValue;
        return Step::kMore;
      case Expect::kCommaOrClose:
        if (c == '}' || c == ']') return Close(c, out);
        if (c != ',' || stack_.empty()) return Step::kBad;
        *out += c;
        expect_ = stack_.back() == '{' ? Expect::kKey : Expect::kValue;
        return Step::kMore;
    }
    return Step::kBad;
  }

  std::string stack_;  // '{' / '[' of the open containers (bounded by the text)
  Expect expect_ = Expect::kValue;
  Token token_ = Token::kNone;
  bool string_is_key_ = false;
  int escape_ = 0;  // 1: after '\', 2: in \uXXXX
  uint32_t high_surrogate_ = 0;
  std::string buf_;  // a number's or literal's text, \u digits
  bool bad_ = false;
  bool started_ = false;
  char first_ = 0;
};

// The length of the longest prefix of `s` that does not end inside a UTF-8 sequence.
size_t Utf8Complete(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t len = 1;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
    }
    return len > back ? n - back : n;
  }
  return n;
}

enum class Match { kYes, kNo, kMore };

Match MatchAt(std::string_view s, size_t pos, std::string_view m) {
  const size_t avail = s.size() - pos;
  if (avail >= m.size()) return s.compare(pos, m.size(), m) == 0 ? Match::kYes : Match::kNo;
  return s.compare(pos, avail, m.substr(0, avail)) == 0 ? Match::kMore : Match::kNo;
}

// A call object being read.
struct CallObject {
  enum class S { kOpen, kKeyOrClose, kKey, kInKey, kColon, kValue, kCommaOrClose };
  enum class V { kKey, kName, kArgs, kArgsString, kArgsNull, kOther };
  S s = S::kOpen;
  V v = V::kKey;
  JsonCanon canon;
  std::string buf;  // the canonical key / name / string arguments
  bool in_value = false;
  bool have_name = false;
  int args_key = 0;          // 1: "parameters" seen, 2: "arguments" seen
  std::string pending_args;  // arguments before the name
};

struct StreamedCall {
  std::string args;  // canonical arguments so far
  size_t sent = 0;   // bytes of args sent
  bool complete = false;
};

}  // namespace

struct ToolCallStreamer::State {
  // Where the scanner is in the text. kObject: inside a call object ({"name", "arguments"}),
  // then `after_object`. kArgsObject: a name is known (mistral [ARGS], deepseek), its arguments
  // object follows, then `after_object`.
  enum class Phase {
    kContent,
    kObject,
    kArgsObject,
    kHermesOpen,
    kHermesClose,
    kHermesNext,
    kLlamaOpen,
    kLlamaNext,
    kLlamaAfterSemicolon,
    kMistralOpen,
    kMistralForm,
    kMistralName,
    kMistralNext,
    kDsOpen,
    kDsNext,
    kDsSep,
    kDsName,
    kDsFence,
    kDsBody,
    kDsAfterBody,
    kDsClose,
    kArrayOpen,
    kArrayElement,
    kArrayNext,
    kDone,     // the calls are over; what follows is ignored by the parser too
    kStopped,  // the scanner cannot follow (malformed, or too many calls): Finish decides
  };

  using Object = CallObject;
  using Call = StreamedCall;

  explicit State(ToolParserKind k) : kind(k) {}

  ToolParserKind kind;
  std::string text;
  size_t emitted = 0;  // content bytes sent
  size_t pos = 0;      // scan position
  Phase phase = Phase::kContent;
  Phase after_object = Phase::kStopped;
  std::optional<Object> obj;
  std::optional<JsonCanon> args_canon;  // kArgsObject
  std::string name;                     // mistral / deepseek name being read
  size_t sep_from = 0;                  // deepseek: where to look for the next <｜tool▁sep｜>
  std::vector<Call> calls;
  bool parsed_ok = false;
  bool finished = false;
  ToolStreamEvents* ev = nullptr;

  void StartCall(std::string call_name) {
    if (!calls.empty()) FlushArgs(true);
    calls.emplace_back();
    ev->calls.push_back({static_cast<int>(calls.size()) - 1, std::move(call_name), ""});
  }

  // Sends the arguments not sent yet (up to a UTF-8 boundary unless `all`).
  void FlushArgs(bool all) {
    if (calls.empty()) return;
    Call& c = calls.back();
    const size_t upto = all ? c.args.size() : Utf8Complete(c.args);
    if (upto <= c.sent) return;
    const int index = static_cast<int>(calls.size()) - 1;
    std::string frag = c.args.substr(c.sent, upto - c.sent);
    c.sent = upto;
    if (!ev->calls.empty() && ev->calls.back().index == index && ev->calls.back().name.empty()) {
      ev->calls.back().arguments += frag;
    } else {
      ev->calls.push_back({index, "", std::move(frag)});
    }
  }

  void AddArgs(const std::string& s) {
    if (obj && !obj->have_name) {
      obj->pending_args += s;
    } else if (!calls.empty()) {
      calls.back().args += s;
    }
  }

  bool Stop() {
    phase = Phase::kStopped;
    obj.reset();
    args_canon.reset();
    return false;
  }

  // Skips whitespace; false when the text ends.
  bool SkipWs() {
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
    return pos < text.size();
  }

  void BeginObject(Phase after) {
    if (calls.size() >= kMaxStreamedToolCalls) {
      Stop();
      return;
    }
    obj.emplace();
    phase = Phase::kObject;
    after_object = after;
  }

  // The call's name is in `name`.
  void BeginArgsObject(Phase after) {
    if (calls.size() >= kMaxStreamedToolCalls) {
      Stop();
      return;
    }
    args_canon.emplace();
    phase = Phase::kArgsObject;
    after_object = after;
  }

  // The value of the key just read ends.
  bool EndValue() {
    Object& o = *obj;
    switch (o.v) {
      case Object::V::kName: {
        auto j = ParseJson(o.buf);
        if (!j || !j->is_string() || j->get_ref<const std::string&>().empty()) return Stop();
        o.have_name = true;
        StartCall(j->get<std::string>());
        calls.back().args = std::move(o.pending_args);
        o.pending_args.clear();
        break;
      }
      case Object::V::kArgsString: {
        auto j = ParseJson(o.buf);
        if (!j || !j->is_string()) return Stop();
        auto inner = ParseJson(j->get_ref<const std::string&>());
        if (!inner || !inner->is_object()) return Stop();
        AddArgs(Dump(*inner));
        break;
      }
      case Object::V::kArgsNull:
        AddArgs("{}");
        break;
      default:
        break;
    }
    o.in_value = false;
    o.s = Object::S::kCommaOrClose;
    return true;
  }

  // One byte of a call object; false: stopped.
  bool FeedObject(char c) {
    Object& o = *obj;
    if (o.in_value) {
      std::string out;
      JsonCanon::Step step = o.canon.Feed(c, &out);
      if (o.v == Object::V::kArgs && o.canon.started() && o.canon.first() != '{') {
        // Not an object: a JSON string holding one, null, or malformed.
        o.v = o.canon.first() == '"'   ? Object::V::kArgsString
              : o.canon.first() == 'n' ? Object::V::kArgsNull
                                       : Object::V::kOther;
        if (o.v == Object::V::kOther) return Stop();
      }
      if (o.v == Object::V::kArgs) {
        AddArgs(out);
      } else if (o.v != Object::V::kOther) {
        o.buf += out;
      }
      if (step == JsonCanon::Step::kBad) return Stop();
      if (step == JsonCanon::Step::kMore) return true;
      if (!EndValue()) return false;
      if (step == JsonCanon::Step::kDone) return true;
      // kDoneBefore: c follows the value
    }
    if (o.s == Object::S::kInKey) {
      std::string out;
      const JsonCanon::Step step = o.canon.Feed(c, &out);
      o.buf += out;
      if (step == JsonCanon::Step::kBad) return Stop();
      if (step == JsonCanon::Step::kMore) return true;
      o.s = Object::S::kColon;
      o.v = o.buf == "\"name\""         ? Object::V::kName
            : o.buf == "\"arguments\""  ? Object::V::kArgs
            : o.buf == "\"parameters\"" ? Object::V::kArgs
                                        : Object::V::kOther;
      if (o.v == Object::V::kName && o.have_name) return Stop();  // duplicate key
      if (o.v == Object::V::kArgs) {
        // "arguments" wins over "parameters" in ParseToolCalls: a second one is not followed.
        if (o.args_key != 0) return Stop();
        o.args_key = o.buf == "\"arguments\"" ? 2 : 1;
      }
      return true;
    }
    if (IsSpace(c)) return true;
    switch (o.s) {
      case Object::S::kOpen:
        if (c != '{') return Stop();
        o.s = Object::S::kKeyOrClose;
        return true;
      case Object::S::kKeyOrClose:
        if (c == '}') return EndObject();
        [[fallthrough]];
      case Object::S::kKey:
        if (c != '"') return Stop();
        o.s = Object::S::kInKey;
        o.canon = JsonCanon();
        o.buf.clear();
        return FeedObject(c);
      case Object::S::kColon:
        if (c != ':') return Stop();
        o.s = Object::S::kValue;
        o.in_value = true;
        o.canon = JsonCanon();
        o.buf.clear();
        return true;
      case Object::S::kCommaOrClose:
        if (c == '}') return EndObject();
        if (c != ',') return Stop();
        o.s = Object::S::kKey;
        return true;
      case Object::S::kInKey:
      case Object::S::kValue:
        break;
    }
    return Stop();
  }

  bool EndObject() {
    Object& o = *obj;
    if (!o.have_name) return Stop();
    if (o.args_key == 0) calls.back().args += "{}";
    calls.back().complete = true;
    FlushArgs(true);
    obj.reset();
    phase = after_object;
    return true;
  }

  // Advances through the text as far as it is decided.
  void Scan() {
    while (pos < text.size() && Step()) {
    }
  }

  // One step; false: more text is needed (or the scanner stopped).
  bool Step() {
    const std::string_view t = text;
    switch (phase) {
      case Phase::kContent:
      case Phase::kDone:
      case Phase::kStopped:
        return false;
      case Phase::kObject:
        return FeedObject(t[pos++]);
      case Phase::kArgsObject: {
        std::string out;
        if (!args_canon->started()) {
          // The object opens right here (mistral: right after [ARGS]); the call starts now.
          if (t[pos] != '{') return Stop();
          StartCall(std::move(name));
          name.clear();
        }
        const JsonCanon::Step step = args_canon->Feed(t[pos++], &out);
        calls.back().args += out;
        if (step == JsonCanon::Step::kBad) return Stop();
        if (step == JsonCanon::Step::kDone) {
          calls.back().complete = true;
          FlushArgs(true);
          args_canon.reset();
          phase = after_object;
        }
        return true;
      }
      // hermes: <tool_call> {object} </tool_call>, repeated with space between.
      case Phase::kHermesOpen:
        return Expect(kHermesStart, Phase::kObject, Phase::kHermesClose);
      case Phase::kHermesClose:
        if (!SkipWs()) return false;
        return Expect(kHermesEnd, Phase::kHermesNext, Phase::kStopped);
      case Phase::kHermesNext:
        if (!SkipWs()) return false;
        switch (MatchAt(t, pos, kHermesStart)) {
          case Match::kYes:
            phase = Phase::kHermesOpen;
            return true;
          case Match::kNo:
            phase = Phase::kDone;
            return false;
          case Match::kMore:
            return false;
        }
        return false;
      // llama3_json: [<|python_tag|>] {object} (; {object})* [;]
      case Phase::kLlamaOpen:
        if (!SkipWs()) return false;
        switch (MatchAt(t, pos, kPythonTag)) {
          case Match::kYes:
            pos += kPythonTag.size();
            [[fallthrough]];
          case Match::kNo:
            phase = Phase::kLlamaAfterSemicolon;
            return true;
          case Match::kMore:
            return false;
        }
        return false;
      case Phase::kLlamaAfterSemicolon:
        if (!SkipWs()) return false;
        BeginObject(Phase::kLlamaNext);
        return phase == Phase::kObject;
      case Phase::kLlamaNext:
        if (!SkipWs()) return false;
        if (t[pos] != ';') return Stop();
        ++pos;
        phase = Phase::kLlamaAfterSemicolon;
        return true;
      // mistral: [TOOL_CALLS] [{object}, ...] or [TOOL_CALLS]name[ARGS]{...}, repeated.
      case Phase::kMistralOpen:
        if (MatchAt(t, pos, kMistralStart) == Match::kMore) return false;
        if (MatchAt(t, pos, kMistralStart) == Match::kNo) return Stop();
        pos += kMistralStart.size();
        phase = Phase::kMistralForm;
        return true;
      case Phase::kMistralForm:
        if (!SkipWs()) return false;
        if (t[pos] == '[') {
          ++pos;
          phase = Phase::kArrayElement;
          after_array_ = Phase::kMistralNext;
        } else {
          name.clear();
          phase = Phase::kMistralName;
        }
        return true;
      case Phase::kMistralName:
        switch (MatchAt(t, pos, kMistralArgs)) {
          case Match::kYes:
            if (name.empty()) return Stop();
            pos += kMistralArgs.size();
            BeginArgsObject(Phase::kMistralNext);
            return phase == Phase::kArgsObject;
          case Match::kNo:
            name += t[pos++];
            return true;
          case Match::kMore:
            return false;
        }
        return false;
      case Phase::kMistralNext:
        if (!SkipWs()) return false;
        switch (MatchAt(t, pos, kMistralStart)) {
          case Match::kYes:
            phase = Phase::kMistralOpen;
            return true;
          case Match::kNo:
            phase = Phase::kDone;
            return false;
          case Match::kMore:
            return false;
        }
        return false;
      // deepseek_v3: calls-begin (call-begin ... sep NAME\n [```json] {...} [```] call-end)*
      // [calls-end]
      case Phase::kDsOpen:
        if (MatchAt(t, pos, kDsCallsBegin) != Match::kYes) return false;  // found by FindStart
        pos += kDsCallsBegin.size();
        phase = Phase::kDsNext;
        return true;
      case Phase::kDsNext:
        if (!SkipWs()) return false;
        switch (MatchAt(t, pos, kDsCallsEnd)) {
          case Match::kYes:
            phase = Phase::kDone;
            return false;
          case Match::kMore:  // or the start of a call-begin
            return false;
          case Match::kNo:
            break;
        }
        switch (MatchAt(t, pos, kDsCallBegin)) {
          case Match::kYes:
            phase = Phase::kDsSep;
            return true;
          case Match::kNo:
            return Stop();
          case Match::kMore:
            return false;
        }
        return false;
      case Phase::kDsSep: {
        const size_t sep = text.find(kDsSep, std::max(pos, sep_from));
        if (sep == std::string::npos) {
          // Next time from where a separator could still begin.
          sep_from = text.size() - std::min(text.size(), kDsSep.size() - 1);
          return false;
        }
        pos = sep + kDsSep.size();
        name.clear();
        phase = Phase::kDsName;
        return true;
      }
      case Phase::kDsName:
        if (t[pos] != '\n') {
          name += t[pos++];
          return true;
        }
        if (name.empty()) return Stop();
        ++pos;
        phase = Phase::kDsFence;
        return true;
      case Phase::kDsFence:
        switch (MatchAt(t, pos, "```json")) {
          case Match::kYes:
            pos += 7;
            [[fallthrough]];
          case Match::kNo:
            phase = Phase::kDsBody;
            return true;
          case Match::kMore:
            return false;
        }
        return false;
      case Phase::kDsBody:
        if (!SkipWs()) return false;
        BeginArgsObject(Phase::kDsAfterBody);
        return phase == Phase::kArgsObject;
      case Phase::kDsAfterBody:
        if (!SkipWs()) return false;
        switch (MatchAt(t, pos, "```")) {
          case Match::kYes:
            pos += 3;
            [[fallthrough]];
          case Match::kNo:
            phase = Phase::kDsClose;
            return true;
          case Match::kMore:
            return false;
        }
        return false;
      case Phase::kDsClose:
        if (!SkipWs()) return false;
        return Expect(kDsCallEnd, Phase::kDsNext, Phase::kStopped);
      // json_array: [{object}, ...] and space only after it.
      case Phase::kArrayOpen:
        if (!SkipWs()) return false;
        if (t[pos] != '[') return Stop();
        ++pos;
        phase = Phase::kArrayElement;
        after_array_ = Phase::kDone;
        return true;
      case Phase::kArrayElement:
        if (!SkipWs()) return false;
        BeginObject(Phase::kArrayNext);
        return phase == Phase::kObject;
      case Phase::kArrayNext:
        if (!SkipWs()) return false;
        if (t[pos] == ',') {
          ++pos;
          phase = Phase::kArrayElement;
          return true;
        }
        if (t[pos] != ']') return Stop();
        ++pos;
        phase = after_array_;
        return phase != Phase::kDone;
    }
    return false;
  }
  Phase after_array_ = Phase::kDone;

  // The marker `m` at pos: then `yes` (kObject: a call object, followed by `after`).
  bool Expect(std::string_view m, Phase yes, Phase after) {
    switch (MatchAt(text, pos, m)) {
      case Match::kYes:
        pos += m.size();
        if (yes == Phase::kObject) {
          BeginObject(after);
          return phase == Phase::kObject;
        }
        phase = yes;
        return true;
      case Match::kNo:
        return Stop();
      case Match::kMore:
        return false;
    }
    return false;
  }
};

ToolCallStreamer::ToolCallStreamer(ToolParserKind kind) : s_(std::make_unique<State>(kind)) {}
ToolCallStreamer::~ToolCallStreamer() = default;

size_t ToolCallStreamer::calls_started() const {
  return s_->calls.size();
}

ToolStreamEvents ToolCallStreamer::Push(std::string_view piece) {
  State& s = *s_;
  ToolStreamEvents ev;
  if (s.finished) return ev;
  s.ev = &ev;
  s.text.append(piece);
  if (s.kind == ToolParserKind::kNone) {
    ev.content = s.text.substr(s.emitted);
    s.emitted = s.text.size();
    s.ev = nullptr;
    return ev;
  }
  if (s.phase == State::Phase::kContent) {
    // Content up to `emitted` holds no start (HeldBack keeps a marker's beginning).
    const size_t start = FindStart(s.kind, s.text, s.emitted);
    size_t upto;
    if (start != std::string::npos) {
      upto = start;
      s.pos = start;
      switch (s.kind) {
        case ToolParserKind::kHermes:
          s.phase = State::Phase::kHermesOpen;
          break;
        case ToolParserKind::kLlama3Json:
          s.phase = State::Phase::kLlamaOpen;
          break;
        case ToolParserKind::kMistral:
          s.phase = State::Phase::kMistralOpen;
          break;
        case ToolParserKind::kDeepSeekV3:
          s.phase = State::Phase::kDsOpen;
          break;
        case ToolParserKind::kJsonArray:
          s.phase = State::Phase::kArrayOpen;
          break;
        case ToolParserKind::kNone:
          break;
      }
    } else {
      upto = s.text.size() - HeldBack(s.kind, s.text);
    }
    if (upto > s.emitted) {
      ev.content = s.text.substr(s.emitted, upto - s.emitted);
      s.emitted = upto;
    }
  }
  s.Scan();
  s.FlushArgs(false);  // the current call's new arguments (a call being read has none yet)
  s.ev = nullptr;
  return ev;
}

ToolStreamEvents ToolCallStreamer::Finish() {
  State& s = *s_;
  ToolStreamEvents ev;
  if (s.finished) return ev;
  s.finished = true;
  const ToolParseResult whole = ParseToolCalls(s.kind, s.text);
  if (whole.calls.empty()) {
    // No call: what was held is content — unless calls went out already (a malformed end):
    // then it is dropped, not sent twice.
    if (s.calls.empty() && s.text.size() > s.emitted) ev.content = s.text.substr(s.emitted);
    s.emitted = s.text.size();
    return ev;
  }
  s.parsed_ok = true;
  if (whole.content.size() > s.emitted) ev.content = whole.content.substr(s.emitted);
  s.emitted = s.text.size();
  for (size_t k = 0; k < whole.calls.size(); ++k) {
    const ParsedToolCall& call = whole.calls[k];
    const int index = static_cast<int>(k);
    if (k >= s.calls.size()) {
      ev.calls.push_back({index, call.name, ""});
      if (!call.arguments.empty()) ev.calls.push_back({index, "", call.arguments});
      continue;
    }
    // Streamed (partly): send the rest when what went out is a prefix of the final arguments.
    State::Call& c = s.calls[k];
    const std::string_view sent(c.args.data(), c.sent);
    if (call.arguments.size() > sent.size() && call.arguments.starts_with(sent)) {
      ev.calls.push_back({index, "", call.arguments.substr(sent.size())});
    }
    c.complete = true;
  }
  return ev;
}

std::string ToolCallStreamer::FinishReason(const std::string& engine_reason) const {
  const State& s = *s_;
  if (s.parsed_ok) return "tool_calls";
  if (s.calls.empty() || engine_reason != "stop") return engine_reason;
  for (const State::Call& c : s.calls) {
    if (!c.complete) return engine_reason;
  }
  return "tool_calls";
}

}  // namespace llm::router
