// Tool calls in generated text (router.tool_call_parser). Pure functions on text: the model's
// own tool-call syntax → {name, arguments as a JSON string}. Text that does not parse (bad
// JSON, a missing closing tag) is plain content, never an error.
//
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen2.5/Qwen3, Hermes)
//   llama3_json  [<|python_tag|>]{"name": ..., "parameters"|"arguments": {...}}; calls split by ';'
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//   deepseek_v3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n
//                {...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   json_array   [{"name": ..., "parameters": {...}}, ...] as the whole text: what structured
//                output makes a model write for tool_choice "required" or a named function
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llm::router {

enum class ToolParserKind { kNone, kHermes, kLlama3Json, kMistral, kDeepSeekV3, kJsonArray };

// "none", "hermes", "llama3_json", "mistral", "deepseek_v3", "json_array"; nullopt for another
// name ("auto" is resolved by DetectToolParser).
std::optional<ToolParserKind> ToolParserFromName(std::string_view name);
const char* ToolParserName(ToolParserKind kind);
// From a chat template's text: <tool_call> → hermes; <|python_tag|> or Llama-3.1 style
// '"parameters": ' JSON → llama3_json; [TOOL_CALLS] → mistral; <｜tool▁calls▁begin｜> →
// deepseek_v3; else none.
ToolParserKind DetectToolParser(std::string_view chat_template);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON text (an object)
};

struct ToolParseResult {
  std::string content;  // the text before the first call (all of it when there are no calls)
  std::vector<ParsedToolCall> calls;
};

ToolParseResult ParseToolCalls(ToolParserKind kind, std::string_view text);

// Streaming: Push returns the content that can go out now; text that may start a tool call is
// held back until Finish, which parses the whole text. The concatenated content and the calls
// equal ParseToolCalls on the whole text, however the text is split.
class ToolCallStreamer {
 public:
  explicit ToolCallStreamer(ToolParserKind kind) : kind_(kind) {}
  std::string Push(std::string_view piece);
  // The content still held and the calls.
  ToolParseResult Finish();

 private:
  ToolParserKind kind_;
  std::string text_;
  size_t emitted_ = 0;
  bool in_call_ = false;
};

}  // namespace llm::router
