// OpenAI response shapes: chat.completion(.chunk), text_completion, usage, logprobs, and the
// SSE framing (`data: {json}\n\n`, `data: [DONE]\n\n`). Pure functions over plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace llm::router {

struct ResponseMeta {
  std::string id;  // "chatcmpl-…" / "cmpl-…", the same in every chunk
  int64_t created = 0;
  std::string model;
};

struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // best first
};

struct UsageCounts {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// One choice of a finished (non-stream) response.
struct ChoiceOutput {
  int index = 0;
  std::string text;
  std::string finish_reason;  // "stop", "length", "abort"
  bool with_logprobs = false;
  std::vector<TokenLogprob> logprobs;
  int64_t text_offset = 0;  // completions: offset of the first token's text (echo length)
  // Chat with a reasoning parser / tools: message.reasoning_content and message.tool_calls (an
  // array of ToolCallJson; null: none). With tool calls, an empty text is content null.
  bool has_reasoning = false;
  std::string reasoning;
  nlohmann::json tool_calls;
};

// "call_" and 24 random letters and digits.
std::string MakeToolCallId();
// {"id", "type": "function", "function": {"name", "arguments"}}; with index (>= 0) for a
// stream delta.
nlohmann::json ToolCallJson(const std::string& id, const std::string& name,
                            const std::string& arguments, int index = -1);

// The stream deltas of tool call `index`: {"tool_calls": [{"index", "id", "type", "function":
// {"name", "arguments": ""}}]}, then {"tool_calls": [{"index", "function": {"arguments"}}]}.
std::vector<nlohmann::json> ToolCallDeltas(int index, const std::string& name,
                                           const std::string& arguments);
// The first delta of tool call `index`: {"tool_calls": [{"index", "id", "type": "function",
// "function": {"name", "arguments": ""}}]}.
nlohmann::json ToolCallStartDelta(int index, const std::string& id, const std::string& name);
// A fragment of its arguments: {"tool_calls": [{"index", "function": {"arguments"}}]}.
nlohmann::json ToolCallArgumentsDelta(int index, const std::string& fragment);

// Serialises with invalid UTF-8 replaced (never throws).
std::string JsonText(const nlohmann::json& j);
std::string SseData(const nlohmann::json& j);
std::string SseDone();

nlohmann::json UsageJson(const UsageCounts& usage);
nlohmann::json ChatLogprobsJson(const std::vector<TokenLogprob>& tokens);
nlohmann::json CompletionLogprobsJson(const std::vector<TokenLogprob>& tokens, int64_t text_offset);

// `delta` is {"role":"assistant","content":""}, {"content":"…"} or {}; `logprobs` null or the
// logprobs object; finish_reason "" renders as null.
nlohmann::json ChatChunkJson(const ResponseMeta& meta, int index, nlohmann::json delta,
                             nlohmann::json logprobs, const std::string& finish_reason);
nlohmann::json CompletionChunkJson(const ResponseMeta& meta, int index, const std::string& text,
                                   nlohmann::json logprobs, const std::string& finish_reason);
// The final chunk of `stream_options.include_usage`: empty choices and the usage.
nlohmann::json UsageChunkJson(const ResponseMeta& meta, bool chat, const UsageCounts& usage);

nlohmann::json ChatResponseJson(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                                const UsageCounts& usage);
nlohmann::json CompletionResponseJson(const ResponseMeta& meta,
                                      const std::vector<ChoiceOutput>& choices,
                                      const UsageCounts& usage);

}  // namespace llm::router
