// TLS on the router's HTTP port (router.tls_cert_file / router.tls_key_file): a self-signed
// certificate made at test time with the openssl CLI (the tests skip, saying so, without it);
// HTTPS requests verified against it get answers, keep-alive included; a plain HTTP client on
// the TLS port is disconnected without an answer and the server keeps serving; files that cannot
// be used stop Start() with an error naming the key and the file. Every wait is bounded (10 s
// per operation).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "router/http_server.h"
#include "tests/common/https_client.h"

namespace llm::router {
namespace {

using ::llm::testing::HttpsGets;
using ::llm::testing::MakeSelfSignedCert;

bool WaitFor(const std::function<bool()>& pred, double timeout_s = 10.0) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class OkHandler final : public RequestHandler {
 public:
  std::shared_ptr<PendingExchange> Handle(const HttpRequest& request,
                                          const std::shared_ptr<ResponseSink>& sink) override {
    sink->Respond({200, "application/json", "{\"path\":\"" + request.path + "\"}", {}});
    return nullptr;
  }
};

class HttpTls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!::llm::testing::HaveOpensslCli()) {
      GTEST_SKIP() << "openssl is not installed (needed to make a test certificate)";
    }
    dir_ = (std::filesystem::temp_directory_path() /
            ("http_tls_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::create_directories(dir_);
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";
    ASSERT_TRUE(MakeSelfSignedCert(cert_, key_)) << "openssl could not make a certificate";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  HttpServerOptions Options(const std::string& cert, const std::string& key) const {
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.io_timeout_s = 5;
    o.tls_cert_file = cert;
    o.tls_key_file = key;
    return o;
  }

  // Start()'s error with these files (empty when it started).
  std::string StartError(const std::string& cert, const std::string& key) {
    HttpServer server(Options(cert, key), handler_);
    const Status s = server.Start();
    return s.ok() ? "" : s.ToString();
  }

  std::string dir_, cert_, key_;
  OkHandler handler_;
};

TEST_F(HttpTls, HttpsGets200AndPlainHttpIsDisconnected) {
  HttpServer server(Options(cert_, key_), handler_);
  ASSERT_TRUE(server.Start().ok());
  auto replies = HttpsGets(server.port(), cert_, {"/health"});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].status, 200);
  EXPECT_EQ(replies[0].body, "{\"path\":\"/health\"}");

  boost::system::error_code end;
  const std::string plain = ::llm::testing::PlainHttpToPort(server.port(), &end);
  EXPECT_NE(end, boost::beast::error::timeout) << "the server left a plain HTTP client hanging";
  EXPECT_NE(plain.rfind("HTTP/", 0), 0u) << "a plain HTTP request was answered: " << plain;

  // The server goes on serving HTTPS, and the refused connection is gone.
  replies = HttpsGets(server.port(), cert_, {"/health"});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].status, 200);
  EXPECT_TRUE(WaitFor([&] { return server.open_connections() == 0; }));
  server.Stop();
}

TEST_F(HttpTls, KeepAliveOverTls) {
  HttpServer server(Options(cert_, key_), handler_);
  ASSERT_TRUE(server.Start().ok());
  const auto replies = HttpsGets(server.port(), cert_, {"/health", "/v1/models", "/health"});
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(replies[0].keep_alive);
  EXPECT_EQ(replies[1].body, "{\"path\":\"/v1/models\"}");
  EXPECT_FALSE(replies[2].keep_alive);  // asked to close: the server closes after it
  EXPECT_TRUE(WaitFor([&] { return server.open_connections() == 0; }));
  server.Stop();
}

TEST_F(HttpTls, AClientThatDoesNotTrustTheCertificateFailsTheHandshake) {
  HttpServer server(Options(cert_, key_), handler_);
  ASSERT_TRUE(server.Start().ok());
  const std::string other_cert = dir_ + "/other_cert.pem", other_key = dir_ + "/other_key.pem";
  ASSERT_TRUE(MakeSelfSignedCert(other_cert, other_key));
  EXPECT_THROW(HttpsGets(server.port(), other_cert, {"/health"}), boost::system::system_error);
  EXPECT_EQ(HttpsGets(server.port(), cert_, {"/health"}).at(0).status, 200);
  server.Stop();
}

TEST_F(HttpTls, FilesThatCannotBeUsedStopStartUpNamingThem) {
  // One without the other.
  std::string e = StartError(cert_, "");
  EXPECT_NE(e.find("router.tls_key_file"), std::string::npos) << e;
  e = StartError("", key_);
  EXPECT_NE(e.find("router.tls_cert_file"), std::string::npos) << e;
  // Missing.
  e = StartError(dir_ + "/missing.pem", key_);
  EXPECT_NE(e.find("router.tls_cert_file"), std::string::npos) << e;
  EXPECT_NE(e.find(dir_ + "/missing.pem"), std::string::npos) << e;
  // Not PEM.
  const std::string junk = dir_ + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  e = StartError(junk, key_);
  EXPECT_NE(e.find("router.tls_cert_file"), std::string::npos) << e;
  EXPECT_NE(e.find(junk), std::string::npos) << e;
  e = StartError(cert_, junk);
  EXPECT_NE(e.find("router.tls_key_file"), std::string::npos) << e;
  EXPECT_NE(e.find(junk), std::string::npos) << e;
  // The key of another certificate.
  const std::string other_cert = dir_ + "/other_cert.pem", other_key = dir_ + "/other_key.pem";
  ASSERT_TRUE(MakeSelfSignedCert(other_cert, other_key));
  e = StartError(cert_, other_key);
  EXPECT_NE(e.find("router.tls_key_file"), std::string::npos) << e;
  EXPECT_NE(e.find(other_key), std::string::npos) << e;
  // And the right pair starts.
  EXPECT_EQ(StartError(cert_, key_), "");
}

}  // namespace
}  // namespace llm::router
