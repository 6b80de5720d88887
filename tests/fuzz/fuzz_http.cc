// Fuzz target (b): raw bytes into the router's HTTP handling. The real HttpServer
// (router/http_server.cc: Beast parser with the router's header and body limits, keep-alive,
// pipelining, 100-continue, the write queue) runs on 127.0.0.1 with the real OpenAiService
// (routing, authentication, validation, /tokenize and /detokenize with the demo tokenizer and
// its chat template) in front of an upstream pool with no coordinator (generation requests end
// in 503 once validated). Each input is written on a fresh TCP connection, which is then
// half-closed; the server must answer and close it (a connection left open for 20 s is
// reported as a hang). Driving http_server.cc's Session on Beast's test stream is not possible
// without changing it: the session is private to http_server.cc and owns a beast::tcp_stream.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "common/tokenizer.h"
#include "router/http_server.h"
#include "router/openai_service.h"
#include "router/upstream_pool.h"

namespace {

using namespace llm::router;

struct Router {
  std::shared_ptr<const llm::Tokenizer> tokenizer;
  UpstreamPool pool{{}, std::chrono::milliseconds(1000)};
  std::unique_ptr<OpenAiService> service;
  std::unique_ptr<HttpServer> server;
};

Router* StartRouter() {
  auto* r = new Router;  // lives until exit: server threads use it
  auto tok = llm::Tokenizer::FromDir(LLM_SOURCE_DIR "/deploy/models/demo-llama");
  if (!tok.ok()) {
    std::fprintf(stderr, "fuzz_http: %s\n", tok.status().message().c_str());
    std::abort();
  }
  r->tokenizer = std::move(*tok);
  ServiceOptions service_options;
  service_options.limits.served_model_name = "demo-llama";
  service_options.request_timeout = std::chrono::seconds(5);
  r->service = std::make_unique<OpenAiService>(service_options, r->tokenizer, r->pool);
  HttpServerOptions http;  // the router's defaults (limits as cluster.yaml's defaults)
  http.host = "127.0.0.1";
  http.port = 0;
  http.io_timeout_s = 5;
  r->server = std::make_unique<HttpServer>(http, *r->service);
  if (auto s = r->server->Start(); !s.ok()) {
    std::fprintf(stderr, "fuzz_http: %s\n", s.ToString().c_str());
    std::abort();
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Router* router = StartRouter();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(router->server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  // libFuzzer's timer signals interrupt blocking calls: EINTR means "again" here (a connect
  // then reports EALREADY while in progress and EISCONN once done).
  while (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EISCONN) break;
    if (errno == EINTR || errno == EALREADY) continue;
    std::perror("fuzz_http: connect");
    std::abort();
  }
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server may close early (413, a parse error): fine
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      std::fprintf(stderr, "fuzz_http: the server kept the connection open for 20 s\n");
      std::abort();
    }
    break;  // EOF or reset
  }
  close(fd);
  return 0;
}
