#include "router/openai_format.h"

#include <random>

namespace llm::router {

using nlohmann::json;

namespace {

json FinishJson(const std::string& reason) {
  return reason.empty() ? json(nullptr) : json(reason);
}

json BytesJson(const std::string& s) {
  json bytes = json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

json Header(const ResponseMeta& meta, const char* object) {
  return json{
      {"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

}  // namespace

std::string MakeToolCallId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % 62];
  return id;
}

json ToolCallJson(const std::string& id, const std::string& name, const std::string& arguments,
                  int index) {
  json call;
  if (index >= 0) call["index"] = index;
  call["id"] = id;
  call["type"] = "function";
  call["function"] = {{"name", name}, {"arguments", arguments}};
  return call;
}

json ToolCallStartDelta(int index, const std::string& id, const std::string& name) {
  return {{"tool_calls", json::array({ToolCallJson(id, name, "", index)})}};
}

json ToolCallArgumentsDelta(int index, const std::string& fragment) {
  return {
      {"tool_calls", json::array({{{"index", index}, {"function", {{"arguments", fragment}}}}})}};
}

std::vector<json> ToolCallDeltas(int index, const std::string& name, const std::string& arguments) {
  return {ToolCallStartDelta(index, MakeToolCallId(), name),
          ToolCallArgumentsDelta(index, arguments)};
}

std::string JsonText(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string SseData(const json& j) {
  return "data: " + JsonText(j) + "\n\n";
}

std::string SseDone() {
  return "data: [DONE]\n\n";
}

json UsageJson(const UsageCounts& usage) {
  return json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

json ChatLogprobsJson(const std::vector<TokenLogprob>& tokens) {
  json content = json::array();
  for (const TokenLogprob& t : tokens) {
    json top = json::array();
    for (const auto& [token, lp] : t.top) {
      top.push_back({{"token", token}, {"logprob", lp}, {"bytes", BytesJson(token)}});
    }
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", BytesJson(t.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

json CompletionLogprobsJson(const std::vector<TokenLogprob>& tokens, int64_t text_offset) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const TokenLogprob& t : tokens) {
    out["tokens"].push_back(t.token);
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const auto& [token, lp] : t.top) top[token] = lp;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += static_cast<int64_t>(t.token.size());
  }
  return out;
}

json ChatChunkJson(const ResponseMeta& meta, int index, json delta, json logprobs,
                   const std::string& finish_reason) {
  json chunk = Header(meta, "chat.completion.chunk");
  chunk["choices"] = json::array({{{"index", index},
                                   {"delta", std::move(delta)},
                                   {"logprobs", std::move(logprobs)},
                                   {"finish_reason", FinishJson(finish_reason)}}});
  return chunk;
}

json CompletionChunkJson(const ResponseMeta& meta, int index, const std::string& text,
                         json logprobs, const std::string& finish_reason) {
  json chunk = Header(meta, "text_completion");
  chunk["choices"] = json::array({{{"index", index},
                                   {"text", text},
                                   {"logprobs", std::move(logprobs)},
                                   {"finish_reason", FinishJson(finish_reason)}}});
  return chunk;
}

json UsageChunkJson(const ResponseMeta& meta, bool chat, const UsageCounts& usage) {
  json chunk = Header(meta, chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = json::array();
  chunk["usage"] = UsageJson(usage);
  return chunk;
}

json ChatResponseJson(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                      const UsageCounts& usage) {
  json out = Header(meta, "chat.completion");
  out["choices"] = json::array();
  for (const ChoiceOutput& c : choices) {
    json message = {{"role", "assistant"}, {"content", c.text}};
    if (c.has_reasoning) message["reasoning_content"] = c.reasoning;
    if (c.tool_calls.is_array() && !c.tool_calls.empty()) {
      if (c.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = c.tool_calls;
    }
    out["choices"].push_back(
        {{"index", c.index},
         {"message", std::move(message)},
         {"logprobs", c.with_logprobs ? ChatLogprobsJson(c.logprobs) : json(nullptr)},
         {"finish_reason", FinishJson(c.finish_reason)}});
  }
  out["usage"] = UsageJson(usage);
  return out;
}

json CompletionResponseJson(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                            const UsageCounts& usage) {
  json out = Header(meta, "text_completion");
  out["choices"] = json::array();
  for (const ChoiceOutput& c : choices) {
    out["choices"].push_back(
        {{"index", c.index},
         {"text", c.text},
         {"logprobs",
          c.with_logprobs ? CompletionLogprobsJson(c.logprobs, c.text_offset) : json(nullptr)},
         {"finish_reason", FinishJson(c.finish_reason)}});
  }
  out["usage"] = UsageJson(usage);
  return out;
}

}  // namespace llm::router
