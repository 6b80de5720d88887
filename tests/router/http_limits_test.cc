// Back-pressure of the HTTP server (issue 6): beyond max_inflight_requests exchanges in
// progress or max_connections open connections a request gets 429 with Retry-After and
// OpenAI error JSON (rate_limit_error); GET /health is always answered. A fake handler holds
// exchanges open so the limits can be reached without an engine.
#include "router/http_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace llm::router {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

bool WaitFor(const std::function<bool()>& pred, double timeout_s = 10.0) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// GET /health answers at once; POST /hold stays pending until Release().
class HoldingHandler final : public RequestHandler {
 public:
  struct Held final : PendingExchange {
    void Cancel() override {}
  };

  std::shared_ptr<PendingExchange> Handle(const HttpRequest& request,
                                          const std::shared_ptr<ResponseSink>& sink) override {
    if (request.path != "/hold") {
      sink->Respond({200, "application/json", "{\"status\":\"ok\"}", {}});
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    held_.push_back(sink);
    ++started_;
    return std::make_shared<Held>();
  }
  int started() const { return started_.load(); }
  // Answers every held exchange.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& sink : held_) {
      sink->Post([sink] { sink->Respond({200, "application/json", "{}", {}}); });
    }
    held_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<ResponseSink>> held_;
  std::atomic<int> started_{0};
};

struct Reply {
  int status = 0;  // 0: none (timeout or closed)
  std::string body;
  std::string retry_after;
  bool keep_alive = true;
};

// A blocking client whose every read and write times out after 10 s.
class Client {
 public:
  explicit Client(int port) : socket_(ioc_) {
    beast::error_code ec;
    socket_.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
    timeval tv{10, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  void Send(http::verb verb, const std::string& target) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (verb == http::verb::post) req.body() = "{}";
    req.prepare_payload();
    beast::error_code ec;
    http::write(socket_, req, ec);
  }
  Reply Receive() {
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(socket_, buffer_, res, ec);
    if (ec) return {};
    return {static_cast<int>(res.result_int()), res.body(),
            std::string(res[http::field::retry_after]), res.keep_alive()};
  }
  Reply Call(http::verb verb, const std::string& target) {
    Send(verb, target);
    return Receive();
  }
  void Close() {
    beast::error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  asio::io_context ioc_;
  asio::ip::tcp::socket socket_;
  beast::flat_buffer buffer_;
};

void ExpectTooMany(const Reply& r, const std::string& key) {
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.retry_after, "1");
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["type"], "rate_limit_error");
  EXPECT_EQ(e["code"], "rate_limit_exceeded");
  EXPECT_NE(e["message"].get<std::string>().find(key), std::string::npos) << r.body;
}

TEST(HttpLimits, RequestsBeyondMaxInflightGet429WithRetryAfter) {
  HoldingHandler handler;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.max_inflight_requests = 2;
  HttpServer server(options, handler);
  ASSERT_TRUE(server.Start().ok());
  Client a(server.port()), b(server.port()), c(server.port());
  a.Send(http::verb::post, "/hold");
  b.Send(http::verb::post, "/hold");
  ASSERT_TRUE(WaitFor([&] { return handler.started() == 2; }));
  ExpectTooMany(c.Call(http::verb::post, "/hold"), "router.max_inflight_requests");
  EXPECT_EQ(c.Call(http::verb::get, "/health").status, 200);  // health is never refused
  handler.Release();
  EXPECT_EQ(a.Receive().status, 200);
  EXPECT_EQ(b.Receive().status, 200);
  // The slots are free again: the same connection now gets through.
  c.Send(http::verb::post, "/hold");
  EXPECT_TRUE(WaitFor([&] { return handler.started() == 3; }));
  handler.Release();
  EXPECT_EQ(c.Receive().status, 200);
  server.Stop();
}

TEST(HttpLimits, ClosedClientsGiveTheirSlotBack) {
  HoldingHandler handler;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.max_inflight_requests = 1;
  HttpServer server(options, handler);
  ASSERT_TRUE(server.Start().ok());
  {
    Client a(server.port());
    a.Send(http::verb::post, "/hold");
    ASSERT_TRUE(WaitFor([&] { return handler.started() == 1; }));
    a.Close();  // pending exchange cancelled: its slot must come back
  }
  // The server notices the close asynchronously: probe until a request is admitted (a refused
  // probe gets its 429 and does not reach the handler).
  const bool admitted = WaitFor([&] {
    Client probe(server.port());
    probe.Send(http::verb::post, "/hold");
    return WaitFor([&] { return handler.started() >= 2; }, 0.5);
  });
  EXPECT_TRUE(admitted);
  handler.Release();
  server.Stop();
}

TEST(HttpLimits, ConnectionsBeyondMaxConnectionsGet429AndAreClosed) {
  HoldingHandler handler;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.max_connections = 2;
  HttpServer server(options, handler);
  ASSERT_TRUE(server.Start().ok());
  auto idle1 = std::make_unique<Client>(server.port());
  auto idle2 = std::make_unique<Client>(server.port());
  ASSERT_TRUE(WaitFor([&] { return server.open_connections() == 2; }));
  Client over(server.port());
  const Reply r = over.Call(http::verb::post, "/hold");
  ExpectTooMany(r, "router.max_connections");
  EXPECT_FALSE(r.keep_alive);  // the connection is closed to make room
  EXPECT_EQ(handler.started(), 0);
  Client health(server.port());
  EXPECT_EQ(health.Call(http::verb::get, "/health").status, 200);
  health.Close();
  over.Close();
  idle1.reset();
  idle2.reset();
  ASSERT_TRUE(WaitFor([&] { return server.open_connections() == 0; }));
  Client ok(server.port());
  ok.Send(http::verb::post, "/hold");
  EXPECT_TRUE(WaitFor([&] { return handler.started() == 1; }));
  handler.Release();
  EXPECT_EQ(ok.Receive().status, 200);
  server.Stop();
}

// Drain (router SIGTERM): exchanges in progress go on and count as busy until written; new
// requests on open connections, /health included, get 503 and the connection closes; new
// connections are refused.
TEST(HttpLimits, DrainFinishesExchangesInProgressAndRefusesNewOnes) {
  HoldingHandler handler;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  HttpServer server(options, handler);
  ASSERT_TRUE(server.Start().ok());
  Client held(server.port()), idle(server.port());
  held.Send(http::verb::post, "/hold");
  ASSERT_TRUE(WaitFor([&] { return handler.started() == 1; }));
  EXPECT_EQ(idle.Call(http::verb::get, "/health").status, 200);
  // The idle connection is no longer busy once its response is written (just after the client
  // read it).
  ASSERT_TRUE(WaitFor([&] { return server.busy_connections() == 1; }));
  server.BeginDrain();
  const Reply refused = idle.Call(http::verb::post, "/hold");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("shutting down"), std::string::npos) << refused.body;
  EXPECT_FALSE(refused.keep_alive);
  EXPECT_EQ(handler.started(), 1);
  // The listening socket is closed: a new connection is refused.
  asio::io_context ioc;
  asio::ip::tcp::socket fresh(ioc);
  beast::error_code ec;
  fresh.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port())}, ec);
  EXPECT_TRUE(ec) << "connected to a draining server";
  EXPECT_TRUE(WaitFor([&] { return server.busy_connections() == 1; }));  // the held exchange
  handler.Release();
  const Reply done = held.Receive();
  EXPECT_EQ(done.status, 200);
  EXPECT_FALSE(done.keep_alive);  // closes after its response while draining
  EXPECT_TRUE(WaitFor([&] { return server.busy_connections() == 0; }));
  server.Stop();
}

// A handler that takes long (parsing, templating and tokenizing a huge body) runs off the I/O
// threads: with as many slow requests as I/O threads, /health and accept() still answer at
// once (issue 6).
class SlowHandler final : public RequestHandler {
 public:
  std::shared_ptr<PendingExchange> Handle(const HttpRequest& request,
                                          const std::shared_ptr<ResponseSink>& sink) override {
    if (request.path == "/slow") {
      ++running_;
      std::this_thread::sleep_for(std::chrono::seconds(2));  // holds the calling thread
      --running_;
    }
    sink->Respond({200, "application/json", "{}", {}});
    return nullptr;
  }
  int running() const { return running_.load(); }

 private:
  std::atomic<int> running_{0};
};

TEST(HttpLimits, SlowHandlersDoNotStallHealth) {
  SlowHandler handler;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.io_threads = 2;
  options.work_threads = 2;
  HttpServer server(options, handler);
  ASSERT_TRUE(server.Start().ok());
  Client a(server.port()), b(server.port());
  a.Send(http::verb::post, "/slow");
  b.Send(http::verb::post, "/slow");
  ASSERT_TRUE(WaitFor([&] { return handler.running() == 2; }));
  double worst = 0;
  for (int i = 0; i < 5 && handler.running() == 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Client health(server.port());  // a new connection: accept() must be free too
    EXPECT_EQ(health.Call(http::verb::get, "/health").status, 200);
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  EXPECT_LT(worst, 0.5) << "/health waited behind slow handlers";
  EXPECT_EQ(a.Receive().status, 200);
  EXPECT_EQ(b.Receive().status, 200);
  server.Stop();
}

}  // namespace
}  // namespace llm::router
