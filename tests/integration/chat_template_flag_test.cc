// model.chat_template (vLLM's --chat-template): a template given on the command line, inline
// or as a file, replaces the model's own (stories260K's renders BOS + the contents).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

json TokenizeMessages(int port) {
  const HttpResult r =
      Post(port, "/tokenize", {{"messages", {{{"role", "user"}, {"content", "upon a time"}}}}});
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? r.Json()["tokens"] : json();
}

TEST(ChatTemplateFlag, InlineAndFileTemplatesReplaceTheModels) {
  if (!std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing ../shared/" << Cluster::kModel;
  }
  Cluster cluster({}, {"--chat-template", "{{ 'Once ' + messages[0]['content'] }}"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  // "Once upon a time" without BOS (messages are tokenized without special tokens).
  EXPECT_EQ(TokenizeMessages(cluster.port()), json({403, 407, 261, 378}));
  const HttpResult chat =
      Post(cluster.port(), "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "upon a time"}}}}, {"max_tokens", 4}});
  EXPECT_EQ(chat.status, 200) << chat.body;

  const auto file = std::filesystem::temp_directory_path() /
                    ("chat_template_" + std::to_string(getpid()) + ".jinja");
  std::ofstream(file) << "{{ 'Once ' + messages[0]['content'] }}";
  const int port = cluster.AddRouter({"--model.chat_template", file.string()}, cluster.upstream());
  ASSERT_NE(port, 0) << cluster.Logs();
  EXPECT_EQ(TokenizeMessages(port), json({403, 407, 261, 378}));
  std::filesystem::remove(file);
  // Without the flag: the model's template, "<s>upon a time".
  const int plain = cluster.AddRouter({}, cluster.upstream());
  ASSERT_NE(plain, 0) << cluster.Logs();
  EXPECT_EQ(TokenizeMessages(plain)[0], 1);

  // A file that does not exist stops the router with a message naming the key.
  cluster.AddRouter({"--chat-template", "/nonexistent/template.jinja"}, cluster.upstream());
  EXPECT_TRUE(cluster.last_router().WaitExit(10.0));
  EXPECT_NE(cluster.last_router().Log().find("model.chat_template"), std::string::npos)
      << cluster.last_router().Log();
}

}  // namespace
}  // namespace llm::e2e
