// HTTP/1.1 server on Boost.Beast (kept inside router/: http_server.cc accepts, each connection
// is an HttpSession, the state machine of router/http_session.h) with keep-alive, limits on
// header and body size (413/431 with OpenAI error JSON), a timeout on every read and write, a
// bounded write queue (producers wait through ResponseSink::WhenWritable), and disconnect
// detection while a response is pending (PendingExchange::Cancel). With a certificate and key
// the port speaks HTTPS only (a plain HTTP client's handshake fails and it is disconnected).
//
// Back-pressure: beyond max_connections open connections, or max_inflight_requests exchanges
// in progress, a request gets 429 with Retry-After (OpenAI error JSON, rate_limit_error)
// instead of work or memory; GET /health is always served. When accept() fails (no file
// descriptors left: EMFILE/ENFILE) the acceptor waits accept_backoff_ms before trying again
// instead of spinning on the still-readable listening socket.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/config_sections.h"
#include "common/status.h"
#include "router/http_exchange.h"

namespace llm::router {

// router.* keys about HTTP (common/config_sections.h: host, port, limits, timeouts, TLS files)
// as the server takes them, plus what only the server decides. `host` empty: 127.0.0.1 (the
// router resolves its default from the API keys first); `io_threads` 0: the cores, at least 2
// (several even on one core: a connection whose strand is busy streaming must not hold up
// accept() and /health).
struct HttpServerOptions : HttpSection {
  // Threads that run request handlers (JSON parsing, chat templating, tokenization), so that
  // one big request never holds an I/O thread; 0: as many as I/O threads.
  int work_threads = 0;
  int retry_after_s = 1;        // the Retry-After of a 429
  int accept_backoff_ms = 100;  // after a failed accept()
};

class HttpServer {
 public:
  // `handler` must outlive the server.
  HttpServer(HttpServerOptions options, RequestHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files (kInvalidArgument naming the key and file when they cannot be used),
  // binds, listens and starts the I/O threads. kUnavailable when the address cannot be bound.
  Status Start();
  int port() const;
  // Connections open now (accepted and not yet destroyed).
  int open_connections() const;
  // Graceful shutdown, first step: closes the listening socket (new connections are refused);
  // every request that arrives from now on, GET /health included, gets 503 "shutting down";
  // exchanges in progress go on, and each connection closes once its response is written.
  void BeginDrain();
  // Connections with an exchange in progress or response bytes not yet written (a draining
  // server is done when this is 0).
  int busy_connections() const;
  // Stops accepting and cancels every pending exchange (their upstream calls get cancelled);
  // connections close once their last write is done.
  void StopAccepting();
  // Stops the I/O threads and closes everything still open. Idempotent.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace llm::router
