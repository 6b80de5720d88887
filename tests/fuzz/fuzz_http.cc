// Fuzz target (b): raw bytes into the router's HTTP session, the state machine of
// router/http_session.h (Beast's parser with the router's header and body limits, keep-alive,
// pipelining, 100-continue, the write loop with Beast's serializer and chunk framing), driven in
// memory over Beast's test stream on one thread, so every input runs the same way. Behind it,
// the real OpenAiService (routing, authentication, validation, /tokenize and /detokenize with
// the demo tokenizer and its chat template) over an upstream pool with no coordinator
// (generation requests end in 503 once validated).
//
// Input: byte 0: the most bytes one read of the session gets (0: no limit; small values put the
// parser on every fragment boundary); byte 1: the most bytes one write of the session puts out
// (0: no limit); byte 2: from 0xC0, the stream operation (read or write) number byte2 - 0xBF
// fails; the rest: what the client sends. The client then waits until the session has nothing
// left to do and closes its side. Checks: the session closes and is destroyed (nothing holds
// it: no leak, no hang), the server's counts (connections, requests in flight, busy) are back
// to 0, and, without an injected failure, what the session wrote parses as HTTP responses.
#include <boost/beast/_experimental/test/stream.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "common/tokenizer.h"
#include "router/http_session.h"
#include "router/openai_service.h"
#include "router/upstream_pool.h"

namespace {

using namespace llm::router;
namespace test = boost::beast::test;

struct Router {
  asio::io_context ioc;
  std::shared_ptr<const llm::Tokenizer> tokenizer;
  UpstreamPool pool{{}, std::chrono::milliseconds(1000)};
  std::unique_ptr<OpenAiService> service;
  std::shared_ptr<ServerLoad> load = std::make_shared<ServerLoad>();
  SessionLimits limits;
};

Router* StartRouter() {
  auto* r = new Router;  // lives until exit
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
  // The router's defaults (as cluster.yaml's), with a short timeout: no input waits for it.
  r->limits = SessionLimits::From(HttpServerOptions{});
  r->limits.io_timeout = std::chrono::seconds(5);
  return r;
}

[[noreturn]] void Fail(const std::string& what, const uint8_t* data, size_t size) {
  std::fprintf(stderr, "fuzz_http: %s (input of %zu bytes)\n", what.c_str(), size);
  (void)data;
  std::abort();
}

// Runs every handler that is ready, until none is (timers do not count: nothing waits for one).
void RunReady(asio::io_context& ioc) {
  ioc.restart();
  while (ioc.poll() > 0) {
  }
}

std::string Hex(char c) {
  static const char* digits = "0123456789abcdef";
  const auto u = static_cast<unsigned char>(c);
  return {digits[u >> 4], digits[u & 15]};
}

// Whether `text` is a sequence of HTTP responses; the last one may be cut short by the close
// (an HTTP/1.0 stream ends that way).
std::optional<std::string> ResponsesProblem(const std::string& text) {
  asio::io_context ioc;
  test::stream in(ioc, text);
  in.close_remote();
  beast::flat_buffer buffer;
  for (;;) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{1}
                      << 40);  // (not boost::none: Boost 1.74 then refuses some bodies)
    parser.header_limit(1 << 20);
    beast::error_code ec;
    http::read(in, buffer, parser, ec);
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
      return std::nullopt;
    }
    if (ec) {
      std::string shown;  // what it wrote, printable
      for (char c : text.substr(0, 4000)) {
        shown += (c >= 32 && c < 127) || c == '\n' ? std::string(1, c) : "\\x" + Hex(c);
      }
      return "the session wrote a malformed response: " + ec.message() + "; it wrote:\n" + shown;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Router* router = StartRouter();
  if (size < 3) return 0;
  const size_t read_size = data[0];
  const size_t write_size = data[1];
  const bool inject = data[2] >= 0xC0;
  test::fail_count fc(inject ? data[2] - 0xBF : size_t{1} << 40);
  const std::string sent(reinterpret_cast<const char*>(data) + 3, size - 3);

  asio::io_context& ioc = router->ioc;
  std::weak_ptr<HttpSessionBase> weak;
  {
    test::stream client(ioc);
    test::stream server(ioc, fc);
    server.connect(client);
    if (read_size > 0) server.read_size(read_size);
    if (write_size > 0) server.write_size(write_size);
    // Handlers run on the same thread (the work executor is the io_context): deterministic.
    SessionContext ctx{asio::make_strand(ioc), ioc.get_executor(), router->service.get(),
                       router->limits, router->load};
    auto session = std::make_shared<HttpSession<test::stream>>(std::move(ctx), std::move(server));
    weak = session;
    session->Run();
    session.reset();
    client.write_some(asio::buffer(sent));
    RunReady(ioc);
    client.close();
    RunReady(ioc);
    if (auto s = weak.lock(); s && !s->closed()) {
      Fail(std::string("the session is still open (") + SessionPhaseName(s->phase()) +
               ") after the client closed",
           data, size);
    }
    if (!weak.expired()) Fail("the closed session was not destroyed (leak)", data, size);
    if (!inject) {
      if (auto problem = ResponsesProblem(std::string(client.str()))) Fail(*problem, data, size);
    }
  }
  const auto& load = *router->load;
  if (load.connections.load() != 0 || load.inflight.load() != 0 || load.busy.load() != 0) {
    Fail("the server's counts are not back to 0 (connections " +
             std::to_string(load.connections.load()) + ", in flight " +
             std::to_string(load.inflight.load()) + ", busy " + std::to_string(load.busy.load()) +
             ")",
         data, size);
  }
  return 0;
}
