// The router's operational knobs are cluster.yaml keys (issue 6): defaults, values, ranges with
// errors naming the key, and deploy/cluster.yaml documents each of them with its default.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/cluster_config.h"

namespace llm {
namespace {

TEST(RouterConfig, Defaults) {
  auto c = ParseClusterConfig("", "empty.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->router.health_check_interval_ms, 1000);
  EXPECT_EQ(c->router.shutdown_grace_s, 30);
  EXPECT_EQ(c->router.http.io_timeout_s, 60);
  EXPECT_EQ(c->router.http.write_queue_bytes, 256 * 1024);
  EXPECT_EQ(c->router.http.max_header_bytes, 16 * 1024);
  EXPECT_EQ(c->router.http.io_threads, 0);      // the number of cores, at least 2
  EXPECT_EQ(c->router.http.tls_cert_file, "");  // plain HTTP
  EXPECT_EQ(c->router.http.tls_key_file, "");
}

// HTTPS on the router's port: both files or neither; one alone is an error naming the other.
TEST(RouterConfig, TlsCertificateAndKeyGoTogether) {
  auto c = ParseClusterConfig("router: {tls_cert_file: /etc/llm/cert.pem}", "cluster.yaml",
                              {{"router.tls_key_file", "/etc/llm/key.pem"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->router.http.tls_cert_file, "/etc/llm/cert.pem");
  EXPECT_EQ(c->router.http.tls_key_file, "/etc/llm/key.pem");
  c = ParseClusterConfig("router: {tls_cert_file: /etc/llm/cert.pem}", "cluster.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("router.tls_key_file"), std::string::npos)
      << c.status().message();
  c = ParseClusterConfig("", "cluster.yaml", {{"router.tls_key_file", "/etc/llm/key.pem"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("router.tls_cert_file"), std::string::npos)
      << c.status().message();
}

TEST(RouterConfig, KeysAndOverrides) {
  auto c = ParseClusterConfig(R"(
router:
  health_check_interval_ms: 250
  shutdown_grace_s: 5
  io_timeout_s: 7
  write_queue_bytes: 65536
  max_header_bytes: 4096
)",
                              "cluster.yaml", {{"router.io_timeout_s", "9"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->router.health_check_interval_ms, 250);
  EXPECT_EQ(c->router.shutdown_grace_s, 5);
  EXPECT_EQ(c->router.http.io_timeout_s, 9);  // the override wins
  EXPECT_EQ(c->router.http.write_queue_bytes, 65536);
  EXPECT_EQ(c->router.http.max_header_bytes, 4096);
}

TEST(RouterConfig, OutOfRangeValuesNameTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"health_check_interval_ms", "0"}, {"shutdown_grace_s", "-1"},  {"io_timeout_s", "0"},
      {"write_queue_bytes", "10"},       {"max_header_bytes", "100"}, {"io_threads", "-1"}};
  for (const auto& [key, value] : bad) {
    auto c =
        ParseClusterConfig(std::string("router: {") + key + ": " + value + "}", "cluster.yaml");
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_NE(c.status().message().find(std::string("router.") + key), std::string::npos)
        << c.status().message();
  }
}

// deploy/cluster.yaml is the operator's reference: it parses, and its router values are the
// defaults (so the file documents them truthfully).
TEST(RouterConfig, DeployExampleDocumentsEveryRouterKnob) {
  std::ifstream in(std::string(LLM_SOURCE_DIR) + "/deploy/cluster.yaml");
  ASSERT_TRUE(in) << "missing deploy/cluster.yaml";
  std::stringstream text;
  text << in.rdbuf();
  auto example = ParseClusterConfig(text.str(), "deploy/cluster.yaml");
  ASSERT_TRUE(example.ok()) << example.status().ToString();
  auto defaults = ParseClusterConfig("", "empty.yaml");
  ASSERT_TRUE(defaults.ok());
  for (const char* key :
       {"health_check_interval_ms:", "shutdown_grace_s:", "io_timeout_s:", "write_queue_bytes:",
        "max_header_bytes:", "io_threads:", "tls_cert_file:", "tls_key_file:"}) {
    const size_t router = text.str().find("\nrouter:");
    ASSERT_NE(router, std::string::npos);
    EXPECT_NE(text.str().find(std::string("  ") + key, router), std::string::npos)
        << "deploy/cluster.yaml does not document router." << key;
  }
  EXPECT_EQ(example->router.health_check_interval_ms, defaults->router.health_check_interval_ms);
  EXPECT_EQ(example->router.shutdown_grace_s, defaults->router.shutdown_grace_s);
  EXPECT_EQ(example->router.http.io_timeout_s, defaults->router.http.io_timeout_s);
  EXPECT_EQ(example->router.http.write_queue_bytes, defaults->router.http.write_queue_bytes);
  EXPECT_EQ(example->router.http.max_header_bytes, defaults->router.http.max_header_bytes);
  EXPECT_EQ(example->router.http.io_threads, defaults->router.http.io_threads);
  EXPECT_EQ(example->router.http.tls_cert_file, defaults->router.http.tls_cert_file);
  EXPECT_EQ(example->router.http.tls_key_file, defaults->router.http.tls_key_file);
}

}  // namespace
}  // namespace llm
