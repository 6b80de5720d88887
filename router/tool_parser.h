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

#include <memory>
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

// Streaming (chat with stream: true): Push reports, for the text generated so far, the content
// that can go out now and the tool-call deltas found, as OpenAI / vLLM stream them: a call's
// first delta carries its name (arguments ""), once the name is complete; the later ones carry
// fragments of the arguments JSON as they are generated. Arguments are re-serialised on the
// fly exactly as ParseToolCalls does (compact, escapes normalised): string values stream byte
// by byte, numbers and literals once complete, arguments given as a JSON string once their
// string closes; arguments written before the name are held until the name is known. Text that
// may start a call is held back (as content, it goes out at Finish when it is no call).
//
// Guarantee: for an output that ParseToolCalls reads as calls, the concatenated content and the
// calls reassembled from the deltas (index by index, fragments concatenated) equal
// ParseToolCalls on the whole text, however the text is split. An output that turns out
// malformed after a call was already streamed (e.g. cut by max_tokens, or no closing tag): what
// was streamed stands (as vLLM does), the rest of the text is dropped rather than sent again as
// content, and no further delta is sent for a call whose streamed arguments disagree with the
// final parse (only possible for JSON with duplicate keys, or a call object with both
// "parameters" and "arguments": the stream follows the first, ParseToolCalls "arguments"). Nothing
// here throws.
//
// Bounds: the streamer keeps the choice's text (bounded by max_tokens) and streams at most
// kMaxStreamedToolCalls calls; calls past that (and calls the incremental scanner cannot follow)
// go out whole at Finish, from ParseToolCalls.
inline constexpr size_t kMaxStreamedToolCalls = 128;  // = kMaxTools, the tools a request declares

struct ToolCallDelta {
  int index = 0;          // 0, 1, ... in the order the calls start
  std::string name;       // set on the call's first delta only
  std::string arguments;  // a fragment of the arguments JSON text (may be empty)
};

struct ToolStreamEvents {
  std::string content;  // goes out before the deltas
  std::vector<ToolCallDelta> calls;
};

class ToolCallStreamer {
 public:
  explicit ToolCallStreamer(ToolParserKind kind);
  ~ToolCallStreamer();
  ToolCallStreamer(const ToolCallStreamer&) = delete;
  ToolCallStreamer& operator=(const ToolCallStreamer&) = delete;

  ToolStreamEvents Push(std::string_view piece);
  // The end of the text: the content still held (all of it when the text holds no call) and
  // the rest of the calls, reconciled with ParseToolCalls on the whole text.
  ToolStreamEvents Finish();
  // After Finish: "tool_calls" when ParseToolCalls found calls, or when calls were streamed,
  // each to the end of its arguments, and the engine stopped normally ("stop"); else
  // `engine_reason` (e.g. "length" for a call cut by max_tokens).
  std::string FinishReason(const std::string& engine_reason) const;
  // Calls whose first delta went out.
  size_t calls_started() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace llm::router
