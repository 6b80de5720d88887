#include "tools/serve_bench_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace llm::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

// The largest response a benchmark request may produce (a stream of max_tokens chunks).
constexpr uint64_t kMaxResponseBytes = 256ull << 20;
// The longest SSE event kept while waiting for its end.
constexpr size_t kMaxEventBytes = 16 << 20;

// Applies one SSE event ("data: {...}") to the outcome. False once the stream is over.
bool ApplyEvent(const std::string& event, StreamOutcome* out) {
  for (size_t pos = 0; pos < event.size();) {
    size_t eol = event.find('\n', pos);
    if (eol == std::string::npos) eol = event.size();
    std::string line = event.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data:", 0) != 0) continue;
    std::string data = line.substr(5);
    if (!data.empty() && data.front() == ' ') data.erase(0, 1);
    if (data == "[DONE]") return false;
    const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("error")) {
      out->error = "error event: " + j["error"].dump();
      return false;
    }
    if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
      out->prompt_tokens = u->value("prompt_tokens", int64_t{-1});
      out->completion_tokens = u->value("completion_tokens", int64_t{-1});
    }
    const auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty()) continue;
    const json& c = (*choices)[0];
    std::string piece;
    if (const auto t = c.find("text"); t != c.end() && t->is_string()) {
      piece = t->get<std::string>();
    } else if (const auto d = c.find("delta"); d != c.end() && d->is_object()) {
      if (const auto ct = d->find("content"); ct != d->end() && ct->is_string()) {
        piece = ct->get<std::string>();
      }
    }
    if (!piece.empty()) {
      out->texts.push_back(Clock::now());
      out->text += piece;
    }
  }
  return true;
}

void Connect(beast::tcp_stream& stream, asio::io_context& ioc, const Endpoint& e) {
  asio::ip::tcp::resolver resolver(ioc);
  stream.connect(resolver.resolve(e.host, std::to_string(e.port)));
}

http::request<http::string_body> MakeRequest(http::verb verb, const Endpoint& e,
                                             const std::string& target, std::string body) {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, e.host + ":" + std::to_string(e.port));
  req.set(http::field::user_agent, "llm-bench-serve");
  if (!e.api_key.empty()) req.set(http::field::authorization, "Bearer " + e.api_key);
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
    req.body() = std::move(body);
    req.prepare_payload();
  }
  return req;
}

}  // namespace

StreamOutcome RunStreamingRequest(const Endpoint& endpoint, const std::string& body,
                                  std::chrono::seconds timeout) {
  StreamOutcome out;
  out.start = Clock::now();
  try {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(timeout);
    Connect(stream, ioc, endpoint);
    http::write(stream, MakeRequest(http::verb::post, endpoint, endpoint.path, body));
    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(kMaxResponseBytes);
    http::read_header(stream, buffer, parser);
    const int status = static_cast<int>(parser.get().result_int());
    std::string pending;  // SSE bytes not yet ending in a blank line
    std::string error_body;
    char chunk[16384];
    bool more = true;
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      beast::error_code ec;
      // read_some: returns with whatever arrived. (http::read waits until the 16 KiB chunk is
      // full or the response ends, which put every token of a short answer at its end: TTFT
      // = E2E and ITL ~0.)
      http::read_some(stream, buffer, parser, ec);
      if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
      const size_t got = sizeof(chunk) - parser.get().body().size;
      if (status != 200) {
        error_body.append(chunk, got);
        continue;
      }
      for (size_t i = 0; i < got; ++i) {
        if (chunk[i] != '\r') pending.push_back(chunk[i]);  // CRLF events read as LF ones
      }
      for (size_t end; more && (end = pending.find("\n\n")) != std::string::npos;) {
        more = ApplyEvent(pending.substr(0, end), &out);
        pending.erase(0, end + 2);
      }
      if (pending.size() > kMaxEventBytes) throw std::runtime_error("an SSE event over 16 MiB");
    }
    out.end = Clock::now();
    if (status != 200) {
      out.error = "HTTP " + std::to_string(status) + ": " + error_body.substr(0, 300);
    } else if (out.error.empty()) {
      out.ok = true;
    }
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  } catch (const std::exception& e) {
    out.end = Clock::now();
    out.error = std::string("I/O: ") + e.what();
  }
  return out;
}

std::string FirstModelId(const Endpoint& endpoint, std::chrono::seconds timeout,
                         std::string* error) {
  try {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(timeout);
    Connect(stream, ioc, endpoint);
    http::write(stream, MakeRequest(http::verb::get, endpoint, "/v1/models", ""));
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    http::read(stream, buffer, parser);
    const json j = json::parse(parser.get().body(), nullptr, false);
    if (parser.get().result_int() == 200 && j.is_object() && j.contains("data") &&
        j["data"].is_array() && !j["data"].empty() && j["data"][0].contains("id")) {
      return j["data"][0]["id"].get<std::string>();
    }
    *error = "GET /v1/models: HTTP " + std::to_string(parser.get().result_int()) + ": " +
             parser.get().body().substr(0, 300);
  } catch (const std::exception& e) {
    *error = std::string("GET /v1/models: ") + e.what();
  }
  return "";
}

}  // namespace llm::bench
