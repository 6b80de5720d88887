// End-to-end harness: starts the real `worker` (coordinator) and `router` binaries as child
// processes on free loopback ports, kills them on destruction (RAII), waits for them with
// bounded polls, and speaks HTTP/1.1 (plain and SSE) through a small Beast client whose every
// read and write has a timeout.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "proto/llm.grpc.pb.h"
#include "tests/common/child_process.h"

namespace llm::e2e {

using nlohmann::json;
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

inline std::string SharedPath(const std::string& rel) {
  return (std::filesystem::path(LLM_SHARED_DIR) / rel).string();
}

using ::llm::testing::ChildProcess;

inline int FreePort() {
  return ::llm::testing::FreeLoopbackPort();
}

struct HttpResult {
  int status = 0;  // 0: no response (connection failed or timed out)
  std::string body;
  std::string content_type;
  std::string error;
  std::map<std::string, std::string> headers;  // names in lower case
  json Json() const { return json::parse(body, nullptr, false); }
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// One connection with send/receive timeouts (SO_SNDTIMEO / SO_RCVTIMEO).
class HttpClient {
 public:
  explicit HttpClient(int port, double timeout_s = 30.0) : socket_(ioc_) {
    beast::error_code ec;
    socket_.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
    if (ec) {
      error_ = ec.message();
      return;
    }
    timeval tv{static_cast<time_t>(timeout_s),
               static_cast<suseconds_t>((timeout_s - static_cast<int>(timeout_s)) * 1e6)};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  bool ok() const { return error_.empty(); }

  bool Send(const std::string& method, const std::string& target, const std::string& body,
            bool keep_alive = true, const Headers& headers = {}) {
    if (!ok()) return false;
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : headers) req.set(name, value);
    req.keep_alive(keep_alive);
    req.body() = body;
    req.prepare_payload();
    beast::error_code ec;
    http::write(socket_, req, ec);
    if (ec) error_ = ec.message();
    return !ec;
  }

  bool SendRaw(const std::string& bytes) {
    if (!ok()) return false;
    beast::error_code ec;
    asio::write(socket_, asio::buffer(bytes), ec);
    return !ec;
  }

  // Reads one complete response.
  HttpResult Receive() {
    HttpResult r;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    beast::error_code ec;
    http::read(socket_, buffer_, parser, ec);
    if (ec) {
      r.error = ec.message();
      return r;
    }
    r.status = parser.get().result_int();
    r.body = parser.get().body();
    r.content_type = std::string(parser.get()[http::field::content_type]);
    for (const auto& field : parser.get()) {
      std::string name(field.name_string());
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      r.headers[name] = std::string(field.value());
    }
    return r;
  }

  // Reads an SSE response; `on_event` gets each `data:` payload and returns false to stop
  // (the caller then typically closes the connection mid-stream).
  HttpResult ReadEvents(const std::function<bool(const std::string&)>& on_event) {
    HttpResult r;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    beast::error_code ec;
    http::read_header(socket_, buffer_, parser, ec);
    if (ec) {
      r.error = ec.message();
      return r;
    }
    r.status = parser.get().result_int();
    r.content_type = std::string(parser.get()[http::field::content_type]);
    size_t parsed = 0;
    while (true) {
      std::string& body = parser.get().body();
      size_t end;
      while ((end = body.find("\n\n", parsed)) != std::string::npos) {
        std::string event = body.substr(parsed, end - parsed);
        parsed = end + 2;
        if (event.rfind("data: ", 0) == 0) event = event.substr(6);
        if (!on_event(event)) return r;
      }
      if (parser.is_done()) break;
      http::read_some(socket_, buffer_, parser, ec);
      if (ec) {
        r.error = ec.message();
        break;
      }
    }
    r.body = parser.get().body();
    return r;
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
  std::string error_;
};

inline HttpResult Http(int port, const std::string& method, const std::string& target,
                       const std::string& body = "", double timeout_s = 60.0,
                       const Headers& headers = {}) {
  HttpClient c(port, timeout_s);
  if (!c.Send(method, target, body, true, headers)) {
    HttpResult failed;
    failed.error = "connect/send failed";
    return failed;
  }
  return c.Receive();
}

inline HttpResult Post(int port, const std::string& target, const json& body) {
  return Http(port, "POST", target, body.dump());
}

// A streamed request: every data payload (without the trailing [DONE]) parsed as JSON.
// The body of a greedy /v1/completions request for golden stories260K case g (a line of
// ../shared/golden/stories260K_greedy.jsonl): its prompt ids and as many tokens as the
// reference generated, EOS ignored.
inline json GoldenRequest(const json& g) {
  return {{"model", "stories260K"},
          {"prompt", g["prompt_token_ids"]},
          {"max_tokens", g["greedy_token_ids"].size()},
          {"temperature", 0},
          {"ignore_eos", true}};
}

struct StreamResult {
  HttpResult http;
  std::vector<json> events;
  bool done = false;  // saw data: [DONE]
};

inline StreamResult PostStream(int port, const std::string& target, const json& body) {
  StreamResult s;
  HttpClient c(port, 60.0);
  if (!c.Send("POST", target, body.dump())) return s;
  s.http = c.ReadEvents([&](const std::string& e) {
    if (e == "[DONE]") {
      s.done = true;
      return false;
    }
    s.events.push_back(json::parse(e, nullptr, false));
    return true;
  });
  return s;
}

// Polls `pred` every 50 ms until it holds or `timeout_s` passes.
inline bool WaitFor(const std::function<bool()>& pred, double timeout_s) {
  const auto end = ChildProcess::Deadline(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

// The stories260K model served by a real `worker` (coordinator) and one or more `router`s.
class Cluster {
 public:
  static constexpr const char* kModel = "models/stories260K";

  // Starts the worker and one router; check ok() (and the logs) before use. `launcher` goes
  // before the worker binary (e.g. mpirun -np 2).
  explicit Cluster(std::vector<std::string> worker_flags = {},
                   std::vector<std::string> router_flags = {},
                   std::vector<std::string> launcher = {}) {
    worker_port_ = FreePort();
    std::vector<std::string> w = launcher;
    std::vector<std::string> worker_args = {LLM_WORKER_BIN,
                                            "--model.path",
                                            SharedPath(kModel),
                                            "--coordinator.host",
                                            "127.0.0.1",
                                            "--coordinator.port",
                                            std::to_string(worker_port_),
                                            "--engine.threads_per_rank",
                                            "1",
                                            "--engine.kv_cache_mib",
                                            "8"};
    w.insert(w.end(), worker_args.begin(), worker_args.end());
    // LLM_TEST_DEVICE=cuda runs every cluster on the GPU (tools/gpu-check.sh): the same golden
    // checks, engine.device cuda.
    if (const char* device = std::getenv("LLM_TEST_DEVICE"); device && *device) {
      w.insert(w.end(), {"--engine.device", device});
    }
    w.insert(w.end(), worker_flags.begin(), worker_flags.end());
    worker_ = std::make_unique<ChildProcess>(w, "e2e_worker");
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
    admin_ = v1::Admin::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(worker_port_), grpc::InsecureChannelCredentials(), args));
    router_port_ = AddRouter(router_flags);
  }

  // Starts another router over the same coordinator; returns its port (0 when it did not
  // become healthy in time). `env` entries ("NAME=value") go to the router's environment;
  // `launcher` goes before the router binary (e.g. {"/bin/sh", "-c", "ulimit -n 64; exec
  // \"$0\" \"$@\""}).
  int AddRouter(std::vector<std::string> flags = {}, const std::string& upstream = "",
                std::vector<std::string> env = {}, std::vector<std::string> launcher = {}) {
    const int port = FreePort();
    std::vector<std::string> r = launcher;
    std::vector<std::string> router_args = {
        LLM_ROUTER_BIN,
        "--model.path",
        SharedPath(kModel),
        "--router.host",
        "127.0.0.1",
        "--router.port",
        std::to_string(port),
        "--router.upstreams",
        upstream.empty() ? "127.0.0.1:" + std::to_string(worker_port_) : upstream};
    r.insert(r.end(), router_args.begin(), router_args.end());
    r.insert(r.end(), flags.begin(), flags.end());
    routers_.push_back(std::make_unique<ChildProcess>(r, "e2e_router", env));
    ChildProcess& child = *routers_.back();
    const bool up = WaitFor(
        [&] {
          if (child.Exited()) return true;
          return upstream.empty() ? Http(port, "GET", "/health", "", 1.0).status == 200
                                  : Http(port, "GET", "/health", "", 1.0).status != 0;
        },
        60.0);
    return up && !child.Exited() ? port : 0;
  }

  static constexpr size_t kLogTail = 4000;  // characters of each log in Logs()

  bool ok() const { return router_port_ != 0; }
  int port() const { return router_port_; }
  std::string upstream() const { return "127.0.0.1:" + std::to_string(worker_port_); }
  ChildProcess& worker() { return *worker_; }
  ChildProcess& router(size_t i = 0) { return *routers_.at(i); }
  ChildProcess& last_router() { return *routers_.back(); }
  std::string Logs() const {
    std::string s = "--- worker log ---\n" + worker_->Log(kLogTail);
    for (const auto& r : routers_) s += "\n--- router log ---\n" + r->Log(kLogTail);
    return s;
  }

  v1::StatsResponse Stats() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StatsResponse s;
    if (!admin_->Stats(&ctx, v1::StatsRequest(), &s).ok()) s.set_kv_blocks_total(-1);
    return s;
  }
  bool Drain(bool drain) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (drain) {
      v1::DrainResponse r;
      return admin_->Drain(&ctx, v1::DrainRequest(), &r).ok();
    }
    v1::ResumeResponse r;
    return admin_->Resume(&ctx, v1::ResumeRequest(), &r).ok();
  }
  // Waits until no sequence runs or waits and every KV block is free.
  bool WaitAllBlocksFree(double timeout_s) {
    return WaitFor(
        [&] {
          const v1::StatsResponse s = Stats();
          return s.kv_blocks_total() > 0 && s.kv_blocks_free() == s.kv_blocks_total() &&
                 s.running_sequences() == 0 && s.waiting_sequences() == 0;
        },
        timeout_s);
  }

 private:
  int worker_port_ = 0;
  int router_port_ = 0;
  std::unique_ptr<ChildProcess> worker_;  // destroyed last (declared first)
  std::vector<std::unique_ptr<ChildProcess>> routers_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

// Skips (never passes) when the shared model is missing.
#define LLM_E2E_REQUIRE_SHARED()                                                       \
  do {                                                                                 \
    if (!std::filesystem::exists(::llm::e2e::SharedPath(::llm::e2e::Cluster::kModel))) \
      GTEST_SKIP() << "missing shared model: "                                         \
                   << ::llm::e2e::SharedPath(::llm::e2e::Cluster::kModel);             \
  } while (0)

}  // namespace llm::e2e
