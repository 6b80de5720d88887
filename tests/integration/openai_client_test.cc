// The official `openai` npm package against the real router (tests/integration/openai_client.mjs).
// Runs when node and npm are present; installs the package under tests/integration/node_modules
// on first use. Skips with a message otherwise.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

int Shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(OpenAiNodeClient, ChatAndStream) {
  LLM_E2E_REQUIRE_SHARED();
  if (Shell("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  const std::string dir = std::string(LLM_SOURCE_DIR) + "/tests/integration";
  if (!std::filesystem::exists(dir + "/node_modules/openai/package.json")) {
    if (Shell("command -v npm >/dev/null 2>&1") != 0) GTEST_SKIP() << "npm is not installed";
    const std::string install = "cd '" + dir +
                                "' && timeout 300 npm install --no-audit --no-fund "
                                "--loglevel=error >/dev/null 2>&1";
    if (Shell(install) != 0) {
      GTEST_SKIP() << "could not install the openai npm package (offline?): " << install;
    }
  }
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("openai_client_" + std::to_string(getpid()) + ".log"))
                              .string();
  const std::string run = "cd '" + dir +
                          "' && ROUTER_URL=http://127.0.0.1:" + std::to_string(cluster.port()) +
                          "/v1 timeout 120 node openai_client.mjs >'" + log + "' 2>&1";
  const int rc = Shell(run);
  std::ifstream f(log);
  std::stringstream out;
  out << f.rdbuf();
  EXPECT_EQ(rc, 0) << out.str() << cluster.Logs();
  EXPECT_NE(out.str().find("openai client ok"), std::string::npos) << out.str();
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace llm::e2e
