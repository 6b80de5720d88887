// The coordinator's gRPC statuses reach HTTP clients as upstream_errors.h says, through the
// real HTTP server, OpenAI service and upstream pool in front of a fake coordinator that
// answers Generate with the status a test picks: plain responses (with Retry-After for 429)
// and, for streams, a last error event.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "proto/llm.grpc.pb.h"
#include "router/http_server.h"
#include "router/openai_service.h"
#include "router/upstream_errors.h"
#include "router/upstream_pool.h"

namespace llm::router {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

const std::string kModelDir = std::string(LLM_SHARED_DIR) + "/models/stories260K";

// Healthy, and refuses every Generate with the status set by the test; `hold` makes it wait
// (for the router's deadline) instead.
class FakeCoordinator final : public v1::Generation::Service, public v1::Admin::Service {
 public:
  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    ++generate_calls_;
    if (hold_) {
      while (!ctx->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ++cancelled_calls_;
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    if (speaks_version_ != request->api_version()) {
      // What the real coordinator answers to a version it does not speak.
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "api_version " + std::to_string(request->api_version()) +
                              " is not supported; this coordinator speaks version " +
                              std::to_string(speaks_version_));
    }
    if (answer_) {  // four tokens, then max_tokens
      v1::GenerateResponse out;
      for (int id : {300, 301, 302, 303}) out.add_token_ids(id);
      out.set_finish_reason(v1::FINISH_REASON_MAX_TOKENS);
      out.mutable_usage()->set_prompt_tokens(request->prompt_token_ids_size());
      out.mutable_usage()->set_completion_tokens(4);
      writer->Write(out);
      return grpc::Status::OK;
    }
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*,
                      v1::HealthResponse* r) override {
    r->set_serving(true);
    r->set_model("stories260K");
    r->set_max_model_len(512);
    return grpc::Status::OK;
  }
  void Refuse(grpc::StatusCode code, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = grpc::Status(code, message);
  }
  void SpeakVersion(uint32_t v) { speaks_version_ = v; }
  void Hold(bool hold) { hold_ = hold; }
  void Answer(bool answer) { answer_ = answer; }
  int generate_calls() const { return generate_calls_.load(); }
  int cancelled_calls() const { return cancelled_calls_.load(); }

 private:
  std::mutex mu_;
  grpc::Status status_;
  std::atomic<uint32_t> speaks_version_{kGenerateApiVersion};
  std::atomic<bool> hold_{false};
  std::atomic<bool> answer_{false};
  std::atomic<int> generate_calls_{0};
  std::atomic<int> cancelled_calls_{0};  // held calls that saw the router cancel
};

struct Reply {
  int status = 0;
  std::string body;
  std::string retry_after;
  std::string content_type;
};

// One blocking request with 10 s socket timeouts.
Reply Call(int port, const std::string& target, const json& body) {
  asio::io_context ioc;
  asio::ip::tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
  if (ec) return {};
  timeval tv{10, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.body() = body.dump();
  req.prepare_payload();
  http::write(socket, req, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res, ec);
  if (ec) return {};
  return {static_cast<int>(res.result_int()), res.body(),
          std::string(res[http::field::retry_after]), std::string(res[http::field::content_type])};
}

// The last `data:` payload before `data: [DONE]` of an SSE body ("" when there is no [DONE]).
std::string LastEventBeforeDone(const std::string& body) {
  const size_t done = body.rfind("data: [DONE]");
  if (done == std::string::npos) return "";
  const size_t start = body.rfind("data: ", done - 1);
  if (start == std::string::npos) return "";
  return body.substr(start + 6, done - start - 8);
}

class UpstreamErrorsHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModelDir)) GTEST_SKIP() << "missing " << kModelDir;
    grpc::ServerBuilder builder;
    int grpc_port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &grpc_port);
    builder.RegisterService(static_cast<v1::Generation::Service*>(&fake_));
    builder.RegisterService(static_cast<v1::Admin::Service*>(&fake_));
    grpc_ = builder.BuildAndStart();
    ASSERT_NE(grpc_port, 0);
    auto tokenizer = Tokenizer::FromDir(kModelDir);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    pool_ = std::make_unique<UpstreamPool>(
        std::vector<std::string>{"127.0.0.1:" + std::to_string(grpc_port)},
        std::chrono::milliseconds(60000));
    pool_->Start(std::chrono::milliseconds(5000));
    ASSERT_TRUE(pool_->AnyHealthy());
    ServiceOptions options;
    options.limits.served_model_name = "stories260K";
    options.request_timeout = std::chrono::seconds(1);
    service_ = std::make_unique<OpenAiService>(
        options, std::shared_ptr<const Tokenizer>(std::move(tokenizer).value()), *pool_);
    HttpServerOptions http_options;
    http_options.host = "127.0.0.1";
    http_options.port = 0;
    server_ = std::make_unique<HttpServer>(http_options, *service_);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (pool_) pool_->Stop();
    if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  json Body(bool stream) const {
    return {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"stream", stream}};
  }
  int port() const { return server_->port(); }

  FakeCoordinator fake_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<UpstreamPool> pool_;
  std::unique_ptr<OpenAiService> service_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(UpstreamErrorsHttp, FullQueueIs429WithRetryAfterOrALastErrorEvent) {
  fake_.Refuse(grpc::StatusCode::RESOURCE_EXHAUSTED, "the waiting queue is full");
  const Reply r = Call(port(), "/v1/completions", Body(false));
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.retry_after, std::to_string(kUpstreamRetryAfterS));
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "rate_limit_error");
  const Reply s = Call(port(), "/v1/completions", Body(true));
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.content_type, "text/event-stream");
  const json last = json::parse(LastEventBeforeDone(s.body), nullptr, false);
  EXPECT_EQ(last["error"]["type"], "rate_limit_error") << s.body;
}

TEST_F(UpstreamErrorsHttp, ShuttingDownIs503) {
  fake_.Refuse(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
  const Reply r = Call(port(), "/v1/completions", Body(false));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("shutting down"), std::string::npos) << r.body;
}

TEST_F(UpstreamErrorsHttp, RouterDeadlineIs504Timeout) {
  fake_.Hold(true);  // the router's deadline (1 s here) ends the call
  const Reply r = Call(port(), "/v1/completions", Body(false));
  fake_.Hold(false);
  ASSERT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "timeout");
}

TEST_F(UpstreamErrorsHttp, ApiVersionMismatchIs500NamingTheVersions) {
  fake_.SpeakVersion(kGenerateApiVersion + 1);
  const Reply r = Call(port(), "/v1/completions", Body(false));
  ASSERT_EQ(r.status, 500) << r.body;
  const std::string message = json::parse(r.body)["error"]["message"];
  EXPECT_NE(message.find("api_version " + std::to_string(kGenerateApiVersion)), std::string::npos)
      << message;
  EXPECT_NE(message.find("speaks version " + std::to_string(kGenerateApiVersion + 1)),
            std::string::npos)
      << message;
}

// An upstream that cancels a call it was given (what grpc::Server::Shutdown does to a call that
// meets it) before any token: the router sends the request to another upstream, as for
// UNAVAILABLE, so the client never sees the shutdown. Distinct prompts spread the first tries
// over both upstreams by prefix affinity; the dropping one must have been tried.
TEST(UpstreamRetry, CancelledByTheUpstreamIsRetriedOnAnother) {
  if (!std::filesystem::exists(kModelDir)) GTEST_SKIP() << "missing " << kModelDir;
  FakeCoordinator dropping, answering;
  dropping.Refuse(grpc::StatusCode::CANCELLED, "Cancelled");
  answering.Answer(true);
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::string> addresses;
  for (FakeCoordinator* fake : {&dropping, &answering}) {
    grpc::ServerBuilder builder;
    int grpc_port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &grpc_port);
    builder.RegisterService(static_cast<v1::Generation::Service*>(fake));
    builder.RegisterService(static_cast<v1::Admin::Service*>(fake));
    servers.push_back(builder.BuildAndStart());
    ASSERT_NE(grpc_port, 0);
    addresses.push_back("127.0.0.1:" + std::to_string(grpc_port));
  }
  auto tokenizer = Tokenizer::FromDir(kModelDir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  UpstreamPool pool(addresses, std::chrono::milliseconds(60000));
  pool.Start(std::chrono::milliseconds(5000));
  ServiceOptions options;
  options.limits.served_model_name = "stories260K";
  options.request_timeout = std::chrono::seconds(5);
  OpenAiService service(options, std::shared_ptr<const Tokenizer>(std::move(tokenizer).value()),
                        pool);
  HttpServerOptions http_options;
  http_options.host = "127.0.0.1";
  http_options.port = 0;
  HttpServer server(http_options, service);
  ASSERT_TRUE(server.Start().ok());
  for (int i = 0; i < 8; ++i) {
    const bool stream = i % 2 == 1;
    const json body = {{"prompt", "Once upon a time " + std::to_string(i) + " cats"},
                       {"max_tokens", 4},
                       {"stream", stream}};
    const Reply r = Call(server.port(), "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body.find("error"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"text\""), std::string::npos) << r.body;
  }
  EXPECT_GT(dropping.generate_calls(), 0) << "no request tried the dropping upstream first";
  EXPECT_EQ(answering.generate_calls(), 8);

  // A client that goes away makes the router cancel its call: that CANCELLED is the router's
  // own and goes nowhere else (one Generate call in all, not one per upstream).
  const int before = dropping.generate_calls() + answering.generate_calls();
  dropping.Hold(true);
  answering.Hold(true);
  {
    asio::io_context ioc;
    asio::ip::tcp::socket socket(ioc);
    socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port())});
    http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"stream", true}}.dump();
    req.prepare_payload();
    http::write(socket, req);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (dropping.generate_calls() + answering.generate_calls() == before &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }  // the client closes its connection
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (dropping.cancelled_calls() + answering.cancelled_calls() == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(dropping.cancelled_calls() + answering.cancelled_calls(), 1)
      << "the router did not cancel the call of a client that left";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // time for a wrong retry
  EXPECT_EQ(dropping.generate_calls() + answering.generate_calls(), before + 1);
  dropping.Hold(false);
  answering.Hold(false);
  server.Stop();
  pool.Stop();
  for (auto& s : servers) s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace
}  // namespace llm::router
