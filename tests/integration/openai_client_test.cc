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

const std::string kDir = std::string(LLM_SOURCE_DIR) + "/tests/integration";

// Empty when node and the openai package are there (installed on first use), else why not.
// ctest runs the tests of this file side by side: the install runs under a lock and looks again
// inside it, else one test's npm rewrites node_modules while another's node reads it (seen in
// CI: "Cannot find package .../node_modules/openai/index.js").
std::string NodeClientMissing() {
  if (Shell("command -v node >/dev/null 2>&1") != 0) return "node is not installed";
  if (!std::filesystem::exists(kDir + "/node_modules/openai/package.json")) {
    if (Shell("command -v npm >/dev/null 2>&1") != 0) return "npm is not installed";
    if (Shell("command -v flock >/dev/null 2>&1") != 0) return "flock is not installed";
    const std::string install = "cd '" + kDir +
                                "' && timeout 330 flock .npm-install.lock sh -c "
                                "'test -f node_modules/openai/package.json || timeout 300 npm "
                                "install --no-audit --no-fund --loglevel=error' >/dev/null 2>&1";
    if (Shell(install) != 0) {
      return "could not install the openai npm package (offline?): " + install;
    }
  }
  return "";
}

// Runs `script` against the cluster's router; its output must end with `ok_line`.
void RunNodeScript(Cluster& cluster, const std::string& script, const std::string& ok_line) {
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("openai_client_" + std::to_string(getpid()) + ".log"))
                              .string();
  const std::string run = "cd '" + kDir +
                          "' && ROUTER_URL=http://127.0.0.1:" + std::to_string(cluster.port()) +
                          "/v1 timeout 120 node " + script + " >'" + log + "' 2>&1";
  const int rc = Shell(run);
  std::ifstream f(log);
  std::stringstream out;
  out << f.rdbuf();
  EXPECT_EQ(rc, 0) << out.str() << cluster.Logs();
  EXPECT_NE(out.str().find(ok_line), std::string::npos) << out.str();
  std::filesystem::remove(log);
}

TEST(OpenAiNodeClient, ChatAndStream) {
  LLM_E2E_REQUIRE_SHARED();
  if (const std::string missing = NodeClientMissing(); !missing.empty()) GTEST_SKIP() << missing;
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  RunNodeScript(cluster, "openai_client.mjs", "openai client ok");
}

// Tool calls (forced and parsed from the model's own Hermes format), reasoning and structured
// output through the npm client, on a random-weight Llama whose output structured output
// drives (tests/integration/openai_client_tools.mjs).
TEST(OpenAiNodeClient, ToolCallsReasoningAndStructuredOutput) {
  const std::string model = SharedPath("golden/families/llama/hf");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "missing " << model;
  if (const std::string missing = NodeClientMissing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string tmpl =
      "{% if tools %}{% for t in tools %}{{ t.function.name }} {% endfor %}{% endif %}"
      "{{ messages[-1]['content'] }}";
  Cluster cluster({"--model.path", model, "--engine.kv_cache_mib", "64"},
                  {"--model.path", model, "--chat-template", tmpl, "--router.tool_call_parser",
                   "hermes", "--router.reasoning_parser", "qwen3"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  RunNodeScript(cluster, "openai_client_tools.mjs", "openai client tools ok");
}

}  // namespace
}  // namespace llm::e2e
