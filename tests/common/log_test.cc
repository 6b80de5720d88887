// common/log: the text and JSON-lines formats of log events, written to the real stderr (the
// test points file descriptor 2 at a temp file while it logs).
#include "common/log.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "common/cluster_config.h"

namespace llm {
namespace {

// What `fn` wrote to stderr.
std::string CaptureStderr(const std::function<void()>& fn) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("log_test_" + std::to_string(getpid()))).string();
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* f = std::fopen(path.c_str(), "w");
  dup2(fileno(f), 2);
  fn();
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(f);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  return text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { InitLogging("tester"); }
  void TearDown() override { ASSERT_TRUE(ConfigureLogging(LogSection{}).ok()); }
};

TEST_F(LogTest, TextLinesCarryFieldsAsKeyValuePairs) {
  ASSERT_TRUE(ConfigureLogging({"info", "text"}).ok());
  const std::string out = CaptureStderr([] {
    LogEvent(LogLevel::kInfo, "request finished",
             {{"request_id", "abc-1"}, {"status", 200}, {"note", "two words"}, {"ok", true}});
  });
  const auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_NE(lines[0].find("[tester] [info] request finished request_id=abc-1 status=200 "
                          "note=\"two words\" ok=true"),
            std::string::npos)
      << lines[0];
}

TEST_F(LogTest, JsonLinesAreOneObjectEachWithEscapedHostileText) {
  ASSERT_TRUE(ConfigureLogging({"info", "json"}).ok());
  // A client-chosen id with a quote, a newline and invalid UTF-8 must not break the line.
  const std::string hostile = std::string("x\"y\nz") + "\xff";
  const std::string out = CaptureStderr([&] {
    spdlog::info("plain message {}", 7);
    LogEvent(LogLevel::kWarn, "request finished", {{"request_id", hostile}, {"status", 400}});
    LogEvent(LogLevel::kDebug, "not shown at info", {{"k", 1}});
  });
  const auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  const auto first = nlohmann::json::parse(lines[0], nullptr, false);
  ASSERT_TRUE(first.is_object()) << lines[0];
  EXPECT_EQ(first["msg"], "plain message 7");
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["process"], "tester");
  const std::string time = first["time"];
  EXPECT_EQ(time.size(), 24u) << time;  // 2026-11-24T08:45:16.123Z
  EXPECT_EQ(time.back(), 'Z');
  const auto second = nlohmann::json::parse(lines[1], nullptr, false);
  ASSERT_TRUE(second.is_object()) << lines[1];
  EXPECT_EQ(second["level"], "warning");
  EXPECT_EQ(second["status"], 400);
  const std::string id = second["request_id"];
  EXPECT_EQ(id.substr(0, 5), "x\"y\nz");  // the invalid byte is replaced
}

TEST_F(LogTest, LevelFiltersAndBadValuesNameTheKey) {
  ASSERT_TRUE(ConfigureLogging({"error", "text"}).ok());
  const std::string out = CaptureStderr([] {
    LogEvent(LogLevel::kWarn, "hidden", {});
    LogEvent(LogLevel::kError, "shown", {});
  });
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("shown"), std::string::npos) << out;

  const Status bad_level = ConfigureLogging({"loud", "text"});
  EXPECT_FALSE(bad_level.ok());
  EXPECT_NE(bad_level.message().find("log.level"), std::string::npos);
  const Status bad_format = ConfigureLogging({"info", "xml"});
  EXPECT_FALSE(bad_format.ok());
  EXPECT_NE(bad_format.message().find("log.format"), std::string::npos);

  // The config schema refuses them too, naming the key.
  auto c = ParseClusterConfig("log: {format: xml}", "cluster.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("log.format"), std::string::npos);
  c = ParseClusterConfig("log: {level: debug, format: json}", "cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->log.level, "debug");
  EXPECT_EQ(c->log.format, "json");
}

}  // namespace
}  // namespace llm
