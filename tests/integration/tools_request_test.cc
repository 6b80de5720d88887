// Tools end to end on the request side (the tiny model never emits tool calls; the parsers'
// output shapes are unit-tested in tests/router/tool_parser_test.cc): a router whose chat
// template renders the tools' names (its text holds <tool_call>, so the hermes parser is on)
// accepts tools on /tokenize and chat (plain and streaming), renders them into the prompt
// (more prompt tokens), not with tool_choice "none", and still rejects malformed tools.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

const char* kTemplate =
    "{# <tool_call> #}{% if tools %}{% for t in tools %}{{ t.function.name }} {% endfor %}"
    "{% endif %}{{ messages[-1]['content'] }}";

json Tools() {
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "upon"}, {"description", "d"}, {"parameters", {{"type", "object"}}}}}}});
}

TEST(ToolsRequest, ToolsAreRenderedIntoThePrompt) {
  if (!std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing ../shared/" << Cluster::kModel;
  }
  Cluster cluster({}, {"--chat-template", kTemplate});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const json messages = {{{"role", "user"}, {"content", "a time"}}};
  const HttpResult plain = Post(cluster.port(), "/tokenize", {{"messages", messages}});
  const HttpResult with_tools =
      Post(cluster.port(), "/tokenize", {{"messages", messages}, {"tools", Tools()}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  ASSERT_EQ(with_tools.status, 200) << with_tools.body;
  EXPECT_GT(with_tools.Json()["count"].get<int>(), plain.Json()["count"].get<int>());

  auto prompt_tokens = [&](const json& extra) {
    json body = {{"messages", messages}, {"max_tokens", 3}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    const HttpResult r = Post(cluster.port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return -1;
    const json j = r.Json();
    // No tool call in the tiny model's text: plain content, the usual finish reason.
    EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string()) << r.body;
    EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls")) << r.body;
    return j["usage"]["prompt_tokens"].get<int>();
  };
  const int without = prompt_tokens(json::object());
  EXPECT_EQ(prompt_tokens({{"tools", Tools()}}), with_tools.Json()["count"].get<int>());
  EXPECT_EQ(prompt_tokens({{"tools", Tools()}, {"tool_choice", "none"}}), without);
  EXPECT_GT(prompt_tokens({{"tools", Tools()}, {"tool_choice", "required"}}), without);

  const StreamResult s =
      PostStream(cluster.port(), "/v1/chat/completions",
                 {{"messages", messages}, {"tools", Tools()}, {"max_tokens", 3}, {"stream", true}});
  EXPECT_EQ(s.http.status, 200) << s.http.body;
  EXPECT_TRUE(s.done);
  ASSERT_FALSE(s.events.empty());
  const json& last = s.events.back()["choices"][0];
  EXPECT_TRUE(last["finish_reason"] == "length" || last["finish_reason"] == "stop") << last.dump();

  // A conversation with a call and its result renders.
  const json conv = {{{"role", "user"}, {"content", "a time"}},
                     {{"role", "assistant"},
                      {"content", nullptr},
                      {"tool_calls",
                       {{{"id", "call_1"},
                         {"type", "function"},
                         {"function", {{"name", "upon"}, {"arguments", "{\"x\": 1}"}}}}}}},
                     {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Once"}}};
  const HttpResult r = Post(cluster.port(), "/v1/chat/completions",
                            {{"messages", conv}, {"tools", Tools()}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 200) << r.body;
  const HttpResult bad =
      Post(cluster.port(), "/v1/chat/completions",
           {{"messages", messages},
            {"tools", Tools()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.Json()["error"]["param"], "tool_choice") << bad.body;
}

}  // namespace
}  // namespace llm::e2e
