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

#include "common/status.h"
#include "router/http_exchange.h"

namespace llm::router {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 2000;  // 0: any free port (see HttpServer::port())
  // Threads that run the sockets: accept, reads, writes, /health, and the streaming of
  // responses (detokenizing, stop strings) on each connection's strand.
  int io_threads = 2;
  // Threads that run request handlers (JSON parsing, chat templating, tokenization), so that
  // one big request never holds an I/O thread.
  int work_threads = 2;
  int64_t max_body_bytes = 1 << 20;
  uint32_t max_header_bytes = 16 * 1024;
  // Reading one request (an idle keep-alive connection included) and each write: a client
  // that stops reading its stream is disconnected and its request cancelled upstream.
  int io_timeout_s = 60;
  size_t write_queue_bytes = 256 * 1024;
  int max_connections = 1024;       // open connections; beyond: their requests get 429
  int max_inflight_requests = 256;  // exchanges in progress (all connections); beyond: 429
  int retry_after_s = 1;            // the Retry-After of a 429
  int accept_backoff_ms = 100;      // after a failed accept()
  // PEM files (router.tls_cert_file, router.tls_key_file): both set, the port speaks TLS only;
  // both empty: plain HTTP. Start() fails naming the file when one cannot be used.
  std::string tls_cert_file;
  std::string tls_key_file;
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
