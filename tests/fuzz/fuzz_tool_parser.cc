// Fuzz target: model output -> the tool-call parsers (router/tool_parser.h), whole and streamed.
// The first byte picks the parser kind, the second the way the text is split into pieces; the
// rest is the generated text. Never a crash; the streamed deltas keep OpenAI's shape (calls in
// index order, the name in a call's first delta only, fragments of whole UTF-8 characters);
// when no call went out the content is ParseToolCalls' exactly; when ParseToolCalls finds calls
// (and no JSON object in the text repeats a key, "parameters" and "arguments" counting as one)
// content and calls reassembled from the deltas equal it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "router/tool_parser.h"

using namespace llm::router;

namespace {

// A SAX handler that notices an object repeating a key (ParseToolCalls keeps the last value,
// which the stream cannot take back).
struct DuplicateKeys : nlohmann::json_sax<nlohmann::json> {
  std::vector<std::set<std::string>> keys;
  bool found = false;
  std::optional<std::string> top_string;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& v) override {
    if (keys.empty() && !top_string) top_string = v;  // a JSON string as the whole value
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    // A call with both "parameters" and "arguments": the stream follows the first one.
    if (!keys.back().insert(k == "parameters" ? "arguments" : k).second) found = true;
    return true;
  }
  bool end_object() override {
    keys.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

// Whether a JSON object starting anywhere in `text` (or in a JSON string there: arguments
// given as a string) repeats a key: then the stream may disagree with the whole parse.
bool AnyDuplicateKeys(std::string_view text, bool in_strings = true) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{' && !(in_strings && text[i] == '"')) continue;
    DuplicateKeys sax;
    nlohmann::json::sax_parse(text.substr(i), &sax, nlohmann::json::input_format_t::json,
                              /*strict=*/false);
    if (sax.found) return true;
    if (sax.top_string && AnyDuplicateKeys(*sax.top_string, false)) return true;
  }
  return false;
}

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_tool_parser: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 2048) return 0;
  static const ToolParserKind kKinds[] = {ToolParserKind::kHermes,    ToolParserKind::kLlama3Json,
                                          ToolParserKind::kMistral,   ToolParserKind::kDeepSeekV3,
                                          ToolParserKind::kJsonArray, ToolParserKind::kNone};
  const ToolParserKind kind = kKinds[data[0] % 6];
  uint32_t split = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const bool text_utf8 = ValidUtf8(text);
  const ToolParseResult whole = ParseToolCalls(kind, text);
  ToolCallStreamer streamer(kind);
  std::string content;
  std::vector<ParsedToolCall> calls;
  auto absorb = [&](const ToolStreamEvents& ev) {
    if (!ev.content.empty() && !calls.empty()) Fail("content after a call");
    content += ev.content;
    for (const ToolCallDelta& d : ev.calls) {
      if (!d.name.empty()) {
        if (d.index != static_cast<int>(calls.size())) Fail("a call out of order");
        if (!d.arguments.empty()) Fail("arguments in a call's first delta");
        calls.push_back({d.name, ""});
        continue;
      }
      if (d.index + 1 != static_cast<int>(calls.size())) Fail("a fragment for an earlier call");
      // A fragment goes out as a JSON string: it must not cut a character in two.
      if (text_utf8 && !ValidUtf8(d.arguments)) Fail("a fragment that splits a UTF-8 character");
      calls.back().arguments += d.arguments;
    }
  };
  // Pieces of 1..16 bytes, the lengths drawn from the second byte (a small LCG).
  for (size_t at = 0; at < text.size();) {
    split = split * 1103515245u + 12345u;
    const size_t n = 1 + (split >> 16) % 16;
    absorb(streamer.Push(text.substr(at, n)));
    at += n;
  }
  absorb(streamer.Finish());
  (void)streamer.FinishReason("stop");

  if (calls.empty() && content != whole.content) Fail("content differs with no call streamed");
  if (!whole.calls.empty() && !AnyDuplicateKeys(text)) {
    if (content != whole.content) Fail("content differs");
    if (calls.size() != whole.calls.size()) Fail("a different number of calls");
    for (size_t k = 0; k < calls.size(); ++k) {
      if (calls[k].name != whole.calls[k].name) Fail("a different name");
      if (calls[k].arguments != whole.calls[k].arguments) Fail("different arguments");
    }
  }
  return 0;
}
