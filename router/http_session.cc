// The parts of the HTTP session (router/http_session.h) that do not depend on the stream type.
#include "router/http_session.h"

#include <random>

namespace llm::router {

SessionLimits SessionLimits::From(const HttpServerOptions& options) {
  SessionLimits l;
  l.max_header_bytes = static_cast<uint32_t>(options.max_header_bytes);
  l.max_body_bytes = static_cast<uint64_t>(options.max_body_bytes);
  l.io_timeout = std::chrono::seconds(options.io_timeout_s);
  l.write_queue_bytes = static_cast<size_t>(options.write_queue_bytes);
  l.max_connections = options.max_connections;
  l.max_inflight_requests = options.max_inflight_requests;
  l.retry_after_s = options.retry_after_s;
  return l;
}

const char* SessionPhaseName(SessionPhase phase) {
  switch (phase) {
    case SessionPhase::kHandshake:
      return "Handshake";
    case SessionPhase::kReadingRequest:
      return "ReadingRequest";
    case SessionPhase::kHandling:
      return "Handling";
    case SessionPhase::kStreaming:
      return "Streaming";
    case SessionPhase::kFlushing:
      return "Flushing";
    case SessionPhase::kClosing:
      return "Closing";
    case SessionPhase::kClosed:
      return "Closed";
  }
  return "?";
}

namespace session_detail {

std::string RequestIdFromHeader(std::string_view client_id) {
  bool usable = !client_id.empty() && client_id.size() <= kMaxRequestIdBytes;
  for (const char c : client_id) usable = usable && c > ' ' && c < 0x7f;
  if (usable) return std::string(client_id);
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 32; ++i) id += kHex[rng() & 15];
  return id;
}

HttpRequest ToHttpRequest(http::request<http::string_body>&& request) {
  HttpRequest r;
  const beast::string_view client_id = request["X-Request-Id"];
  r.request_id = RequestIdFromHeader(std::string_view(client_id.data(), client_id.size()));
  r.method = std::string(request.method_string());
  const beast::string_view target = request.target();
  r.path = std::string(target.substr(0, target.find('?')));
  r.authorization = std::string(request[http::field::authorization]);
  r.body = std::move(request.body());
  return r;
}

namespace {

std::unique_ptr<BeastResponse> Head(int status, bool keep_alive) {
  auto r = std::make_unique<BeastResponse>();
  r->version(11);
  r->result(static_cast<unsigned>(status));
  r->set(http::field::server, "llmserve-router");
  r->set(http::field::connection, keep_alive ? "keep-alive" : "close");
  return r;
}

}  // namespace

std::unique_ptr<BeastResponse> FullResponse(HttpResponse response, bool keep_alive) {
  auto r = Head(response.status, keep_alive);
  r->set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) r->insert(name, value);
  r->content_length(response.body.size());
  r->body() = std::move(response.body);
  return r;
}

std::unique_ptr<BeastResponse> StreamHead(int status, const std::string& content_type, bool chunked,
                                          bool keep_alive) {
  auto r = Head(status, keep_alive);
  r->set(http::field::content_type, content_type);
  if (chunked) {
    r->chunked(true);
    r->set(http::field::cache_control, "no-cache");
  }
  return r;
}

std::unique_ptr<BeastResponse> ContinueHead() {
  auto r = std::make_unique<BeastResponse>();
  r->version(11);
  r->result(http::status::continue_);
  return r;
}

ApiError RequestReadError(const beast::error_code& ec, const SessionLimits& limits) {
  if (ec == http::error::body_limit) {
    return HttpError(413, "The request body is larger than the limit of " +
                              std::to_string(limits.max_body_bytes) +
                              " bytes (router.max_body_bytes)");
  }
  if (ec == http::error::header_limit) {
    return HttpError(431, "The request headers are larger than " +
                              std::to_string(limits.max_header_bytes) +
                              " bytes (router.max_header_bytes)");
  }
  return HttpError(400, "Malformed HTTP request: " + ec.message());
}

ApiError TooManyRequests(const std::string& message, int retry_after_s) {
  ApiError e = HttpError(429, message);
  e.code = "rate_limit_exceeded";
  e.retry_after_s = retry_after_s;
  return e;
}

}  // namespace session_detail
}  // namespace llm::router
