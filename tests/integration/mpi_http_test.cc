// `mpirun -np 1/2/4 worker` (tensor parallel, oversubscribed on small machines) behind a real
// router: the stories260K golden prompts give the golden greedy text through HTTP.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path p = std::filesystem::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

class MpiHttp : public ::testing::TestWithParam<int> {};

TEST_P(MpiHttp, GoldenGreedyThroughHttp) {
  LLM_E2E_REQUIRE_SHARED();
  std::ifstream golden(SharedPath("golden/stories260K_greedy.jsonl"));
  if (!golden) GTEST_SKIP() << "missing " << SharedPath("golden/stories260K_greedy.jsonl");
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on the PATH (Debian package openmpi-bin)";
  const int np = GetParam();
  Cluster cluster({"--engine.tensor_parallel_size", std::to_string(np)}, {},
                  {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np)});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  int cases = 0;
  for (std::string line; std::getline(golden, line);) {
    const json g = json::parse(line);
    const json body = {{"model", "stories260K"},
                       {"prompt", g["prompt_token_ids"]},
                       {"max_tokens", g["greedy_token_ids"].size()},
                       {"temperature", 0},
                       {"ignore_eos", true}};
    const HttpResult r = Post(cluster.port(), "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json()["choices"][0]["text"], g["greedy_text"])
        << "np=" << np << " " << g["prompt"];
    EXPECT_EQ(r.Json()["usage"]["completion_tokens"], g["greedy_token_ids"].size());
    ++cases;
  }
  EXPECT_GT(cases, 0);
  EXPECT_EQ(cluster.Stats().world_size(), np);
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0)) << "KV blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpiHttp, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace llm::e2e
