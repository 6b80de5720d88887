// Structured output end to end: a random-weight Llama (../shared/golden/families/llama/hf, which
// on its own never writes JSON) served by a real worker and router. 200 sampled generations
// with a JSON Schema all end with "stop" and their text parses and validates against the schema
// (tests/common/json_schema_validator.h, independent of the grammar code); json_object gives
// objects; tool_choice "required" / a named function give tool_calls whose arguments follow
// the tool's parameters, streaming too; guided_regex generations match their pattern (by
// std::regex); a schema or pattern the coordinator cannot enforce is a 400.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/common/json_schema_validator.h"
#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

constexpr const char* kRandomLlama = "golden/families/llama/hf";
// Renders the tools' names (so the prompt shows them) and the last message.
constexpr const char* kTemplate =
    "{% if tools %}{% for t in tools %}{{ t.function.name }} {% endfor %}{% endif %}"
    "{{ messages[-1]['content'] }}";

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "pet": {"enum": ["cat", "dog", null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
    "score": {"anyOf": [{"type": "number"}, {"type": "boolean"}]},
    "home": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
             "required": ["city"]}
  },
  "required": ["name", "age", "home"]
})";

class StructuredOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SharedPath(kRandomLlama))) return;
    const std::string model = SharedPath(kRandomLlama);
    cluster_ = new Cluster({"--model.path", model, "--engine.kv_cache_mib", "64"},
                           {"--model.path", model, "--chat-template", kTemplate});
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (cluster_ == nullptr) GTEST_SKIP() << "missing ../shared/" << kRandomLlama;
    ASSERT_TRUE(cluster_->ok()) << cluster_->Logs();
  }
  static int port() { return cluster_->port(); }
  static Cluster* cluster_;
};
Cluster* StructuredOutput::cluster_ = nullptr;

// `requests` sampled /v1/completions requests of n = 10 under `schema` (seeds seed0, seed0 +
// 10, ...): every choice must stop, parse and validate; returns the parsed values.
std::vector<test::ojson> SampleUnderSchema(int port, const test::ojson& schema, const char* name,
                                           int requests, int max_tokens, int seed0) {
  // Built as ordered JSON: nlohmann::json would sort the schema's properties.
  const test::ojson format = {{"type", "json_schema"},
                              {"json_schema", {{"name", name}, {"schema", schema}}}};
  std::vector<test::ojson> values;
  for (int request = 0; request < requests; ++request) {
    const test::ojson body = {
        {"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"n", 10}, {"temperature", 1.0},
        {"seed", seed0 + request * 10}, {"response_format", format}};
    const HttpResult r = Http(port, "POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return values;
    const json response = r.Json();  // (a temporary's member would dangle in the loop)
    for (const json& choice : response["choices"]) {
      const std::string text = choice["text"];
      EXPECT_EQ(choice["finish_reason"], "stop") << text;
      const test::ojson value = test::ojson::parse(text, nullptr, false);
      EXPECT_FALSE(value.is_discarded()) << "not JSON: " << text;
      if (value.is_discarded()) continue;
      EXPECT_TRUE(test::ValidateJson(value, schema)) << text;
      values.push_back(value);
    }
  }
  return values;
}

TEST_F(StructuredOutput, TwoHundredSampledGenerationsFollowTheSchema) {
  const test::ojson schema = test::ojson::parse(kSchema);
  const std::vector<test::ojson> values =
      SampleUnderSchema(port(), schema, "person", 20, 400, 1000);
  EXPECT_EQ(values.size(), 200u);
  // Properties come in the schema's order.
  for (const test::ojson& value : values) EXPECT_EQ(value.begin().key(), "name") << value.dump();
  // Without the schema the same model writes no JSON at all.
  const HttpResult free = Post(port(), "/v1/completions",
                               {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"seed", 1}});
  ASSERT_EQ(free.status, 200);
  EXPECT_TRUE(
      test::ojson::parse(free.Json()["choices"][0]["text"].get<std::string>(), nullptr, false)
          .is_discarded());
  EXPECT_TRUE(cluster_->WaitAllBlocksFree(10.0));
}

// Number bounds, multipleOf (integer, power of ten, other decimals) and a length-bounded
// pattern (issue 12): 50 sampled generations all validate, numbers checked exactly on their text.
TEST_F(StructuredOutput, NumericKeywordsAndBoundedPatternsAreFollowed) {
  const test::ojson schema = test::ojson::parse(R"({"type": "object", "properties": {
      "price": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1000, "multipleOf": 0.01},
      "qty": {"type": "integer", "multipleOf": 5, "minimum": -50, "maximum": 500},
      "temp": {"type": "number", "exclusiveMinimum": -2.25, "maximum": 40},
      "step": {"type": "number", "multipleOf": 0.25, "minimum": -5, "maximum": 7.5},
      "code": {"type": "string", "pattern": "[A-Z]{2}[0-9]+", "minLength": 3, "maxLength": 6}},
      "required": ["price", "qty", "temp", "step", "code"]})");
  EXPECT_EQ(SampleUnderSchema(port(), schema, "order", 5, 300, 500).size(), 50u);
  EXPECT_TRUE(cluster_->WaitAllBlocksFree(10.0));
}

TEST_F(StructuredOutput, JsonObjectGreedyAndStreaming) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Give me JSON"}}}},
                     {"max_tokens", 300},
                     {"temperature", 0},
                     {"response_format", {{"type", "json_object"}}}};
  const HttpResult r = Post(port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.Json()["choices"][0];
  const std::string text = choice["message"]["content"];
  if (choice["finish_reason"] == "stop") {
    const json value = json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    EXPECT_TRUE(value.is_object()) << text;
  } else {
    EXPECT_EQ(text.front(), '{') << text;  // cut by max_tokens: still the start of an object
  }
  json streamed = body;
  streamed["stream"] = true;
  const StreamResult s = PostStream(port(), "/v1/chat/completions", streamed);
  ASSERT_TRUE(s.done) << s.http.body;
  std::string joined;
  for (const json& e : s.events) {
    if (e.contains("choices") && !e["choices"].empty() &&
        e["choices"][0]["delta"].contains("content")) {
      joined += e["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(joined, text) << "greedy: the stream gives the same JSON";
}

json WeatherTools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 10},
                     "unit": {"enum": ["C", "F"]}}, "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"zone": {"type": "integer"}}, "required": ["zone"]}}}])");
}

void ExpectCallsFollowTheTools(const json& calls, const std::string& only_name) {
  ASSERT_TRUE(calls.is_array() && !calls.empty()) << calls.dump();
  const json tools = WeatherTools();
  for (const json& call : calls) {
    EXPECT_EQ(call["type"], "function");
    EXPECT_TRUE(call["id"].is_string());
    const std::string name = call["function"]["name"];
    if (!only_name.empty()) {
      EXPECT_EQ(name, only_name);
    }
    const test::ojson args =
        test::ojson::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_FALSE(args.is_discarded()) << call.dump();
    bool known = false;
    for (const json& t : tools) {
      if (t["function"]["name"] != name) continue;
      known = true;
      const test::ojson params = test::ojson::parse(t["function"]["parameters"].dump());
      EXPECT_TRUE(test::ValidateJson(args, params)) << call.dump();
    }
    EXPECT_TRUE(known) << name;
  }
}

TEST_F(StructuredOutput, RequiredAndNamedToolChoiceGiveValidToolCalls) {
  for (int seed = 0; seed < 10; ++seed) {
    const HttpResult r = Post(port(), "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                               {"tools", WeatherTools()},
                               {"tool_choice", "required"},
                               // One call: a random model would otherwise add calls forever.
                               {"parallel_tool_calls", false},
                               {"temperature", 1.0},
                               {"seed", seed},
                               {"max_tokens", 480}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.Json()["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << r.body;
    EXPECT_TRUE(choice["message"]["content"].is_null() || choice["message"]["content"] == "")
        << r.body;
    ExpectCallsFollowTheTools(choice["message"]["tool_calls"], "");
  }
  const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  const HttpResult r = Post(port(), "/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "Time?"}}}},
                             {"tools", WeatherTools()},
                             {"tool_choice", named},
                             {"max_tokens", 300}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json calls = r.Json()["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u) << r.body;
  ExpectCallsFollowTheTools(calls, "get_time");

  // Streaming: the call arrives as OpenAI's tool_calls deltas as it is generated — the first
  // with index, id, type and name (arguments ""), then argument fragments (index only) —
  // finish_reason tool_calls.
  const StreamResult s = PostStream(port(), "/v1/chat/completions",
                                    {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                                     {"tools", WeatherTools()},
                                     {"tool_choice", named},
                                     {"stream", true},
                                     {"max_tokens", 300}});
  ASSERT_TRUE(s.done) << s.http.body;
  std::string name, arguments, finish;
  int deltas = 0;
  int fragments = 0;
  for (const json& e : s.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) finish = c["finish_reason"];
    if (!c["delta"].contains("tool_calls")) continue;
    ASSERT_EQ(c["delta"]["tool_calls"].size(), 1u) << e.dump();
    const json& d = c["delta"]["tool_calls"][0];
    EXPECT_EQ(d["index"], 0) << e.dump();
    if (deltas++ == 0) {
      EXPECT_EQ(d["id"].get<std::string>().rfind("call_", 0), 0u) << e.dump();
      EXPECT_EQ(d["type"], "function") << e.dump();
      EXPECT_EQ(d["function"]["arguments"], "") << e.dump();
      name = d["function"]["name"].get<std::string>();
    } else {
      EXPECT_FALSE(d.contains("id")) << e.dump();
      EXPECT_FALSE(d["function"].contains("name")) << e.dump();
      arguments += d["function"]["arguments"].get<std::string>();
      ++fragments;
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(name, "get_time");
  // How many fragments depends on how many tokens each coordinator message carries (several
  // when the stream lags, e.g. on a loaded machine); the unit tests check the incremental split.
  EXPECT_GE(fragments, 1) << arguments;
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_FALSE(args.is_discarded()) << arguments;
  EXPECT_TRUE(args["zone"].is_number_integer()) << arguments;
}

TEST_F(StructuredOutput, GuidedChoiceGivesOneOfTheStrings) {
  const std::vector<std::string> labels = {"positive", "negative", "neutral \xF0\x9F\x98\x90"};
  for (int seed = 0; seed < 10; ++seed) {
    const HttpResult r = Post(port(), "/v1/completions",
                              {{"prompt", "The review was"},
                               {"max_tokens", 50},
                               {"temperature", 1.0},
                               {"seed", seed},
                               {"guided_choice", labels}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.Json()["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_NE(std::find(labels.begin(), labels.end(), choice["text"].get<std::string>()),
              labels.end())
        << choice["text"];
  }
}

TEST_F(StructuredOutput, SchemasThatCannotBeEnforcedAre400) {
  const json body = json::parse(R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"name": "n", "schema": {"type": "integer", "not": {"const": 3}}}}})");
  const HttpResult r = Post(port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["param"], "response_format");
  EXPECT_NE(r.body.find("'not' is not supported"), std::string::npos) << r.body;
}

// guided_regex (completions) and structured_outputs.regex (chat): 50 sampled generations all
// end with "stop" and fully match the pattern by std::regex, an independent matcher.
TEST_F(StructuredOutput, GuidedRegexGenerationsFullyMatch) {
  const std::string pattern =
      "(yes|no|maybe), [0-9]{1,4}(\\.[0-9]{2})? (\xC2\xB0"
      "C|kg|[a-z]{2,6})( #[A-F0-9]{3})?!";
  const std::regex re(pattern);
  int checked = 0;
  for (int request = 0; request < 5; ++request) {
    const bool chat = request % 2 == 1;
    json body = {{"max_tokens", 60}, {"n", 10}, {"temperature", 1.0}, {"seed", 77 + request}};
    if (chat) {
      body["messages"] = {{{"role", "user"}, {"content", "Answer"}}};
      body["structured_outputs"] = {{"regex", pattern}};
    } else {
      body["prompt"] = "Once upon a time";
      body["guided_regex"] = pattern;
    }
    const HttpResult r = Post(port(), chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json response = r.Json();  // kept: the loop below refers into it
    for (const json& choice : response["choices"]) {
      const std::string text = chat ? choice["message"]["content"] : choice["text"];
      EXPECT_EQ(choice["finish_reason"], "stop") << text;
      EXPECT_TRUE(std::regex_match(text, re)) << "/" << pattern << "/ got '" << text << "'";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 50);
  // A pattern the compiler refuses is a 400 naming the field and the construct.
  const HttpResult bad =
      Post(port(), "/v1/completions", {{"prompt", "x"}, {"guided_regex", "(a)\\1"}});
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.Json()["error"]["param"], "guided_regex");
  EXPECT_NE(bad.body.find("backreference"), std::string::npos) << bad.body;
  EXPECT_TRUE(cluster_->WaitAllBlocksFree(10.0));
}

}  // namespace
}  // namespace llm::e2e
