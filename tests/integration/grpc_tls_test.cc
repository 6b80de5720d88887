// TLS between router and coordinator: a coordinator with coordinator.tls_cert_file/key serves
// a router that trusts its certificate (router.upstream_tls_ca_file), and the golden text
// comes through; a router without the CA cannot reach it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

TEST(GrpcTls, RouterReachesATlsCoordinatorWithTheCa) {
  LLM_E2E_REQUIRE_SHARED();
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "openssl is not installed (needed to make a test certificate)";
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("grpc_tls_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string make =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0) << "openssl could not make a certificate";
  Cluster cluster({"--coordinator.tls_cert_file", cert, "--coordinator.tls_key_file", key},
                  {"--router.upstream_tls_ca_file", cert});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const HttpResult r = Post(cluster.port(), "/v1/completions",
                            {{"model", "stories260K"},
                             {"prompt", "Once upon a time"},
                             {"max_tokens", 8},
                             {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 8);
  // Without the CA the router never sees a healthy coordinator.
  const int plain = cluster.AddRouter({}, cluster.upstream());
  ASSERT_NE(plain, 0) << cluster.Logs();
  EXPECT_EQ(Http(plain, "GET", "/health", "", 5.0).status, 503);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace llm::e2e
