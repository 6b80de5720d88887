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

}  // namespace
}  // namespace llm::e2e
