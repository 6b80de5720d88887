// The README's first command: tools/serve.sh, as shipped (mpirun worker job + router, default
// model deploy/models/stories260K), answers a completion with the real model's text: the
// greedy continuation of the independent reference (../shared/golden/stories260K_greedy.jsonl).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

TEST(ServeScript, DefaultModelServesRealStories) {
  // serve.sh runs the binaries of build/ in the source tree; test those only.
  const std::filesystem::path built = std::filesystem::path(LLM_SOURCE_DIR) / "build/worker/worker";
  if (!std::filesystem::exists(built) ||
      !std::filesystem::equivalent(built, std::filesystem::path(LLM_WORKER_BIN))) {
    GTEST_SKIP() << "tools/serve.sh starts build/ of the source tree, and this build is "
                 << LLM_WORKER_BIN;
  }
  std::ifstream golden(SharedPath("golden/stories260K_greedy.jsonl"));
  if (!golden) GTEST_SKIP() << "missing " << SharedPath("golden/stories260K_greedy.jsonl");
  std::string line;
  std::getline(golden, line);
  const json g = json::parse(line);
  ASSERT_EQ(g["prompt"], "Once upon a time");

  const int port = FreePort();
  const int coord_port = FreePort();
  ChildProcess serve({"/bin/bash", std::string(LLM_SOURCE_DIR) + "/tools/serve.sh"}, "serve_sh",
                     {"PORT=" + std::to_string(port), "COORD_PORT=" + std::to_string(coord_port),
                      "MODEL", "RANKS", "CONFIG", "API_KEY", "LOAD_FORMAT", "HOSTFILE"});
  const bool up = WaitFor(
      [&] { return serve.Exited() || Http(port, "GET", "/health", "", 1.0).status == 200; }, 90.0);
  ASSERT_TRUE(up && !serve.Exited()) << serve.Log(4000);
  const HttpResult models = Http(port, "GET", "/v1/models", "", 5.0);
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.Json()["data"][0]["id"], "stories260K");
  const json body = {{"model", "stories260K"},
                     {"prompt", "Once upon a time"},
                     {"max_tokens", g["greedy_token_ids"].size()},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const HttpResult r = Post(port, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], g["greedy_text"]) << r.body;
  EXPECT_EQ(r.Json()["usage"]["prompt_tokens"], g["prompt_token_ids"].size());
  // Ctrl-C (here SIGTERM) stops the router and the worker job.
  serve.Stop(SIGTERM, 20.0);
  EXPECT_TRUE(WaitFor([&] { return Http(port, "GET", "/health", "", 0.5).status == 0; }, 10.0));
}

}  // namespace
}  // namespace llm::e2e
