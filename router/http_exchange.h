// The seam between the HTTP server (Beast: http_server.cc, http_session.h) and the OpenAI
// service: plain C++ types only. One request/response exchange at a time per connection.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llm::router {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string path;           // without the query string
  std::string authorization;  // the Authorization header ("" when absent)
  // The client's X-Request-Id when it is 1-128 printable ASCII characters without spaces,
  // else a new random one: it names the request in every log line (router and coordinator)
  // and comes back in the X-Request-Id response header.
  std::string request_id;
  std::string body;
  bool from_loopback = false;  // the client connected from this host (127.0.0.0/8, ::1)
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// The connection's side of one exchange. Thread affinity: every method may be called from any
// thread; the writers (Respond, BeginStream, StreamWrite, EndStream, WhenWritable) run on the
// connection's strand, in the order they were called from one thread. After the connection
// closed, writes are dropped silently.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // A complete response; ends the exchange.
  virtual void Respond(HttpResponse response) = 0;
  // A streamed response (chunked): the header, then pieces, then EndStream ends the exchange.
  virtual void BeginStream(int status, const std::string& content_type) = 0;
  virtual void StreamWrite(std::string data) = 0;
  virtual void EndStream() = 0;
  // Runs `fn` on the connection's strand; callable from any thread.
  virtual void Post(std::function<void()> fn) = 0;
  // Runs `fn` on the strand once the bytes waiting to be written are below the write-queue
  // limit (at once when they are): producers use it for backpressure.
  virtual void WhenWritable(std::function<void()> fn) = 0;
  virtual bool closed() const = 0;
};

// An exchange still in progress after Handle returned.
class PendingExchange {
 public:
  virtual ~PendingExchange() = default;
  // The client went away (runs on the strand): stop work and cancel upstream calls.
  virtual void Cancel() = 0;
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Runs on a work thread (bodyless GETs such as /health: on the connection's strand), so it
  // may parse, template and tokenize without holding an I/O thread; calls for different
  // connections run concurrently. Either answers through `sink` (and returns nullptr) or
  // returns the pending exchange that will answer later; its Cancel runs on the strand.
  virtual std::shared_ptr<PendingExchange> Handle(const HttpRequest& request,
                                                  const std::shared_ptr<ResponseSink>& sink) = 0;
};

}  // namespace llm::router
