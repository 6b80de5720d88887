// Tools and reasoning (router/tool_parser.h, router/reasoning_parser.h): requests with tools,
// tool calls rendered by the real Qwen3 / DeepSeek-V3 templates parsed back, malformed calls
// kept as content, and the streaming parsers fed the text split at every byte boundary.
#include "router/tool_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/chat_template.h"
#include "router/chat_prompt.h"
#include "router/generation_job.h"
#include "router/openai_format.h"
#include "router/openai_request.h"
#include "router/reasoning_parser.h"

namespace llm::router {
namespace {

using nlohmann::json;

std::string TemplateSource(const std::string& tokenizer) {
  std::ifstream in(std::filesystem::path(LLM_SHARED_DIR) / "tokenizers" / tokenizer /
                   "tokenizer_config.json");
  const json config = json::parse(in, nullptr, false);
  if (config.is_discarded() || !config.contains("chat_template")) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  return t.is_array() && !t.empty() ? t[0].value("template", "") : "";
}

json Messages(const json& calls, const json& content = "") {
  json assistant = {{"role", "assistant"}, {"content", content}, {"tool_calls", calls}};
  return json::array({{{"role", "user"}, {"content", "What is the weather in Paris and Rome?"}},
                      std::move(assistant)});
}

json Call(const std::string& name, const std::string& arguments) {
  return {{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", name}, {"arguments", arguments}}}};
}

std::string Render(const std::string& source, json messages, bool add_generation_prompt,
                   bool as_mappings) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return "";
  nlohmann::ordered_json ordered(messages);
  if (as_mappings) ToolCallArgumentsAsMappings(ordered);
  nlohmann::ordered_json context = {{"messages", std::move(ordered)},
                                    {"add_generation_prompt", add_generation_prompt},
                                    {"bos_token", ""},
                                    {"eos_token", ""}};
  auto r = t->Render(context);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : "";
}

// What the model generates for the assistant turn: the full rendering past the generation
// prompt, without the end-of-turn text.
std::string ModelText(const std::string& tokenizer, const json& messages, bool as_mappings,
                      const std::string& turn_end) {
  const std::string source = TemplateSource(tokenizer);
  const std::string full = Render(source, messages, false, as_mappings);
  const std::string prompt =
      Render(source, json::array({messages[0]}), /*add_generation_prompt=*/true, as_mappings);
  EXPECT_EQ(full.compare(0, prompt.size(), prompt), 0) << full << "\n---\n" << prompt;
  std::string text = full.substr(std::min(prompt.size(), full.size()));
  const size_t end = turn_end.empty() ? std::string::npos : text.rfind(turn_end);
  if (end != std::string::npos) text.resize(end);
  // Qwen3 renders an empty think block into the last assistant turn.
  const std::string empty_think = "<think>\n\n</think>\n\n";
  if (text.rfind(empty_think, 0) == 0) text.erase(0, empty_think.size());
  return text;
}

// Streaming, split at every byte boundary (and once per byte), gives ParseToolCalls' result.
void ExpectStreamingMatches(ToolParserKind kind, const std::string& text) {
  const ToolParseResult whole = ParseToolCalls(kind, text);
  auto check = [&](const std::vector<std::string>& pieces, const std::string& how) {
    ToolCallStreamer s(kind);
    std::string content;
    for (const std::string& p : pieces) content += s.Push(p);
    ToolParseResult fin = s.Finish();
    content += fin.content;
    EXPECT_EQ(content, whole.content) << how;
    ASSERT_EQ(fin.calls.size(), whole.calls.size()) << how;
    for (size_t k = 0; k < fin.calls.size(); ++k) {
      EXPECT_EQ(fin.calls[k].name, whole.calls[k].name) << how;
      EXPECT_EQ(fin.calls[k].arguments, whole.calls[k].arguments) << how;
    }
  };
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    check({text.substr(0, cut), text.substr(cut)}, "cut at " + std::to_string(cut));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  check(bytes, "byte by byte");
}

TEST(ToolParser, DetectsFromRealTemplates) {
  EXPECT_EQ(DetectToolParser(TemplateSource("qwen3")), ToolParserKind::kHermes);
  EXPECT_EQ(DetectToolParser(TemplateSource("deepseek_v3")), ToolParserKind::kDeepSeekV3);
  EXPECT_EQ(DetectToolParser("{{ '<|python_tag|>' }}"), ToolParserKind::kLlama3Json);
  EXPECT_EQ(DetectToolParser("{{ '[TOOL_CALLS]' }}"), ToolParserKind::kMistral);
  EXPECT_EQ(DetectToolParser("{{ messages[0].content }}"), ToolParserKind::kNone);
  EXPECT_EQ(ToolParserFromName("hermes"), ToolParserKind::kHermes);
  EXPECT_FALSE(ToolParserFromName("auto").has_value());
}

TEST(ToolParser, Qwen3RenderedCallsParseBack) {
  const json calls = json::array({Call("get_weather", R"({"city": "Paris", "unit": "c"})"),
                                  Call("get_weather", R"({"city": "Rome"})")});
  // With text before the calls, and without.
  for (const json& content : {json("Let me check."), json("")}) {
    const std::string text = ModelText("qwen3", Messages(calls, content), true, "<|im_end|>");
    ASSERT_NE(text.find("<tool_call>"), std::string::npos) << text;
    // The string arguments went to the template as a mapping (tojson), not double-encoded.
    EXPECT_NE(text.find(R"("arguments": {"city": "Paris")"), std::string::npos) << text;
    const ToolParseResult r = ParseToolCalls(ToolParserKind::kHermes, text);
    ASSERT_EQ(r.calls.size(), 2u) << text;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city":"Paris","unit":"c"})"));
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"city":"Rome"})"));
    EXPECT_EQ(r.content, content == "" ? "" : "Let me check.\n") << text;
    ExpectStreamingMatches(ToolParserKind::kHermes, text);
  }
}

TEST(ToolParser, DeepSeekV3RenderedCallsParseBack) {
  const json calls = json::array(
      {Call("get_weather", R"({"city": "Paris"})"), Call("get_time", R"({"tz": "Europe/Rome"})")});
  nlohmann::ordered_json messages(Messages(calls));
  EmptyCallContentAsNull(messages);  // the template renders calls only for content none
  const std::string text = ModelText("deepseek_v3", messages, false, "<｜end▁of▁sentence｜>");
  ASSERT_NE(text.find("<｜tool▁calls▁begin｜>"), std::string::npos) << text;
  const ToolParseResult r = ParseToolCalls(ToolParserKind::kDeepSeekV3, text);
  ASSERT_EQ(r.calls.size(), 2u) << text;
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"tz":"Europe/Rome"})"));
  EXPECT_EQ(r.content, "");
  ExpectStreamingMatches(ToolParserKind::kDeepSeekV3, text);
}

TEST(ToolParser, Llama3JsonAndMistral) {
  const std::string llama =
      R"({"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {}})";
  ToolParseResult r = ParseToolCalls(ToolParserKind::kLlama3Json, llama);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(r.calls[1].name, "g");
  ExpectStreamingMatches(ToolParserKind::kLlama3Json, llama);
  const std::string tagged = R"(Sure. <|python_tag|>{"name": "f", "arguments": {"q": "a;b"}})";
  r = ParseToolCalls(ToolParserKind::kLlama3Json, tagged);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "Sure. ");
  ExpectStreamingMatches(ToolParserKind::kLlama3Json, tagged);
  // A JSON answer that is no call stays content.
  r = ParseToolCalls(ToolParserKind::kLlama3Json, R"({"answer": 42})");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, R"({"answer": 42})");

  const std::string mistral =
      R"(Hi[TOOL_CALLS][{"name": "f", "arguments": {"a": "]"}}, {"name": "g", "arguments": {}}])";
  r = ParseToolCalls(ToolParserKind::kMistral, mistral);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Hi");
  EXPECT_EQ(r.calls[0].arguments, R"({"a":"]"})");
  ExpectStreamingMatches(ToolParserKind::kMistral, mistral);
  r = ParseToolCalls(ToolParserKind::kMistral, R"([TOOL_CALLS]f[ARGS]{"a": 1})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
}

TEST(ToolParser, MalformedCallsArePlainContent) {
  const std::vector<std::pair<ToolParserKind, std::string>> bad = {
      {ToolParserKind::kHermes, "Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\n</tool_call>"},
      {ToolParserKind::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}"},  // no end
      {ToolParserKind::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>"},         // no name
      {ToolParserKind::kHermes, "<tool_call>[1, 2]</tool_call>"},
      {ToolParserKind::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"x\": }"},
      {ToolParserKind::kMistral, "[TOOL_CALLS][{\"name\": \"f\""},
      {ToolParserKind::kDeepSeekV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"},
  };
  for (const auto& [kind, text] : bad) {
    const ToolParseResult r = ParseToolCalls(kind, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
    ExpectStreamingMatches(kind, text);
  }
  // Text without any call streams through unchanged; a partial tag is held, then released.
  ToolCallStreamer s(ToolParserKind::kHermes);
  EXPECT_EQ(s.Push("Hello <tool"), "Hello ");
  EXPECT_EQ(s.Push("box> x"), "<toolbox> x");
  EXPECT_EQ(s.Finish().content, "");
}

void ExpectReasoningStreams(ReasoningParserKind kind, const std::string& text,
                            const std::string& reasoning, const std::string& content) {
  const ReasoningSplit whole = SplitReasoning(kind, text);
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= text.size(); cut2 += 3) {
      ReasoningStreamer s(kind);
      std::string r;
      std::string c;
      s.Push(text.substr(0, cut), &r, &c);
      s.Push(text.substr(cut, cut2 - cut), &r, &c);
      s.Push(text.substr(cut2), &r, &c);
      s.Finish(&r, &c);
      EXPECT_EQ(r, reasoning) << text << " cut " << cut << "," << cut2;
      EXPECT_EQ(c, content) << text << " cut " << cut << "," << cut2;
    }
  }
}

TEST(ReasoningParser, SplitsThinkBlocks) {
  using K = ReasoningParserKind;
  ExpectReasoningStreams(K::kQwen3, "<think>\nLet me see.\n</think>\n\nIt is 4.", "\nLet me see.\n",
                         "It is 4.");
  ExpectReasoningStreams(K::kQwen3, "It is 4, no <think> here.", "", "It is 4, no <think> here.");
  ExpectReasoningStreams(K::kQwen3, "<think>cut short", "cut short", "");
  ExpectReasoningStreams(K::kDeepSeekR1, "Hmm, 2+2.</think>The answer is 4.", "Hmm, 2+2.",
                         "The answer is 4.");
  ExpectReasoningStreams(K::kDeepSeekR1, "<think>a</think>b", "a", "b");
  ExpectReasoningStreams(K::kDeepSeekR1, "no end tag", "no end tag", "");
  ExpectReasoningStreams(K::kNone, "<think>a</think>b", "", "<think>a</think>b");
  EXPECT_FALSE(SplitReasoning(K::kQwen3, "plain").has_reasoning);
  EXPECT_TRUE(SplitReasoning(K::kQwen3, "<think></think>x").has_reasoning);
}

TEST(ToolParser, ChatMessageShape) {
  ChoiceOutput o;
  o.text =
      "<think>call it</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"
      "</tool_call>";
  o.finish_reason = "stop";
  ApplyChatParsers(ToolParserKind::kHermes, ReasoningParserKind::kQwen3, &o);
  EXPECT_EQ(o.finish_reason, "tool_calls");
  const json body = ChatResponseJson({"chatcmpl-1", 1, "m"}, {o}, {});
  const json& m = body["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null()) << m.dump();
  EXPECT_EQ(m["reasoning_content"], "call it");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  // No calls: content stays, finish_reason too, no tool_calls key.
  ChoiceOutput plain;
  plain.text = "Just text";
  plain.finish_reason = "length";
  ApplyChatParsers(ToolParserKind::kHermes, ReasoningParserKind::kNone, &plain);
  const json m2 = ChatResponseJson({"chatcmpl-1", 1, "m"}, {plain}, {})["choices"][0];
  EXPECT_EQ(m2["message"]["content"], "Just text");
  EXPECT_FALSE(m2["message"].contains("tool_calls"));
  EXPECT_EQ(m2["finish_reason"], "length");
}

TEST(ToolParser, StreamDeltaShape) {
  const std::vector<json> d = ToolCallDeltas(1, "f", "{\"a\":1}");
  ASSERT_EQ(d.size(), 2u);
  const json& head = d[0]["tool_calls"][0];
  EXPECT_EQ(head["index"], 1);
  EXPECT_EQ(head["type"], "function");
  EXPECT_EQ(head["function"], json({{"name", "f"}, {"arguments", ""}}));
  EXPECT_EQ(head["id"].get<std::string>().size(), 29u);  // call_ + 24
  EXPECT_EQ(d[1],
            json({{"tool_calls", {{{"index", 1}, {"function", {{"arguments", "{\"a\":1}"}}}}}}}));
}

json ToolsJson() {
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"description", "Weather of a city"},
          {"parameters",
           {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
}

std::optional<ApiError> ParseChat(const json& extra, ChatRequest* req) {
  RequestLimits limits;
  limits.served_model_name = "m";
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return ParseChatRequest(body.dump(), limits, req);
}

TEST(ToolRequests, ToolsAndToolChoiceAreValidated) {
  ChatRequest req;
  ASSERT_FALSE(ParseChat({{"tools", ToolsJson()}}, &req));
  EXPECT_EQ(req.tool_choice, "auto");
  EXPECT_EQ(req.tools, ToolsJson());
  req = {};
  ASSERT_FALSE(
      ParseChat({{"tools", ToolsJson()},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
                &req));
  EXPECT_EQ(req.tool_choice, "function");
  EXPECT_EQ(req.tool_choice_name, "get_weather");
  json too_many = json::array();
  for (int i = 0; i < 129; ++i) too_many.push_back(ToolsJson()[0]);
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"tools", "x"}}, "tools"},
      {{{"tools", too_many}}, "tools"},
      {{{"tools", {{{"type", "retrieval"}}}}}, "tools[0]"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", ""}}}}}}},
       "tools[0].function.name"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 3}}}}}}},
       "tools[0].function.parameters"},
      {{{"tools", ToolsJson()}, {"tool_choice", "always"}}, "tool_choice"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"tools", ToolsJson()},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice"},
      {{{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", 1}}}}}}}},
       "messages[0].tool_calls[0]"},
  };
  for (const auto& [extra, param] : bad) {
    ChatRequest r;
    auto e = ParseChat(extra, &r);
    ASSERT_TRUE(e.has_value()) << extra.dump();
    EXPECT_EQ(e->param, param) << e->message;
  }
  // A conversation with a call and its result parses; the call-only message keeps content null.
  ChatRequest conv;
  const json messages = {{{"role", "user"}, {"content", "Weather?"}},
                         {{"role", "assistant"},
                          {"content", nullptr},
                          {"tool_calls", {Call("get_weather", R"({"city": "Paris"})")}}},
                         {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18C"}}};
  ASSERT_FALSE(ParseChat({{"tools", ToolsJson()}, {"messages", messages}}, &conv));
  EXPECT_EQ(conv.messages[1]["content"], "");
  // ... and renders through the real Qwen3 template with the tools.
  auto t = ChatTemplate::Parse(TemplateSource("qwen3"));
  ASSERT_TRUE(t.ok());
  nlohmann::ordered_json messages_for_template(conv.messages);
  ToolCallArgumentsAsMappings(messages_for_template);
  nlohmann::ordered_json context = {
      {"messages", messages_for_template}, {"tools", conv.tools}, {"add_generation_prompt", true}};
  auto text = t->Render(context);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("\"name\": \"get_weather\""), std::string::npos) << *text;
  EXPECT_NE(text->find("<tool_response>\n18C\n</tool_response>"), std::string::npos) << *text;
  EXPECT_NE(text->find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"),
            std::string::npos)
      << *text;
}

}  // namespace
}  // namespace llm::router

namespace llm::router {
namespace {

// What structured output makes a model write for tool_choice "required" / a named function.
TEST(ToolParser, JsonArrayOfCalls) {
  const std::string text =
      R"([{"name": "get_weather", "parameters": {"city": "Paris", "unit": "C"}}, {"name": "now", "parameters": {}}])";
  const ToolParseResult r = ParseToolCalls(ToolParserKind::kJsonArray, text);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","unit":"C"})");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.content, "");
  // Streaming holds everything back; the pieces give the same calls.
  ToolCallStreamer s(ToolParserKind::kJsonArray);
  std::string content;
  for (char c : text) content += s.Push(std::string_view(&c, 1));
  const ToolParseResult streamed = s.Finish();
  EXPECT_EQ(content + streamed.content, "");
  EXPECT_EQ(streamed.calls.size(), 2u);
  // Unfinished (max_tokens) or trailing text: plain content.
  EXPECT_TRUE(ParseToolCalls(ToolParserKind::kJsonArray, text.substr(0, 40)).calls.empty());
  EXPECT_TRUE(ParseToolCalls(ToolParserKind::kJsonArray, text + " x").calls.empty());
  EXPECT_EQ(ToolParserFromName("json_array"), ToolParserKind::kJsonArray);
}

}  // namespace
}  // namespace llm::router
