// Test helpers for the router's HTTPS port, shared by the unit (tests/router) and integration
// tests: a self-signed certificate made with the openssl CLI, an HTTPS client on Beast that
// verifies the server against it, and a plain HTTP request to a TLS port. Every operation has a
// 10 s timeout (the tcp_stream's), so every wait is bounded.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace llm::testing {

// Whether the openssl CLI is there (tests that need a certificate skip without it).
inline bool HaveOpensslCli() {
  return std::system("command -v openssl >/dev/null 2>&1") == 0;
}

// A self-signed certificate for 127.0.0.1 and localhost, valid one day.
inline bool MakeSelfSignedCert(const std::string& cert_file, const std::string& key_file) {
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key_file + " -out " + cert_file + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// An io_context on its own thread, for clients written with use_future.
class ClientLoop {
 public:
  ClientLoop() : guard_(ioc.get_executor()), thread_([this] { ioc.run(); }) {}
  ~ClientLoop() {
    guard_.reset();
    thread_.join();
  }
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;
  boost::asio::io_context ioc;

 private:
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

struct HttpsReply {
  int status = 0;
  std::string body;
  bool keep_alive = false;
};

// GETs of `targets` on one HTTPS connection to 127.0.0.1:`port`, verifying the server's
// certificate against `ca_file` and its name (127.0.0.1); `authorization` ("" for none) goes
// with each. The last request says Connection: close, and the connection ends with a TLS
// shutdown. Throws boost::system::system_error on any failure (handshake, timeout, ...).
inline std::vector<HttpsReply> HttpsGets(int port, const std::string& ca_file,
                                         const std::vector<std::string>& targets,
                                         const std::string& authorization = "") {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  namespace ssl = asio::ssl;
  constexpr auto kTimeout = std::chrono::seconds(10);
  ClientLoop loop;
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(ca_file);
  ctx.set_verify_mode(ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(loop.ioc, ctx);
  stream.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
  auto& tcp = beast::get_lowest_layer(stream);
  tcp.expires_after(kTimeout);
  tcp.async_connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)},
                    asio::use_future)
      .get();
  tcp.expires_after(kTimeout);
  stream.async_handshake(ssl::stream_base::client, asio::use_future).get();
  std::vector<HttpsReply> replies;
  beast::flat_buffer buffer;
  for (size_t i = 0; i < targets.size(); ++i) {
    http::request<http::empty_body> req{http::verb::get, targets[i], 11};
    req.set(http::field::host, "127.0.0.1");
    if (!authorization.empty()) req.set(http::field::authorization, authorization);
    req.keep_alive(i + 1 < targets.size());
    tcp.expires_after(kTimeout);
    http::async_write(stream, req, asio::use_future).get();
    http::response<http::string_body> res;
    tcp.expires_after(kTimeout);
    http::async_read(stream, buffer, res, asio::use_future).get();
    replies.push_back({static_cast<int>(res.result_int()), res.body(), res.keep_alive()});
  }
  // The server answered "Connection: close" and sent its close_notify: a clean TLS shutdown.
  tcp.expires_after(kTimeout);
  try {
    stream.async_shutdown(asio::use_future).get();
  } catch (const boost::system::system_error& e) {
    if (e.code() != asio::error::eof) throw;
  }
  return replies;
}

// A plain HTTP GET /health to 127.0.0.1:`port`: the bytes that come back before the server
// closes, and (in `end`) how the connection ended (eof or reset; timeout if it stayed open).
inline std::string PlainHttpToPort(int port, boost::system::error_code* end) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  ClientLoop loop;
  beast::tcp_stream stream(loop.ioc);
  stream.expires_after(std::chrono::seconds(10));
  stream
      .async_connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)},
                     asio::use_future)
      .get();
  const std::string request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  asio::async_write(stream, asio::buffer(request), asio::use_future).get();
  std::string received;
  for (;;) {
    char buf[4096];
    try {
      const size_t n = stream.async_read_some(asio::buffer(buf), asio::use_future).get();
      received.append(buf, n);
    } catch (const boost::system::system_error& e) {
      *end = e.code();
      break;
    }
  }
  return received;
}

}  // namespace llm::testing
