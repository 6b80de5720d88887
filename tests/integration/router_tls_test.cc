// HTTPS on the real router binary (router.tls_cert_file / router.tls_key_file): API keys work as
// before over TLS, a plain HTTP client is disconnected while HTTPS goes on, the bind-address rule
// is unchanged (no key: 127.0.0.1 only), and a missing key file or an unusable certificate stops
// start-up naming it. The routers have no coordinator: /v1/models needs none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/common/https_client.h"
#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

using ::llm::testing::HttpsGets;

class RouterTls : public ::testing::Test {
 protected:
  void SetUp() override {
    LLM_E2E_REQUIRE_SHARED();
    if (!::llm::testing::HaveOpensslCli()) {
      GTEST_SKIP() << "openssl is not installed (needed to make a test certificate)";
    }
    dir_ = (std::filesystem::temp_directory_path() / ("router_tls_" + std::to_string(getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";
    ASSERT_TRUE(::llm::testing::MakeSelfSignedCert(cert_, key_));
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A router on `port` with the test certificate and `flags`.
  std::unique_ptr<ChildProcess> StartRouter(int port, std::vector<std::string> flags,
                                            const std::string& name) {
    std::vector<std::string> argv = {
        LLM_ROUTER_BIN,  "--model.path",       SharedPath(Cluster::kModel),
        "--router.port", std::to_string(port), "--router.upstreams",
        "127.0.0.1:1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return std::make_unique<ChildProcess>(argv, name);
  }

  static bool Serving(ChildProcess& router) {
    return WaitFor(
        [&] { return router.Exited() || router.Log().find("serving model") != std::string::npos; },
        30.0);
  }

  std::string dir_, cert_, key_;
};

TEST_F(RouterTls, HttpsWithApiKeysAndPlainHttpIsDisconnected) {
  const int port = FreePort();
  auto router = StartRouter(port,
                            {"--router.host", "127.0.0.1", "--router.api_keys", "sk-tls",
                             "--router.tls_cert_file", cert_, "--router.tls_key_file", key_},
                            "e2e_router_tls");
  ASSERT_TRUE(Serving(*router)) << router->Log();
  ASSERT_FALSE(router->Exited()) << router->Log();
  EXPECT_NE(router->Log().find("on https://127.0.0.1:" + std::to_string(port)), std::string::npos)
      << router->Log();
  // The key is needed as over plain HTTP.
  auto replies = HttpsGets(port, cert_, {"/v1/models"});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].status, 401) << replies[0].body;
  replies = HttpsGets(port, cert_, {"/v1/models", "/v1/models"}, "Bearer sk-tls");
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].status, 200) << replies[0].body;
  EXPECT_NE(replies[1].body.find("stories260K"), std::string::npos) << replies[1].body;
  // Plain HTTP on the TLS port: disconnected without an answer; HTTPS goes on.
  boost::system::error_code end;
  const std::string plain = ::llm::testing::PlainHttpToPort(port, &end);
  EXPECT_NE(end, boost::beast::error::timeout) << "a plain HTTP client was left hanging";
  EXPECT_NE(plain.rfind("HTTP/", 0), 0u) << plain;
  EXPECT_EQ(HttpsGets(port, cert_, {"/v1/models"}, "Bearer sk-tls").at(0).status, 200);
  EXPECT_FALSE(router->Exited()) << router->Log();
}

TEST_F(RouterTls, WithoutAKeyItStillListensOnLoopbackOnly) {
  const int port = FreePort();
  auto router = StartRouter(port, {"--router.tls_cert_file", cert_, "--router.tls_key_file", key_},
                            "e2e_router_tls_loopback");
  ASSERT_TRUE(Serving(*router)) << router->Log();
  EXPECT_NE(router->Log().find("on https://127.0.0.1:"), std::string::npos) << router->Log();
  EXPECT_NE(router->Log().find("listens on 127.0.0.1 only"), std::string::npos) << router->Log();
  EXPECT_EQ(HttpsGets(port, cert_, {"/v1/models"}).at(0).status, 200);
}

TEST_F(RouterTls, FilesThatCannotBeUsedStopStartUp) {
  auto no_key = StartRouter(FreePort(), {"--router.tls_cert_file", cert_}, "e2e_router_tls_nokey");
  ASSERT_TRUE(no_key->WaitExit(30.0));
  EXPECT_NE(no_key->exit_status().value_or(0), 0);
  EXPECT_NE(no_key->Log().find("router.tls_key_file"), std::string::npos) << no_key->Log();

  const std::string missing = dir_ + "/missing.pem";
  auto bad =
      StartRouter(FreePort(), {"--router.tls_cert_file", missing, "--router.tls_key_file", key_},
                  "e2e_router_tls_missing");
  ASSERT_TRUE(bad->WaitExit(30.0));
  EXPECT_NE(bad->exit_status().value_or(0), 0);
  EXPECT_NE(bad->Log().find("router.tls_cert_file"), std::string::npos) << bad->Log();
  EXPECT_NE(bad->Log().find(missing), std::string::npos) << bad->Log();
}

}  // namespace
}  // namespace llm::e2e
