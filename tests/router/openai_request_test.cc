// Request validation: every bad input maps to its HTTP status and the parameter it names.
#include "router/openai_request.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace llm::router {
namespace {

using nlohmann::json;

RequestLimits Limits() {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  limits.max_n = 4;
  return limits;
}

struct BadCase {
  const char* name;
  std::string body;
  int status;
  std::string param;  // "" = null
};

json Chat(json extra = json::object()) {
  json body = {{"model", "stories260K"},
               {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

json Completion(json extra = json::object()) {
  json body = {{"model", "stories260K"}, {"prompt", "Once upon a time"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

TEST(OpenAiRequest, ChatValidationTable) {
  const std::vector<BadCase> cases = {
      {"not json", "{\"model\":", 400, ""},
      {"not an object", "[1,2]", 400, ""},
      {"unknown model", Chat({{"model", "gpt-4"}}).dump(), 404, "model"},
      {"model type", Chat({{"model", 7}}).dump(), 400, "model"},
      {"missing messages", json{{"model", "stories260K"}}.dump(), 400, "messages"},
      {"empty messages", Chat({{"messages", json::array()}}).dump(), 400, "messages"},
      {"message not object", Chat({{"messages", {"hi"}}}).dump(), 400, "messages[0]"},
      {"bad role", Chat({{"messages", {{{"role", "king"}, {"content", "x"}}}}}).dump(), 400,
       "messages[0].role"},
      {"content type", Chat({{"messages", {{{"role", "user"}, {"content", 5}}}}}).dump(), 400,
       "messages[0].content"},
      {"image part",
       Chat({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}).dump(),
       400, "messages[0].content"},
      {"temperature high", Chat({{"temperature", 2.5}}).dump(), 400, "temperature"},
      {"temperature negative", Chat({{"temperature", -0.1}}).dump(), 400, "temperature"},
      {"temperature string", Chat({{"temperature", "hot"}}).dump(), 400, "temperature"},
      {"top_p zero", Chat({{"top_p", 0}}).dump(), 400, "top_p"},
      {"top_p above one", Chat({{"top_p", 1.5}}).dump(), 400, "top_p"},
      {"top_k", Chat({{"top_k", -2}}).dump(), 400, "top_k"},
      {"min_p", Chat({{"min_p", 1.5}}).dump(), 400, "min_p"},
      {"n zero", Chat({{"n", 0}}).dump(), 400, "n"},
      {"n above max_n", Chat({{"n", 5}}).dump(), 400, "n"},
      {"n float", Chat({{"n", 1.5}}).dump(), 400, "n"},
      {"max_tokens zero", Chat({{"max_tokens", 0}}).dump(), 400, "max_tokens"},
      {"max_completion_tokens", Chat({{"max_completion_tokens", -1}}).dump(), 400,
       "max_completion_tokens"},
      {"presence_penalty", Chat({{"presence_penalty", 3}}).dump(), 400, "presence_penalty"},
      {"frequency_penalty", Chat({{"frequency_penalty", -3}}).dump(), 400, "frequency_penalty"},
      {"repetition_penalty", Chat({{"repetition_penalty", 0}}).dump(), 400, "repetition_penalty"},
      {"stop type", Chat({{"stop", 5}}).dump(), 400, "stop"},
      {"stop list type", Chat({{"stop", {"a", 1}}}).dump(), 400, "stop"},
      {"stop empty", Chat({{"stop", ""}}).dump(), 400, "stop"},
      {"stop_token_ids", Chat({{"stop_token_ids", {1, -1}}}).dump(), 400, "stop_token_ids"},
      {"seed type", Chat({{"seed", "x"}}).dump(), 400, "seed"},
      {"stream type", Chat({{"stream", "yes"}}).dump(), 400, "stream"},
      {"logprobs type", Chat({{"logprobs", 1}}).dump(), 400, "logprobs"},
      {"top_logprobs range", Chat({{"logprobs", true}, {"top_logprobs", 21}}).dump(), 400,
       "top_logprobs"},
      {"top_logprobs alone", Chat({{"top_logprobs", 2}}).dump(), 400, "top_logprobs"},
      {"min_tokens above max", Chat({{"min_tokens", 5}, {"max_tokens", 2}}).dump(), 400,
       "min_tokens"},
      {"stream_options", Chat({{"stream_options", {{"include_usage", 1}}}}).dump(), 400,
       "stream_options.include_usage"},
      {"ignore_eos type", Chat({{"ignore_eos", "true"}}).dump(), 400, "ignore_eos"},
  };
  for (const BadCase& c : cases) {
    ChatRequest req;
    auto err = ParseChatRequest(c.body, Limits(), &req);
    ASSERT_TRUE(err.has_value()) << c.name;
    EXPECT_EQ(err->http_status, c.status) << c.name;
    EXPECT_EQ(err->param, c.param) << c.name << ": " << err->message;
    EXPECT_FALSE(err->message.empty()) << c.name;
    const json body = json::parse(ApiErrorJson(*err));
    ASSERT_TRUE(body.contains("error")) << c.name;
    for (const char* key : {"message", "type", "param", "code"}) {
      EXPECT_TRUE(body["error"].contains(key)) << c.name << " lacks " << key;
    }
  }
}

TEST(OpenAiRequest, CompletionValidationTable) {
  const std::vector<BadCase> cases = {
      {"missing prompt", json{{"model", "stories260K"}}.dump(), 400, "prompt"},
      {"prompt number", Completion({{"prompt", 5}}).dump(), 400, "prompt"},
      {"prompt empty list", Completion({{"prompt", json::array()}}).dump(), 400, "prompt"},
      {"prompt mixed", Completion({{"prompt", {"a", 1}}}).dump(), 400, "prompt"},
      {"prompt negative id", Completion({{"prompt", {1, -5}}}).dump(), 400, "prompt"},
      {"prompt empty id list", Completion({{"prompt", {json::array()}}}).dump(), 400, "prompt"},
      {"logprobs range", Completion({{"logprobs", 21}}).dump(), 400, "logprobs"},
      {"echo type", Completion({{"echo", 1}}).dump(), 400, "echo"},
      {"suffix", Completion({{"suffix", "x"}}).dump(), 400, "suffix"},
      {"max_tokens", Completion({{"max_tokens", 0}}).dump(), 400, "max_tokens"},
      {"unknown model", Completion({{"model", "x"}}).dump(), 404, "model"},
  };
  for (const BadCase& c : cases) {
    CompletionRequest req;
    auto err = ParseCompletionRequest(c.body, Limits(), &req);
    ASSERT_TRUE(err.has_value()) << c.name;
    EXPECT_EQ(err->http_status, c.status) << c.name;
    EXPECT_EQ(err->param, c.param) << c.name << ": " << err->message;
  }
}

// An unknown model's name is quoted in the error, at most its first 128 bytes (cut back to a
// whole UTF-8 character) and "...": a 200 KB name is not echoed back.
TEST(OpenAiRequest, UnknownModelNameIsClippedInTheError) {
  for (const std::string& name :
       {std::string(200000, 'x'), std::string(127, 'y') + "\xC3\xA9" + std::string(1000, 'z')}) {
    CompletionRequest req;
    auto err = ParseCompletionRequest(Completion({{"model", name}}).dump(), Limits(), &req);
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->http_status, 404);
    EXPECT_LT(err->message.size(), 300u) << err->message.size();
    const size_t whole = name[0] == 'x' ? 128 : 127;  // the 2-byte character would be cut
    EXPECT_NE(err->message.find("`" + name.substr(0, whole) + "...`"), std::string::npos)
        << err->message;
    EXPECT_TRUE(json::accept(ApiErrorJson(*err)));
  }
  CompletionRequest req;
  auto short_name = ParseCompletionRequest(Completion({{"model", "gpt-4"}}).dump(), Limits(), &req);
  ASSERT_TRUE(short_name.has_value());
  EXPECT_NE(short_name->message.find("`gpt-4`"), std::string::npos) << short_name->message;
}

TEST(OpenAiRequest, ChatDefaultsAndFields) {
  ChatRequest req;
  const json body = Chat(
      {{"messages",
        {{{"role", "user"},
          {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}},
       {"max_tokens", 5},
       {"max_completion_tokens", 7},
       {"stop", "\n"},
       {"top_k", -1},
       {"seed", 3},
       {"n", 2},
       {"logprobs", true},
       {"top_logprobs", 3},
       {"stream", true},
       {"stream_options", {{"include_usage", true}}},
       {"user", "someone"},
       {"unknown_field", {1, 2}},
       {"temperature", nullptr}});
  ASSERT_FALSE(ParseChatRequest(body.dump(), Limits(), &req).has_value());
  EXPECT_EQ(req.messages[0]["content"], "a\nb");
  EXPECT_EQ(req.options.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_EQ(req.options.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(req.options.sampling.top_k, 0);
  EXPECT_EQ(req.options.sampling.seed, 3u);
  EXPECT_EQ(req.options.n, 2);
  EXPECT_EQ(req.options.sampling.logprobs, 3);
  EXPECT_TRUE(req.options.stream);
  EXPECT_TRUE(req.options.include_usage);
  EXPECT_DOUBLE_EQ(req.options.sampling.temperature, 1.0);  // null keeps the default
  EXPECT_TRUE(req.add_generation_prompt);

  ChatRequest no_model;
  ASSERT_FALSE(ParseChatRequest(json{{"messages", {{{"role", "user"}, {"content", "x"}}}}}.dump(),
                                Limits(), &no_model)
                   .has_value());
  EXPECT_EQ(no_model.model, "stories260K");
  EXPECT_FALSE(no_model.options.max_tokens.has_value());
}

TEST(OpenAiRequest, CompletionPromptShapes) {
  const std::vector<std::pair<json, std::vector<bool>>> shapes = {
      {"text", {false}},
      {{"a", "b"}, {false, false}},
      {{1, 2, 3}, {true}},
      {{{1, 2}, {3}}, {true, true}},
  };
  for (const auto& [prompt, is_ids] : shapes) {
    CompletionRequest req;
    ASSERT_FALSE(
        ParseCompletionRequest(Completion({{"prompt", prompt}}).dump(), Limits(), &req).has_value())
        << prompt;
    ASSERT_EQ(req.prompts.size(), is_ids.size()) << prompt;
    for (size_t i = 0; i < is_ids.size(); ++i) EXPECT_EQ(req.prompts[i].is_token_ids, is_ids[i]);
    EXPECT_EQ(req.options.max_tokens, 16);  // the OpenAI default for completions
  }
}

TEST(OpenAiRequest, ContextLength) {
  GenerationOptions o;
  o.max_tokens = 100;
  auto err = CheckContextLength(450, 512, "prompt", &o);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->http_status, 400);
  EXPECT_EQ(err->param, "max_tokens");
  EXPECT_NE(err->message.find("maximum context length is 512 tokens"), std::string::npos);
  EXPECT_NE(err->message.find("you requested 550 tokens"), std::string::npos);
  EXPECT_NE(err->message.find("450 in the prompt"), std::string::npos);

  GenerationOptions open;
  EXPECT_FALSE(CheckContextLength(500, 512, "messages", &open).has_value());
  EXPECT_EQ(open.max_tokens, 12);
  GenerationOptions full;
  auto too_long = CheckContextLength(512, 512, "messages", &full);
  ASSERT_TRUE(too_long.has_value());
  EXPECT_EQ(too_long->param, "messages");

  auto bad_id = CheckTokenIds({1, 2, 600}, 512, "prompt");
  ASSERT_TRUE(bad_id.has_value());
  EXPECT_NE(bad_id->message.find("600"), std::string::npos);
  EXPECT_FALSE(CheckTokenIds({0, 511}, 512, "prompt").has_value());
}

TEST(OpenAiRequest, TokenizeAndDetokenize) {
  TokenizeRequest t;
  ASSERT_FALSE(ParseTokenizeRequest(R"({"prompt":"hi"})", Limits(), &t).has_value());
  EXPECT_FALSE(t.has_messages);
  EXPECT_TRUE(t.add_special_tokens);
  TokenizeRequest m;
  ASSERT_FALSE(ParseTokenizeRequest(R"({"messages":[{"role":"user","content":"x"}]})", Limits(), &m)
                   .has_value());
  EXPECT_TRUE(m.has_messages);
  EXPECT_FALSE(m.add_special_tokens);
  TokenizeRequest none;
  EXPECT_EQ(ParseTokenizeRequest("{}", Limits(), &none)->param, "prompt");
  DetokenizeRequest d;
  ASSERT_FALSE(ParseDetokenizeRequest(R"({"tokens":[1,2]})", Limits(), &d).has_value());
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ParseDetokenizeRequest(R"({"tokens":"x"})", Limits(), &d)->param, "tokens");
}

TEST(ApiError, StatusMapping) {
  EXPECT_EQ(ToApiError(InvalidArgument("x")).http_status, 400);
  EXPECT_EQ(ToApiError(OutOfRange("x")).http_status, 400);
  EXPECT_EQ(ToApiError(NotFound("x")).http_status, 404);
  EXPECT_EQ(ToApiError(Unavailable("x")).http_status, 503);
  EXPECT_EQ(ToApiError(FailedPrecondition("draining")).http_status, 503);
  EXPECT_EQ(ToApiError(Internal("x")).http_status, 500);
  const json j = json::parse(ApiErrorJson(HttpError(413, "too big")));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_TRUE(j["error"]["code"].is_null());
}

}  // namespace
}  // namespace llm::router

namespace llm::router {
namespace {

// Issue 6: a 10 KB body with 2,000 prompts and n = 16 started 32,000 upstream calls.
TEST(OpenAiRequest, FanOutCapsNameTheirKey) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  limits.max_prompts = 8;
  limits.max_choices = 16;
  limits.max_stop_strings = 2;
  limits.max_stop_bytes = 10;
  limits.max_stop_token_ids = 3;
  struct Case {
    json body;
    bool chat;
    std::string param, key;
  };
  json many_prompts = json::array();
  for (int i = 0; i < 2000; ++i) many_prompts.push_back("a");
  const std::vector<Case> cases = {
      {Completion({{"prompt", many_prompts}, {"n", 16}}), false, "prompt", "router.max_prompts"},
      {Completion(
           {{"prompt", json::array({json::array({1}), json::array({2}), json::array({3}),
                                    json::array({4}), json::array({5}), json::array({6}),
                                    json::array({7}), json::array({8}), json::array({9})})}}),
       false, "prompt", "router.max_prompts"},
      {Completion({{"prompt", {"a", "b", "c"}}, {"n", 6}}), false, "n", "router.max_choices"},
      {Chat({{"n", 16}}), true, "", ""},
      {Completion({{"prompt", {"a", "b"}}, {"n", 8}}), false, "", ""},
      {Chat({{"stop", {"a", "b", "c"}}}), true, "stop", "router.max_stop_strings"},
      {Chat({{"stop", {"abcdef", "ghijk"}}}), true, "stop", "router.max_stop_bytes"},
      {Completion({{"stop", "abcdefghijk"}}), false, "stop", "router.max_stop_bytes"},
      {Chat({{"stop_token_ids", {1, 2, 3, 4}}}), true, "stop_token_ids",
       "router.max_stop_token_ids"},
      {Chat({{"stop_token_ids", {1, 2, 3}}, {"stop", {"abcde", "fghij"}}}), true, "", ""},
      // A list of token ids is one prompt, however long.
      {Completion({{"prompt", json::array({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})}}), false, "", ""},
  };
  for (const Case& c : cases) {
    std::optional<ApiError> e;
    if (c.chat) {
      ChatRequest req;
      e = ParseChatRequest(c.body.dump(), limits, &req);
    } else {
      CompletionRequest req;
      e = ParseCompletionRequest(c.body.dump(), limits, &req);
    }
    if (c.key.empty()) {
      EXPECT_FALSE(e.has_value()) << c.body.dump() << ": " << e->message;
      continue;
    }
    ASSERT_TRUE(e.has_value()) << c.body.dump().substr(0, 200);
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param) << e->message;
    EXPECT_NE(e->message.find(c.key), std::string::npos) << e->message;
  }
}

}  // namespace
}  // namespace llm::router

namespace llm::router {
namespace {

TEST(OpenAiRequest, ResponseFormatBecomesStructuredOutput) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  ChatRequest req;
  ASSERT_FALSE(ParseChatRequest(Chat({{"response_format", {{"type", "json_object"}}}}).dump(),
                                limits, &req));
  EXPECT_EQ(req.options.structured, StructuredOutput::kJsonObject);
  // The schema reaches the coordinator with its properties in the order sent (the output's
  // order), though nlohmann::json sorts keys.
  const std::string body =
      R"({"model":"stories260K","messages":[{"role":"user","content":"Hi"}],
          "response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
          "schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},
          "required":["zeta","alpha"]}}}})";
  ChatRequest ordered;
  ASSERT_FALSE(ParseChatRequest(body, limits, &ordered));
  EXPECT_EQ(ordered.options.structured, StructuredOutput::kJsonSchema);
  EXPECT_LT(ordered.options.json_schema.find("zeta"), ordered.options.json_schema.find("alpha"))
      << ordered.options.json_schema;
  CompletionRequest completion;
  ASSERT_FALSE(ParseCompletionRequest(
      Completion({{"response_format", {{"type", "json_object"}}}}).dump(), limits, &completion));
  EXPECT_EQ(completion.options.structured, StructuredOutput::kJsonObject);
  ChatRequest text;
  ASSERT_FALSE(
      ParseChatRequest(Chat({{"response_format", {{"type", "text"}}}}).dump(), limits, &text));
  EXPECT_EQ(text.options.structured, StructuredOutput::kNone);
  for (const json& bad :
       {json{{"type", "xml"}}, json{{"type", "json_schema"}},
        json{{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}}, json("json_object")}) {
    ChatRequest r;
    auto e = ParseChatRequest(Chat({{"response_format", bad}}).dump(), limits, &r);
    ASSERT_TRUE(e.has_value()) << bad.dump();
    EXPECT_EQ(e->param, "response_format");
  }
}

// Tools reach the template with their keys in the order sent (transformers renders Python
// dicts, which keep it), not sorted.
TEST(OpenAiRequest, ToolsKeepTheirKeyOrder) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  const std::string body =
      R"({"model":"stories260K","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":
      "function","function":{"name":"f","description":"d","parameters":{"type":"object",
      "properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}}}}}]})";
  ChatRequest req;
  ASSERT_FALSE(ParseChatRequest(body, limits, &req));
  EXPECT_EQ(req.tools.dump(),
            R"([{"type":"function","function":{"name":"f","description":"d","parameters":{"type":)"
            R"("object","properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}}}}}])");
}

TEST(OpenAiRequest, VllmGuidedDecodingFields) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  ChatRequest choice;
  ASSERT_FALSE(ParseChatRequest(Chat({{"guided_choice", {"yes", "no"}}}).dump(), limits, &choice));
  EXPECT_EQ(choice.options.structured, StructuredOutput::kChoice);
  EXPECT_EQ(choice.options.choices, (std::vector<std::string>{"yes", "no"}));
  CompletionRequest so;
  ASSERT_FALSE(ParseCompletionRequest(
      Completion({{"structured_outputs", {{"choice", {"a"}}}}}).dump(), limits, &so));
  EXPECT_EQ(so.options.structured, StructuredOutput::kChoice);
  ChatRequest schema;
  ASSERT_FALSE(ParseChatRequest(
      Chat({{"guided_json", R"({"type":"object","properties":{"b":{},"a":{}}})"}}).dump(), limits,
      &schema));
  EXPECT_EQ(schema.options.structured, StructuredOutput::kJsonSchema);
  EXPECT_LT(schema.options.json_schema.find("\"b\""), schema.options.json_schema.find("\"a\""));
  ChatRequest object;
  ASSERT_FALSE(ParseChatRequest(Chat({{"structured_outputs", {{"json_object", true}}}}).dump(),
                                limits, &object));
  EXPECT_EQ(object.options.structured, StructuredOutput::kJsonObject);
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"guided_choice", {"a"}}, {"response_format", {{"type", "json_object"}}}}, "guided_choice"},
      {{{"guided_choice", json::array()}}, "guided_choice"},
      {{{"guided_choice", {1, 2}}}, "guided_choice"},
      {{{"guided_json", 5}}, "guided_json"},
      {{{"structured_outputs", {{"grammar", "root ::= x"}}}}, "structured_outputs"},
      {{{"guided_regex", "a+"}, {"guided_choice", {"a"}}}, "guided_choice"},
      {{{"guided_regex", 5}}, "guided_regex"},
      {{{"guided_regex", "(?=a)b"}}, "guided_regex"},
      {{{"structured_outputs", {{"regex", "a\\1"}}}}, "structured_outputs"},
  };
  for (const auto& [extra, param] : bad) {
    ChatRequest r;
    auto e = ParseChatRequest(Chat(extra).dump(), limits, &r);
    ASSERT_TRUE(e.has_value()) << extra.dump();
    EXPECT_EQ(e->param, param) << e->message;
  }
}

// vLLM's guided_regex and structured_outputs.regex, on both endpoints; a pattern the compiler
// refuses is a 400 naming the field and the construct.
TEST(OpenAiRequest, GuidedRegex) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  ChatRequest chat;
  ASSERT_FALSE(
      ParseChatRequest(Chat({{"guided_regex", "[a-z]+@[a-z]+\\.com"}}).dump(), limits, &chat));
  EXPECT_EQ(chat.options.structured, StructuredOutput::kRegex);
  EXPECT_EQ(chat.options.regex, "[a-z]+@[a-z]+\\.com");
  CompletionRequest completion;
  ASSERT_FALSE(ParseCompletionRequest(Completion({{"guided_regex", "(yes|no)"}}).dump(), limits,
                                      &completion));
  EXPECT_EQ(completion.options.structured, StructuredOutput::kRegex);
  CompletionRequest so;
  ASSERT_FALSE(ParseCompletionRequest(
      Completion({{"structured_outputs", {{"regex", "\\d{3}"}}}}).dump(), limits, &so));
  EXPECT_EQ(so.options.structured, StructuredOutput::kRegex);
  EXPECT_EQ(so.options.regex, "\\d{3}");
  ChatRequest so_chat;
  ASSERT_FALSE(
      ParseChatRequest(Chat({{"structured_outputs", {{"regex", "x?"}}}}).dump(), limits, &so_chat));
  EXPECT_EQ(so_chat.options.regex, "x?");

  CompletionRequest bad;
  auto e = ParseCompletionRequest(Completion({{"guided_regex", "a(?<=b)"}}).dump(), limits, &bad);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "guided_regex");
  EXPECT_EQ(e->message, "'guided_regex': lookbehind '(?<=' is not supported (at offset 1)");
  ChatRequest unbalanced;
  e = ParseChatRequest(Chat({{"structured_outputs", {{"regex", "(a"}}}}).dump(), limits,
                       &unbalanced);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "structured_outputs");
  EXPECT_EQ(e->message,
            "'structured_outputs.regex': missing ')' for the group opened (at offset 0)");
}

TEST(OpenAiRequest, RequiredAndNamedToolChoiceForceAJsonArrayOfCalls) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  const json tools = {{{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}},
                      {{"type", "function"}, {"function", {{"name", "now"}}}}};
  ChatRequest req;
  ASSERT_FALSE(
      ParseChatRequest(Chat({{"tools", tools}, {"tool_choice", "required"}}).dump(), limits, &req));
  EXPECT_TRUE(req.forced_tool_calls);
  EXPECT_EQ(req.options.structured, StructuredOutput::kJsonSchema);
  json schema = json::parse(req.options.json_schema);
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_FALSE(schema.contains("maxItems"));
  EXPECT_EQ(schema["items"]["anyOf"].size(), 2u);
  ChatRequest named;
  ASSERT_FALSE(ParseChatRequest(
      Chat({{"tools", tools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}})
          .dump(),
      limits, &named));
  schema = json::parse(named.options.json_schema);
  EXPECT_EQ(schema["maxItems"], 1);
  ASSERT_EQ(schema["items"]["anyOf"].size(), 1u);
  EXPECT_EQ(schema["items"]["anyOf"][0]["properties"]["name"]["const"], "get_weather");
  ChatRequest single;
  ASSERT_FALSE(ParseChatRequest(
      Chat({{"tools", tools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}).dump(),
      limits, &single));
  EXPECT_EQ(json::parse(single.options.json_schema)["maxItems"], 1);
  ChatRequest autochoice;
  ASSERT_FALSE(ParseChatRequest(Chat({{"tools", tools}}).dump(), limits, &autochoice));
  EXPECT_FALSE(autochoice.forced_tool_calls);
  EXPECT_EQ(autochoice.options.structured, StructuredOutput::kNone);
  // Both at once, or parameters that cannot be enforced: 400 naming the field.
  ChatRequest both;
  auto e = ParseChatRequest(Chat({{"tools", tools},
                                  {"tool_choice", "required"},
                                  {"response_format", {{"type", "json_object"}}}})
                                .dump(),
                            limits, &both);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format");
  json bad_tools = tools;
  bad_tools[0]["function"]["parameters"]["properties"]["city"]["uniqueItems"] = true;
  ChatRequest bad;
  e = ParseChatRequest(Chat({{"tools", bad_tools}, {"tool_choice", "required"}}).dump(), limits,
                       &bad);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools[0].function.parameters");
  EXPECT_NE(e->message.find("'uniqueItems' is not supported (at #/properties/city)"),
            std::string::npos)
      << e->message;
}

// Fields the engine cannot honour are a 400 naming them, never a silent 200 (issue 6).
TEST(OpenAiRequest, UnsupportedFieldsAreRejected) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  const std::vector<std::pair<json, std::string>> rejected = {
      {{{"logit_bias", {{"50256", -100}}}}, "logit_bias"},
      {{{"best_of", 2}}, "best_of"},
      {{{"best_of", 0}}, "best_of"},
      // A schema keyword structured output cannot enforce.
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema",
           {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "a(?=b)"}}}}}}}},
       "response_format"},
      {{{"functions", {{{"name", "f"}}}}}, "functions"},
      {{{"function_call", "auto"}}, "function_call"},
      {{{"priority", -2147483648LL}}, "priority"},
      {{{"priority", 5}}, "priority"},
  };
  for (const auto& [extra, param] : rejected) {
    for (bool chat : {true, false}) {
      std::optional<ApiError> e;
      if (chat) {
        ChatRequest req;
        e = ParseChatRequest(Chat(extra).dump(), limits, &req);
      } else {
        CompletionRequest req;
        e = ParseCompletionRequest(Completion(extra).dump(), limits, &req);
      }
      ASSERT_TRUE(e.has_value()) << extra.dump();
      EXPECT_EQ(e->http_status, 400);
      EXPECT_EQ(e->param, param) << e->message;
      const bool says_so = e->message.find("not supported") != std::string::npos ||
                           e->message.find("not enabled") != std::string::npos ||
                           e->message.find("positive integer") != std::string::npos;
      EXPECT_TRUE(says_so) << e->message;
    }
  }
  // Values that ask for nothing pass.
  const std::vector<json> accepted = {
      {{"logit_bias", nullptr}},  {{"logit_bias", json::object()}},
      {{"best_of", 1}},           {{"response_format", {{"type", "text"}}}},
      {{"tools", json::array()}}, {{"tool_choice", "none"}},
      {{"priority", 0}},
  };
  for (const json& extra : accepted) {
    ChatRequest req;
    auto e = ParseChatRequest(Chat(extra).dump(), limits, &req);
    EXPECT_FALSE(e.has_value()) << extra.dump() << ": " << e->message;
  }
  // The operator can let clients set priority.
  limits.allow_priority = true;
  ChatRequest req;
  ASSERT_FALSE(ParseChatRequest(Chat({{"priority", -5}}).dump(), limits, &req).has_value());
  EXPECT_EQ(req.options.priority, -5);
}

// generation_config.json gives the sampling defaults of requests that do not set them (vLLM).
TEST(SamplingDefaults, FromGenerationConfig) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("gen_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "generation_config.json") << text;
  };
  auto none = SamplingDefaultsFromModel((dir / "absent").string());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->temperature, SamplingParams{}.temperature);

  write(R"({"bos_token_id": 1, "do_sample": true, "temperature": 0.6, "top_p": 0.9,
            "top_k": 20, "repetition_penalty": 1.05})");
  auto d = SamplingDefaultsFromModel(dir.string());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FLOAT_EQ(d->temperature, 0.6f);
  EXPECT_FLOAT_EQ(d->top_p, 0.9f);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_FLOAT_EQ(d->repetition_penalty, 1.05f);

  RequestLimits limits = Limits();
  limits.default_sampling = *d;
  CompletionRequest plain;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt": "x"})", limits, &plain).has_value());
  EXPECT_FLOAT_EQ(plain.options.sampling.temperature, 0.6f);
  EXPECT_EQ(plain.options.sampling.top_k, 20);
  CompletionRequest greedy;
  ASSERT_FALSE(
      ParseCompletionRequest(R"({"prompt": "x", "temperature": 0, "top_k": -1})", limits, &greedy)
          .has_value());
  EXPECT_EQ(greedy.options.sampling.temperature, 0.0f);  // the request wins
  EXPECT_EQ(greedy.options.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(greedy.options.sampling.top_p, 0.9f);

  for (const char* bad :
       {R"({"temperature": "hot"})", R"({"temperature": 5})", R"({"top_k": 1.5})", R"([1, 2])"}) {
    write(bad);
    auto e = SamplingDefaultsFromModel(dir.string());
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("generation_config.json"), std::string::npos)
        << e.status().message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace llm::router
