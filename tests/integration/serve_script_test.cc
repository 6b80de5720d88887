// The README's first command: tools/serve.sh, as shipped (mpirun worker job + router, default
// model deploy/models/stories260K), answers a completion with the real model's text: the
// greedy continuation of the independent reference (../shared/golden/stories260K_greedy.jsonl).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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
  ChildProcess serve(
      {"/bin/bash", std::string(LLM_SOURCE_DIR) + "/tools/serve.sh"}, "serve_sh",
      {"PORT=" + std::to_string(port), "COORD_PORT=" + std::to_string(coord_port), "MODEL", "RANKS",
       "DP", "TP", "PP", "CONFIG", "API_KEY", "LOAD_FORMAT", "HOSTFILE"});
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
  // Ctrl-C (here SIGTERM) stops the router and the worker job, but lets a request in flight
  // finish first: mpirun alone would kill the ranks about 2 s after its SIGTERM, and this
  // request (2 prompts x n 16 x 450 tokens) runs longer than that here.
  HttpResult in_flight;
  std::thread client([&] {
    in_flight = Post(port, "/v1/completions",
                     {{"prompt", {"Once upon a time", "Lily"}},
                      {"max_tokens", 450},
                      {"n", 16},
                      {"ignore_eos", true},
                      {"temperature", 1}});
  });
  // Stop once the request runs (the engine's running gauge on /metrics).
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string m = Http(port, "GET", "/metrics", "", 2.0).body;
        const size_t at = m.find("\nllmserve:num_requests_running{");
        return at != std::string::npos && m.compare(m.find('}', at) + 1, 3, " 0\n") != 0;
      },
      10.0));
  const int status = serve.Stop(SIGTERM, 60.0);
  client.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << serve.Log(4000);
  EXPECT_EQ(in_flight.status, 200) << in_flight.body << serve.Log(4000);
  EXPECT_EQ(in_flight.Json()["usage"]["completion_tokens"], 2 * 16 * 450) << in_flight.body;
  EXPECT_TRUE(WaitFor([&] { return Http(port, "GET", "/health", "", 0.5).status == 0; }, 10.0));
}

// A worker that cannot start (here a bad engine.kv_cache_dtype through its environment
// variable) ends serve.sh with a non-zero status and the worker's message naming the key:
// scripts and service managers see the failure.
TEST(ServeScript, WorkerThatCannotStartFailsTheScript) {
  const std::filesystem::path built = std::filesystem::path(LLM_SOURCE_DIR) / "build/worker/worker";
  if (!std::filesystem::exists(built) ||
      !std::filesystem::equivalent(built, std::filesystem::path(LLM_WORKER_BIN))) {
    GTEST_SKIP() << "tools/serve.sh starts build/ of the source tree, and this build is "
                 << LLM_WORKER_BIN;
  }
  ChildProcess serve(
      {"/bin/bash", std::string(LLM_SOURCE_DIR) + "/tools/serve.sh"}, "serve_bad",
      {"PORT=" + std::to_string(FreePort()), "COORD_PORT=" + std::to_string(FreePort()),
       "LLM_ENGINE_KV_CACHE_DTYPE=fp8", "MODEL", "RANKS", "DP", "TP", "PP", "CONFIG", "API_KEY",
       "LOAD_FORMAT", "HOSTFILE"});
  ASSERT_TRUE(serve.WaitExit(60.0)) << serve.Log(4000);
  const std::optional<int> status = serve.exit_status();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << *status << serve.Log(4000);
  EXPECT_NE(serve.Log().find("engine.kv_cache_dtype"), std::string::npos) << serve.Log(4000);
}

// DP=2 starts two engines in one mpirun job (coordinators on COORD_PORT and COORD_PORT + 1) and
// gives the router both.
TEST(ServeScript, DataParallelJobGivesTheRouterEveryCoordinator) {
  const std::filesystem::path built = std::filesystem::path(LLM_SOURCE_DIR) / "build/worker/worker";
  if (!std::filesystem::exists(built) ||
      !std::filesystem::equivalent(built, std::filesystem::path(LLM_WORKER_BIN))) {
    GTEST_SKIP() << "tools/serve.sh starts build/ of the source tree, and this build is "
                 << LLM_WORKER_BIN;
  }
  LLM_E2E_REQUIRE_SHARED();
  const int port = FreePort();
  int coord_port = 0;
  for (int i = 0; i < 50 && coord_port == 0; ++i) {
    const int p = FreePort();
    // the next port must be free too (a bind to it succeeds only then)
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(p + 1));
    if (p < 65535 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
      coord_port = p;
    close(fd);
  }
  ASSERT_NE(coord_port, 0);
  ChildProcess serve(
      {"/bin/bash", std::string(LLM_SOURCE_DIR) + "/tools/serve.sh"}, "serve_sh_dp",
      {"PORT=" + std::to_string(port), "COORD_PORT=" + std::to_string(coord_port), "DP=2", "MODEL",
       "RANKS", "TP", "PP", "CONFIG", "API_KEY", "LOAD_FORMAT", "HOSTFILE"});
  const bool up = WaitFor(
      [&] { return serve.Exited() || Http(port, "GET", "/health", "", 1.0).status == 200; }, 90.0);
  ASSERT_TRUE(up && !serve.Exited()) << serve.Log(4000);
  const json ups = Http(port, "GET", "/upstreams", "", 5.0).Json();
  ASSERT_TRUE(ups["data"].is_array()) << ups;
  ASSERT_EQ(ups["data"].size(), 2u) << ups;
  EXPECT_EQ(ups["data"][0]["address"], "127.0.0.1:" + std::to_string(coord_port));
  EXPECT_EQ(ups["data"][1]["address"], "127.0.0.1:" + std::to_string(coord_port + 1));
  EXPECT_TRUE(
      WaitFor([&] { return serve.Log().find("2 engine(s) of 1") != std::string::npos; }, 10.0))
      << serve.Log(4000);
  const HttpResult r =
      Post(port, "/v1/completions",
           {{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"max_tokens", 8}});
  EXPECT_EQ(r.status, 200) << r.body;
  serve.Stop(SIGTERM, 60.0);
  EXPECT_TRUE(WaitFor([&] { return Http(port, "GET", "/health", "", 0.5).status == 0; }, 10.0));
}

}  // namespace
}  // namespace llm::e2e
