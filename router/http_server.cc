#include "router/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "router/http_session.h"
#include "router/http_tls.h"

namespace llm::router {

using tcp = asio::ip::tcp;
using PlainSession = HttpSession<beast::tcp_stream>;
using TlsSession = HttpSession<beast::ssl_stream<beast::tcp_stream>>;

namespace {

// accept() failures that last until something else closes a descriptor or frees memory:
// retrying at once would spin on the listening socket, which stays readable.
bool IsResourceShortage(const beast::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory ||
         (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  RequestHandler& handler;
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  asio::steady_timer accept_backoff{acceptor.get_executor()};
  std::chrono::steady_clock::time_point last_accept_log{};
  std::shared_ptr<ServerLoad> load = std::make_shared<ServerLoad>();
  std::unique_ptr<asio::ssl::context> tls;  // set: every connection is HTTPS
  std::vector<std::thread> threads;
  asio::thread_pool work_pool;  // handlers (see HttpSession::OnRequest)
  std::mutex mu;
  std::vector<std::weak_ptr<HttpSessionBase>> sessions;
  bool accepting = false;
  int port = 0;

  Impl(HttpServerOptions o, RequestHandler& h)
      : options(std::move(o)),
        handler(h),
        work_pool(static_cast<size_t>(std::max(1, options.work_threads))) {}

  void Accept() {
    Strand strand = asio::make_strand(ioc);  // the new connection's
    acceptor.async_accept(strand, [this, strand](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (IsResourceShortage(ec)) return BackOff(ec);
      if (!ec) {
        SessionContext ctx{strand, work_pool.get_executor(), &handler, SessionLimits::From(options),
                           load};
        std::shared_ptr<HttpSessionBase> session;
        if (tls) {
          session = std::make_shared<TlsSession>(std::move(ctx), std::move(s), *tls);
        } else {
          session = std::make_shared<PlainSession>(std::move(ctx), std::move(s));
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          std::erase_if(sessions, [](const auto& w) { return w.expired(); });
          sessions.push_back(session);
        }
        session->Run();
      }
      Accept();
    });
  }

  // Runs on the acceptor's strand. Logs at most every 10 s: the condition can last.
  void BackOff(const beast::error_code& ec) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_accept_log >= std::chrono::seconds(10)) {
      last_accept_log = now;
      std::fprintf(stderr, "router: accept failed (%s); retrying every %d ms\n",
                   ec.message().c_str(), options.accept_backoff_ms);
    }
    accept_backoff.expires_after(std::chrono::milliseconds(options.accept_backoff_ms));
    accept_backoff.async_wait([this](beast::error_code e) {
      if (!e && acceptor.is_open()) Accept();
    });
  }
};

namespace {

HttpServerOptions Resolved(HttpServerOptions o) {
  if (o.host.empty()) o.host = "127.0.0.1";
  if (o.io_threads <= 0) {
    o.io_threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  }
  if (o.work_threads <= 0) o.work_threads = o.io_threads;
  return o;
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options, RequestHandler& handler)
    : impl_(std::make_unique<Impl>(Resolved(std::move(options)), handler)) {}

HttpServer::~HttpServer() {
  Stop();
}

Status HttpServer::Start() {
  const HttpServerOptions& o = impl_->options;
  if (!o.tls_cert_file.empty() || !o.tls_key_file.empty()) {
    auto tls = MakeTlsServerContext(o.tls_cert_file, o.tls_key_file);
    if (!tls.ok()) return tls.status();
    impl_->tls = std::move(tls).value();
  }
  beast::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  auto results = resolver.resolve(impl_->options.host, std::to_string(impl_->options.port), ec);
  if (ec || results.empty()) {
    return InvalidArgument("router.host '" + impl_->options.host + "': " + ec.message());
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + impl_->options.host + ":" +
                       std::to_string(impl_->options.port) + ": " + ec.message());
  }
  impl_->port = a.local_endpoint().port();
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->accepting = true;
  asio::dispatch(a.get_executor(), [impl = impl_.get()] { impl->Accept(); });
  for (int i = 0; i < std::max(1, impl_->options.io_threads); ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->ioc.run(); });
  }
  return Status::Ok();
}

int HttpServer::port() const {
  return impl_->port;
}

int HttpServer::open_connections() const {
  return impl_->load->connections.load();
}

void HttpServer::BeginDrain() {
  impl_->load->draining.store(true);
  if (!impl_->accepting) return;
  impl_->accepting = false;
  asio::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_backoff.cancel();
  });
}

int HttpServer::busy_connections() const {
  return impl_->load->busy.load();
}

void HttpServer::StopAccepting() {
  if (std::exchange(impl_->accepting, false)) {
    asio::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
      beast::error_code ignored;
      impl->acceptor.close(ignored);
      impl->accept_backoff.cancel();
    });
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& w : impl_->sessions) {
    if (auto s = w.lock()) s->Shutdown();
  }
}

void HttpServer::Stop() {
  StopAccepting();
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->work_pool.stop();
  impl_->work_pool.join();
}

}  // namespace llm::router
