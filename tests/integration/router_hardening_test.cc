// Issue 6 ("Safe to expose") through the real router and worker: each test sends the hostile
// input named in the issue and checks the error and that the router keeps serving.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

class RouterHardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SharedPath(Cluster::kModel))) return;
    cluster_ = new Cluster();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    LLM_E2E_REQUIRE_SHARED();
    ASSERT_TRUE(cluster_->ok()) << cluster_->Logs();
  }
  static int port() { return cluster_->port(); }

  static inline Cluster* cluster_ = nullptr;
};

std::string Nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// The router answers /health and a small completion: it survived what came before.
void ExpectStillServing(int port) {
  EXPECT_EQ(Http(port, "GET", "/health", "", 10.0).status, 200);
  const HttpResult r =
      Post(port, "/v1/completions",
           {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(RouterHardening, DeepJsonIsRejectedAndTheRouterStaysUp) {
  // ~400 KB: a message carrying an extra field nested 200,000 arrays deep.
  const std::string chat =
      R"({"messages":[{"role":"user","content":"Hi","x":)" + Nested(200000) + "}]}";
  ASSERT_GT(chat.size(), 400000u);
  HttpResult r = Http(port(), "POST", "/v1/chat/completions", chat, 30.0);
  ASSERT_EQ(r.status, 400) << r.error << r.body;
  const json e = r.Json();
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("64"), std::string::npos) << r.body;

  // /tokenize renders the template without any coordinator: the same through its kwargs.
  const std::string tokenize = R"({"messages":[{"role":"user","content":"Hi"}],)"
                               R"("chat_template_kwargs":{"a":)" +
                               Nested(200000) + "}}";
  r = Http(port(), "POST", "/tokenize", tokenize, 30.0);
  EXPECT_EQ(r.status, 400) << r.error << r.body;
  r = Http(port(), "POST", "/v1/completions", R"({"prompt":)" + Nested(200000) + "}", 30.0);
  EXPECT_EQ(r.status, 400) << r.error << r.body;
  ExpectStillServing(port());
}

TEST_F(RouterHardening, FanOutOverTheCapsIsRejectedQuickly) {
  // ~10 KB: 2,000 prompts × n = 16 would be 32,000 upstream calls.
  json prompts = json::array();
  for (int i = 0; i < 2000; ++i) prompts.push_back("Hi");
  const int64_t prompt_tokens_before = cluster_->Stats().prompt_tokens_total();
  const auto start = std::chrono::steady_clock::now();
  HttpResult r = Post(port(), "/v1/completions", {{"prompt", prompts}, {"n", 16}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, 400) << r.error << r.body;
  EXPECT_NE(r.body.find("router.max_prompts"), std::string::npos) << r.body;
  EXPECT_LT(seconds, 2.0);
  prompts.erase(prompts.begin() + 200, prompts.end());
  r = Post(port(), "/v1/completions", {{"prompt", prompts}, {"n", 16}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("router.max_choices"), std::string::npos) << r.body;
  json stops = json::array();
  for (int i = 0; i < 1000; ++i) stops.push_back(std::to_string(i) + "s");
  r = Post(port(), "/v1/completions", {{"prompt", "Hi"}, {"stop", stops}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("router.max_stop_strings"), std::string::npos) << r.body;
  // Nothing was started upstream.
  EXPECT_TRUE(cluster_->WaitAllBlocksFree(10.0));
  EXPECT_EQ(cluster_->Stats().prompt_tokens_total(), prompt_tokens_before)
      << "a rejected request reached the engine";
  ExpectStillServing(port());
}

TEST_F(RouterHardening, FieldsTheEngineCannotHonourGet400) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const std::vector<std::pair<std::string, json>> cases = {
      {"logit_bias", {{"1", 100}}},
      {"best_of", 3},
      {"response_format", {{"type", "json_object"}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
      {"tool_choice", "required"},
      {"functions", {{{"name", "f"}}}},
      // Any client could jump the queue and get everyone else preempted.
      {"priority", -2147483648LL},
  };
  for (const auto& [key, value] : cases) {
    json body = chat;
    body[key] = value;
    const HttpResult r = Post(port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 400) << key << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["param"], key) << r.body;
    EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error") << r.body;
  }
  ExpectStillServing(port());
}

TEST_F(RouterHardening, PriorityIsHonouredOnlyWhenTheOperatorAllowsIt) {
  const int allowing = cluster_->AddRouter({"--router.allow_priority", "true"});
  ASSERT_NE(allowing, 0) << cluster_->Logs();
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"priority", -3}};
  EXPECT_EQ(Post(port(), "/v1/completions", body).status, 400);
  const HttpResult r = Post(allowing, "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace llm::e2e
