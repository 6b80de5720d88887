// The one command-line layer (common/cli.h): cluster.yaml keys as flags over a file, the
// same exit codes and errors naming the flag in every binary.
#include "common/cli.h"

#include "common/version.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace llm {
namespace {

// argv for CLI11 (it takes char**, and keeps no pointer after parsing).
struct Argv {
  explicit Argv(std::vector<std::string> args) : strings(std::move(args)) {
    strings.insert(strings.begin(), "prog");
    for (auto& s : strings) pointers.push_back(s.data());
  }
  int argc() { return static_cast<int>(pointers.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
};

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path;
}

TEST(Cli, FlagsOverrideTheFile) {
  const auto file = WriteTemp("cli", "engine: {block_size: 32, max_num_seqs: 7}\n");
  CLI::App app("test", "prog");
  ClusterFlags flags(app);
  Argv a({"--config", file.string(), "--engine.block_size", "8", "--router.upstreams=a:1,b:2",
          "--engine.block_size", "4"});
  ASSERT_FALSE(ParseCommandLine(app, a.argc(), a.argv()).has_value());
  auto c = flags.Load();
  std::filesystem::remove(file);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.block_size, 4);  // the last of a repeated flag wins
  EXPECT_EQ(c->engine.scheduler.max_num_seqs, 7);
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"a:1", "b:2"}));
}

TEST(Cli, BadValueNamesTheKey) {
  CLI::App app("test", "prog");
  ClusterFlags flags(app);
  Argv a({"--engine.max_num_seqs", "-3"});
  ASSERT_FALSE(ParseCommandLine(app, a.argc(), a.argv()).has_value());
  auto c = flags.Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("engine.max_num_seqs"), std::string::npos);
}

TEST(Cli, UnknownFlagsMissingValuesAndMissingFilesExitWithUsageCode) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--engine.nope", "1"},
                                               {"--engine.block_size"},
                                               {"--config", "/nonexistent/cluster.yaml"},
                                               {"stray"}}) {
    CLI::App app("test", "prog");
    ClusterFlags flags(app);
    Argv a(args);
    testing::internal::CaptureStderr();
    const auto rc = ParseCommandLine(app, a.argc(), a.argv());
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(rc.has_value()) << args[0];
    EXPECT_EQ(*rc, kUsageExitCode);
    EXPECT_NE(err.find("--help"), std::string::npos) << err;
  }
}

TEST(Cli, HelpListsEveryKeyWithItsDefault) {
  CLI::App app("test", "prog");
  ClusterFlags flags(app);
  Argv a({"--help"});
  testing::internal::CaptureStdout();
  const auto rc = ParseCommandLine(app, a.argc(), a.argv());
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
  for (const auto& k : ClusterConfigKeys()) {
    EXPECT_NE(out.find("--" + k.name), std::string::npos) << k.name;
  }
  EXPECT_NE(out.find("default '2000'"), std::string::npos);  // router.port
}

TEST(Cli, VllmStyleAliases) {
  CLI::App app("test", "prog");
  ClusterFlags flags(app);
  Argv a({"--port", "8080", "--tensor-parallel-size", "2", "--max-model-len", "256",
          "--served-model-name", "m", "--api-key", "k1", "--model", "/x/y", "--block-size", "32",
          "--engine.block_size", "8"});
  ASSERT_FALSE(ParseCommandLine(app, a.argc(), a.argv()).has_value());
  auto c = flags.Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->router.http.port, 8080);
  EXPECT_EQ(c->engine.tensor_parallel_size, 2);
  EXPECT_EQ(c->model.max_model_len, 256);
  EXPECT_EQ(c->model.served_model_name, "m");
  EXPECT_EQ(c->router.api_keys, std::vector<std::string>{"k1"});
  EXPECT_EQ(c->model.path, "/x/y");
  EXPECT_EQ(c->engine.block_size, 8);  // --section.key wins over its alias
}

TEST(Cli, EnvironmentBetweenFileAndFlags) {
  const auto file = WriteTemp("cli_env", "engine: {block_size: 32, max_num_seqs: 7}\n");
  const auto env = [](const std::string& name) -> const char* {
    if (name == "LLM_ENGINE_MAX_NUM_SEQS") return "9";
    if (name == "LLM_ENGINE_BLOCK_SIZE") return "64";
    if (name == "LLM_ROUTER_UPSTREAMS") return "h:1,h:2";
    return nullptr;
  };
  auto c = LoadClusterConfig(file.string(), {{"engine.block_size", "4"}}, env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.scheduler.max_num_seqs, 9);  // env > YAML
  EXPECT_EQ(c->engine.block_size, 4);              // flag > env
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"h:1", "h:2"}));
  const auto bad = [](const std::string& name) -> const char* {
    return name == "LLM_ROUTER_PORT" ? "http" : nullptr;
  };
  auto e = LoadClusterConfig(file.string(), {}, bad);
  std::filesystem::remove(file);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("LLM_ROUTER_PORT"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("router.port"), std::string::npos);
  EXPECT_EQ(ConfigEnvName("coordinator.tls_cert_file"), "LLM_COORDINATOR_TLS_CERT_FILE");
}

TEST(Cli, VersionOnEveryBinary) {
  CLI::App app("test", "prog");
  Argv a({"--version"});
  testing::internal::CaptureStdout();
  const auto rc = ParseCommandLine(app, a.argc(), a.argv());
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
  EXPECT_EQ(out, std::string(VersionLine()) + "\n");
  EXPECT_NE(out.find(Version()), std::string::npos);
}

}  // namespace
}  // namespace llm
