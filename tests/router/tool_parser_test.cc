// Tools and reasoning (router/tool_parser.h, router/reasoning_parser.h): requests with tools,
// tool calls rendered by the real Qwen3 / DeepSeek-V3 templates parsed back, malformed calls
// kept as content, and the streaming parsers fed the text split at every byte boundary.
#include "router/tool_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

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

// What a client reassembles from the streamed events: content, then calls by index (a call's
// first delta names it, later ones append argument fragments). `problem` names a delta that
// breaks OpenAI's shape.
struct Reassembled {
  std::string content;
  std::vector<ParsedToolCall> calls;
  std::string problem;
  size_t deltas = 0;
};

void Absorb(const ToolStreamEvents& ev, Reassembled* r) {
  r->content += ev.content;
  if (!ev.content.empty() && !r->calls.empty()) r->problem = "content after a call";
  for (const ToolCallDelta& d : ev.calls) {
    ++r->deltas;
    if (!d.name.empty()) {
      if (d.index != static_cast<int>(r->calls.size())) r->problem = "a call out of order";
      if (!d.arguments.empty()) r->problem = "arguments in a call's first delta";
      r->calls.push_back({d.name, d.arguments});
    } else if (d.index + 1 != static_cast<int>(r->calls.size())) {
      r->problem = "a fragment for call " + std::to_string(d.index) + " of " +
                   std::to_string(r->calls.size());
    } else {
      if (d.arguments.empty()) r->problem = "an empty fragment";
      // Each fragment goes out as a JSON string: it must be whole UTF-8 characters.
      if (json::parse(json(d.arguments).dump(), nullptr, false).get<std::string>() != d.arguments) {
        r->problem = "a fragment that splits a UTF-8 character";
      }
      r->calls.back().arguments += d.arguments;
    }
  }
}

Reassembled StreamPieces(ToolParserKind kind, const std::vector<std::string>& pieces) {
  ToolCallStreamer s(kind);
  Reassembled r;
  for (const std::string& p : pieces) Absorb(s.Push(p), &r);
  Absorb(s.Finish(), &r);
  return r;
}

// Streaming, split at every byte boundary, once per byte and at random points, gives
// ParseToolCalls' result: the content and the calls reassembled from the deltas.
void ExpectStreamingMatches(ToolParserKind kind, const std::string& text) {
  const ToolParseResult whole = ParseToolCalls(kind, text);
  auto check = [&](const std::vector<std::string>& pieces, const std::string& how) {
    const Reassembled r = StreamPieces(kind, pieces);
    EXPECT_EQ(r.problem, "") << how << "\n" << text;
    EXPECT_EQ(r.content, whole.content) << how;
    ASSERT_EQ(r.calls.size(), whole.calls.size()) << how << "\n" << text;
    for (size_t k = 0; k < r.calls.size(); ++k) {
      EXPECT_EQ(r.calls[k].name, whole.calls[k].name) << how;
      EXPECT_EQ(r.calls[k].arguments, whole.calls[k].arguments) << how;
    }
  };
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    check({text.substr(0, cut), text.substr(cut)}, "cut at " + std::to_string(cut));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  check(bytes, "byte by byte");
  // The calls go out as the text comes: once all of it is pushed, Finish has none left to send.
  ToolCallStreamer incremental(kind);
  for (const std::string& b : bytes) incremental.Push(b);
  EXPECT_EQ(incremental.calls_started(), whole.calls.size());
  EXPECT_TRUE(incremental.Finish().calls.empty()) << text;
  std::mt19937 rng(static_cast<uint32_t>(text.size()));
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    check(pieces, "random split " + std::to_string(round));
  }
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
  // The text, and for streaming: the calls whose name went out before the text turned out
  // malformed (they stand, as in vLLM; the content is then the text before them, not repeated).
  struct Bad {
    ToolParserKind kind;
    std::string text;
    size_t streamed_calls;
    std::string streamed_content;
    std::string finish_reason;  // FinishReason("stop")
  };
  const std::vector<Bad> bad = {
      {ToolParserKind::kHermes, "Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\n</tool_call>",
       1, "Hi ", "stop"},
      {ToolParserKind::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", 1, "",
       "tool_calls"},  // no end
      {ToolParserKind::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>", 0, "",
       "stop"},  // no name
      {ToolParserKind::kHermes, "<tool_call>[1, 2]</tool_call>", 0, "", "stop"},
      {ToolParserKind::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"x\": }", 1, "", "stop"},
      {ToolParserKind::kMistral, "[TOOL_CALLS][{\"name\": \"f\"", 1, "", "stop"},
      {ToolParserKind::kDeepSeekV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function", 0, "",
       "stop"},
  };
  for (const Bad& b : bad) {
    const ToolParseResult r = ParseToolCalls(b.kind, b.text);
    EXPECT_TRUE(r.calls.empty()) << b.text;
    EXPECT_EQ(r.content, b.text);
    if (b.streamed_calls == 0) {
      ExpectStreamingMatches(b.kind, b.text);
      continue;
    }
    for (size_t cut = 0; cut <= b.text.size(); ++cut) {
      ToolCallStreamer st(b.kind);
      Reassembled got;
      Absorb(st.Push(b.text.substr(0, cut)), &got);
      Absorb(st.Push(b.text.substr(cut)), &got);
      Absorb(st.Finish(), &got);
      EXPECT_EQ(got.problem, "") << b.text;
      EXPECT_EQ(got.calls.size(), b.streamed_calls) << b.text;
      EXPECT_EQ(got.content, b.streamed_content) << b.text;
      EXPECT_EQ(st.FinishReason("stop"), b.finish_reason) << b.text;
      EXPECT_EQ(st.FinishReason("length"), "length") << b.text;
    }
  }
  // Text without any call streams through unchanged; a partial tag is held, then released.
  ToolCallStreamer s(ToolParserKind::kHermes);
  EXPECT_EQ(s.Push("Hello <tool").content, "Hello ");
  EXPECT_EQ(s.Push("box> x").content, "<toolbox> x");
  EXPECT_EQ(s.Finish().content, "");
  EXPECT_EQ(s.FinishReason("stop"), "stop");
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
  // Streamed, the calls come as deltas.
  ExpectStreamingMatches(ToolParserKind::kJsonArray, text);
  // Unfinished (max_tokens) or trailing text: plain content.
  EXPECT_TRUE(ParseToolCalls(ToolParserKind::kJsonArray, text.substr(0, 40)).calls.empty());
  EXPECT_TRUE(ParseToolCalls(ToolParserKind::kJsonArray, text + " x").calls.empty());
  EXPECT_EQ(ToolParserFromName("json_array"), ToolParserKind::kJsonArray);
}

}  // namespace
}  // namespace llm::router

namespace llm::router {
namespace {

// OpenAI / vLLM style: a call's first delta once its name is complete, then fragments of the
// arguments as they are generated (re-serialised compactly, as ParseToolCalls does).
TEST(ToolCallStreaming, NameThenArgumentFragmentsAsGenerated) {
  ToolCallStreamer s(ToolParserKind::kHermes);
  ToolStreamEvents ev = s.Push("Let me check.\n<tool_call>\n{\"name\": \"get_wea");
  EXPECT_EQ(ev.content, "Let me check.\n");
  EXPECT_TRUE(ev.calls.empty());
  ev = s.Push("ther\", \"arguments\": {\"city\": \"Pa");
  ASSERT_EQ(ev.calls.size(), 2u);
  EXPECT_EQ(ev.calls[0].index, 0);
  EXPECT_EQ(ev.calls[0].name, "get_weather");
  EXPECT_EQ(ev.calls[0].arguments, "");
  EXPECT_EQ(ev.calls[1].name, "");
  EXPECT_EQ(ev.calls[1].arguments, "{\"city\":\"Pa");
  ev = s.Push("ris\", \"days\": 3");  // a number goes out once it ends
  ASSERT_EQ(ev.calls.size(), 1u);
  EXPECT_EQ(ev.calls[0].arguments, "ris\",\"days\":");
  // The first call ends; the second writes its arguments before its name: they follow the name.
  ev = s.Push("}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"q\": [1, 2.50]}, \"name\": \"se");
  ASSERT_EQ(ev.calls.size(), 1u);
  EXPECT_EQ(ev.calls[0].arguments, "3}");
  ev = s.Push("arch\"}\n</tool_call>");
  ASSERT_EQ(ev.calls.size(), 2u);
  EXPECT_EQ(ev.calls[0].index, 1);
  EXPECT_EQ(ev.calls[0].name, "search");
  EXPECT_EQ(ev.calls[1].index, 1);
  EXPECT_EQ(ev.calls[1].arguments, "{\"q\":[1,2.5]}");
  ev = s.Finish();
  EXPECT_EQ(ev.content, "");
  EXPECT_TRUE(ev.calls.empty());
  EXPECT_EQ(s.FinishReason("stop"), "tool_calls");
  EXPECT_EQ(s.calls_started(), 2u);
}

// Every parser kind, arguments with escapes, numbers, nesting, UTF-8, key orders and forms the
// parsers accept: split anyhow, the stream reassembles to ParseToolCalls' result.
TEST(ToolCallStreaming, EveryKindMatchesTheWholeParse) {
  using K = ToolParserKind;
  const std::string tricky =
      R"({"s": "a\/b \u00e9 \ud83d\ude00 \u0001\u001F \n \"q\" \\ Zürich 東京 😀", )"
      R"("n": [1.0, -0, 1e2, 2.50, 12345678901234567890, -7, true, false, null, {}, []], )"
      R"("deep": {"a": [{"b": "}]"}], "c": {}}})";
  const std::vector<std::pair<K, std::string>> texts = {
      {K::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": " + tricky + "}\n</tool_call>"},
      {K::kHermes,
       "Sure.<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}</tool_call>"
       "<tool_call>{\"name\": \"g\", \"arguments\": null}</tool_call>"
       "\n<tool_call>{\"name\": \"h\"}</tool_call> trailing text"},
      {K::kHermes,
       "<tool_call>{\"arguments\": {\"x\": 1}, \"id\": 7, \"name\": \"f\"}</tool_call>"},
      {K::kLlama3Json,
       "  {\"type\": \"function\", \"name\": \"f\", \"parameters\": " + tricky + "}"},
      {K::kLlama3Json,
       "{\"parameters\": {\"x\": 1}, \"name\": \"f\"} ; {\"name\": \"g\", "
       "\"arguments\": {}};"},
      {K::kLlama3Json,
       "Calling. <|python_tag|> {\"name\": \"f\", \"parameters\": {\"q\": \"a;b\"}}"},
      {K::kMistral, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": " + tricky +
                        "}, {\"arguments\": {}, \"name\": \"g\"}]"},
      {K::kMistral, "Hi [TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[ARGS]" + tricky},
      {K::kDeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" +
           tricky +
           "\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n{}"
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {K::kJsonArray, " [ {\"name\": \"f\", \"parameters\": " + tricky +
                          "} , {\"name\": \"g\", \"parameters\": {}} ] \n"},
  };
  for (const auto& [kind, text] : texts) {
    SCOPED_TRACE(std::string(ToolParserName(kind)) + ": " + text);
    const ToolParseResult whole = ParseToolCalls(kind, text);
    ASSERT_FALSE(whole.calls.empty());
    ExpectStreamingMatches(kind, text);
  }
}

// A call that turns out malformed after it was streamed: what went out stands, the text is not
// sent again as content; finish_reason is "tool_calls" only for calls streamed whole.
TEST(ToolCallStreaming, MalformedAfterStreamingIsNotDuplicated) {
  ToolCallStreamer cut(ToolParserKind::kHermes);
  Reassembled r;
  Absorb(cut.Push("Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Par"), &r);
  Absorb(cut.Finish(), &r);  // max_tokens
  EXPECT_EQ(r.problem, "");
  EXPECT_EQ(r.content, "Hi ");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Par");
  EXPECT_EQ(cut.FinishReason("length"), "length");
  EXPECT_EQ(cut.FinishReason("stop"), "stop");

  ToolCallStreamer no_end(ToolParserKind::kHermes);  // a whole call, no </tool_call>
  r = {};
  Absorb(no_end.Push("<tool_call>{\"name\": \"f\", \"arguments\": {}}"), &r);
  Absorb(no_end.Finish(), &r);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(no_end.FinishReason("stop"), "tool_calls");

  // Every prefix of well-formed outputs (a choice cut anywhere): the content never repeats what
  // went out as calls, and what went out is a prefix of the whole output's calls.
  const std::vector<std::pair<ToolParserKind, std::string>> texts = {
      {ToolParserKind::kHermes,
       "Ok <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, \"x\"]}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"},
      {ToolParserKind::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}]"},
      {ToolParserKind::kDeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": "
       "1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
  };
  for (const auto& [kind, text] : texts) {
    const ToolParseResult full = ParseToolCalls(kind, text);
    ASSERT_FALSE(full.calls.empty());
    for (size_t n = 0; n <= text.size(); ++n) {
      const std::string prefix = text.substr(0, n);
      std::vector<std::string> bytes;
      for (char c : prefix) bytes.emplace_back(1, c);
      const Reassembled p = StreamPieces(kind, bytes);
      SCOPED_TRACE(prefix);
      EXPECT_EQ(p.problem, "");
      if (p.calls.empty()) {
        EXPECT_EQ(p.content, ParseToolCalls(kind, prefix).content);
        continue;
      }
      EXPECT_EQ(p.content, full.content);
      ASSERT_LE(p.calls.size(), full.calls.size());
      for (size_t k = 0; k < p.calls.size(); ++k) {
        EXPECT_EQ(p.calls[k].name, full.calls[k].name);
        EXPECT_TRUE(full.calls[k].arguments.starts_with(p.calls[k].arguments))
            << p.calls[k].arguments;
      }
    }
  }
}

// At most kMaxStreamedToolCalls calls stream; the rest go out whole at the end.
TEST(ToolCallStreaming, CallsAreBounded) {
  std::string text;
  const size_t n = kMaxStreamedToolCalls + 5;
  for (size_t k = 0; k < n; ++k) {
    text += "{\"name\": \"f\", \"parameters\": {\"i\": " + std::to_string(k) + "}}; ";
  }
  ToolCallStreamer s(ToolParserKind::kLlama3Json);
  Reassembled r;
  for (char c : text) Absorb(s.Push(std::string_view(&c, 1)), &r);
  EXPECT_EQ(s.calls_started(), kMaxStreamedToolCalls);
  Absorb(s.Finish(), &r);
  EXPECT_EQ(r.problem, "");
  ASSERT_EQ(r.calls.size(), n);
  EXPECT_EQ(r.calls[n - 1].arguments, "{\"i\":" + std::to_string(n - 1) + "}");
}

// Random text made of the formats' pieces: never throws or crashes; when no call went out the
// content is ParseToolCalls' exactly.
TEST(ToolCallStreaming, RandomTextNeverBreaks) {
  const std::vector<std::string> atoms = {"<tool_call>",
                                          "</tool_call>",
                                          "<|python_tag|>",
                                          "[TOOL_CALLS]",
                                          "[ARGS]",
                                          "<｜tool▁calls▁begin｜>",
                                          "<｜tool▁call▁begin｜>",
                                          "<｜tool▁sep｜>",
                                          "<｜tool▁call▁end｜>",
                                          "<｜tool▁calls▁end｜>",
                                          "{",
                                          "}",
                                          "[",
                                          "]",
                                          ",",
                                          ":",
                                          ";",
                                          "\"",
                                          "\\",
                                          "\\u00e9",
                                          "\\ud83d",
                                          "\"name\"",
                                          "\"arguments\"",
                                          "\"parameters\"",
                                          "\"f\"",
                                          "1",
                                          "-2.5e3",
                                          "true",
                                          "null",
                                          " ",
                                          "\n",
                                          "```json",
                                          "```",
                                          "x",
                                          "é",
                                          "\xff"};
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const size_t len = std::uniform_int_distribution<size_t>(0, 30)(rng);
    for (size_t k = 0; k < len; ++k) {
      text += atoms[std::uniform_int_distribution<size_t>(0, atoms.size() - 1)(rng)];
    }
    for (ToolParserKind kind :
         {ToolParserKind::kHermes, ToolParserKind::kLlama3Json, ToolParserKind::kMistral,
          ToolParserKind::kDeepSeekV3, ToolParserKind::kJsonArray}) {
      std::vector<std::string> pieces;
      for (size_t at = 0; at < text.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(1, 8)(rng);
        pieces.push_back(text.substr(at, n));
        at += n;
      }
      const Reassembled r = StreamPieces(kind, pieces);
      if (r.calls.empty()) {
        EXPECT_EQ(r.content, ParseToolCalls(kind, text).content) << text;
      }
    }
  }
}

}  // namespace
}  // namespace llm::router
