#include "router/tool_parser.h"

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

// Where the calls start; npos: no call (yet).
size_t FindStart(ToolParserKind kind, std::string_view text) {
  switch (kind) {
    case ToolParserKind::kHermes:
      return text.find(kHermesStart);
    case ToolParserKind::kMistral:
      return text.find(kMistralStart);
    case ToolParserKind::kDeepSeekV3:
      return text.find(kDsCallsBegin);
    case ToolParserKind::kLlama3Json: {
      const size_t first = SkipSpace(text, 0);
      if (first < text.size() && text[first] == '{') return first;
      return text.find(kPythonTag);
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

std::string ToolCallStreamer::Push(std::string_view piece) {
  text_.append(piece);
  if (in_call_ || kind_ == ToolParserKind::kNone) {
    if (kind_ != ToolParserKind::kNone) return {};
    std::string out = text_.substr(emitted_);
    emitted_ = text_.size();
    return out;
  }
  const size_t start = FindStart(kind_, text_);
  size_t upto;
  if (start != std::string::npos) {
    in_call_ = true;
    upto = start;
  } else {
    upto = text_.size() - HeldBack(kind_, text_);
  }
  if (upto <= emitted_) return {};
  std::string out = text_.substr(emitted_, upto - emitted_);
  emitted_ = upto;
  return out;
}

ToolParseResult ToolCallStreamer::Finish() {
  ToolParseResult r = ParseToolCalls(kind_, text_);
  r.content = r.content.size() > emitted_ ? r.content.substr(emitted_) : std::string();
  emitted_ = text_.size();
  return r;
}

}  // namespace llm::router
