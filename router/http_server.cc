#include "router/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "router/api_error.h"

namespace llm::router {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string StatusLine(int status) {
  const beast::string_view reason = http::obsolete_reason(http::int_to_status(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

// The response head; `body_size` < 0 means chunked (or, for HTTP/1.0, until close).
std::string ResponseHead(int status, const std::string& content_type, int64_t body_size,
                         bool chunked, bool keep_alive,
                         const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string s = StatusLine(status);
  s += "Server: llmserve-router\r\nContent-Type: " + content_type + "\r\n";
  if (body_size >= 0) {
    s += "Content-Length: " + std::to_string(body_size) + "\r\n";
  } else if (chunked) {
    s += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n";
  }
  s += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : headers) s += name + ": " + value + "\r\n";
  s += "\r\n";
  return s;
}

std::string Chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

// accept() failures that last until something else closes a descriptor or frees memory:
// retrying at once would spin on the listening socket, which stays readable.
bool IsResourceShortage(const beast::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory ||
         (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
}

}  // namespace

using Strand = asio::strand<asio::io_context::executor_type>;
using WorkExecutor = asio::thread_pool::executor_type;

// What all sessions share: the counts behind max_connections and max_inflight_requests, the
// busy count a drain waits for, and the drain flag. Shared-owned because sessions can outlive
// the server's Impl during shutdown.
struct ServerLoad {
  std::atomic<int> connections{0};
  std::atomic<int> inflight{0};
  // Connections with an exchange in progress or response bytes not yet written: a draining
  // server waits for this to reach 0.
  std::atomic<int> busy{0};
  // Shutting down: every new request gets 503 and connections close after their response.
  std::atomic<bool> draining{false};
};

// One connection. All members are touched on the session's strand only (closed_ is also read
// from other threads); the ResponseSink writers called elsewhere hop to the strand first.
class Session final : public ResponseSink, public std::enable_shared_from_this<Session> {
 public:
  // The caller has counted this connection in `load`; the session uncounts it when destroyed.
  // `over_connection_limit`: every request but GET /health gets 429, then the connection closes.
  Session(tcp::socket&& socket, const HttpServerOptions& options, RequestHandler& handler,
          WorkExecutor work, std::shared_ptr<ServerLoad> load, bool over_connection_limit)
      : stream_(std::move(socket)),
        strand_(*stream_.get_executor().target<Strand>()),
        work_(std::move(work)),
        idle_timer_(stream_.get_executor()),
        options_(options),
        handler_(handler),
        load_(std::move(load)),
        over_connection_limit_(over_connection_limit) {}
  ~Session() override {
    SetBusy(false);
    ReleaseInflightSlot();
    load_->connections.fetch_sub(1);
  }

  void Run() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
  }
  // From the server (any thread): cancel the pending exchange and close.
  void Shutdown() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }

  // The sink's writers may be called from a work thread (the handler runs there): they hop to
  // the strand, in call order.
  void Respond(HttpResponse r) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = shared_from_this(), r = std::move(r)] { self->Respond(r); });
    }
    if (!in_exchange_ || closed_) return;
    if (load_->draining.load()) keep_alive_ = false;
    Enqueue(ResponseHead(r.status, r.content_type, static_cast<int64_t>(r.body.size()), false,
                         keep_alive_, r.headers) +
            r.body);
    EndExchange();
  }
  void BeginStream(int status, const std::string& content_type) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = shared_from_this(), status, content_type] {
        self->BeginStream(status, content_type);
      });
    }
    if (!in_exchange_ || closed_) return;
    if (load_->draining.load()) keep_alive_ = false;
    if (!chunked_) keep_alive_ = false;
    Enqueue(ResponseHead(status, content_type, -1, chunked_, keep_alive_, {}));
  }
  void StreamWrite(std::string data) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = shared_from_this(), data = std::move(data)] { self->StreamWrite(data); });
    }
    if (!in_exchange_ || closed_ || data.empty()) return;
    Enqueue(chunked_ ? Chunk(data) : std::move(data));
  }
  void EndStream() override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = shared_from_this()] { self->EndStream(); });
    }
    if (!in_exchange_ || closed_) return;
    if (chunked_) Enqueue("0\r\n\r\n");
    EndExchange();
  }
  void Post(std::function<void()> fn) override {
    asio::post(stream_.get_executor(), std::move(fn));
  }
  void WhenWritable(std::function<void()> fn) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = shared_from_this(), fn = std::move(fn)] { self->WhenWritable(fn); });
    }
    if (closed_) return;
    if (queued_bytes_ < options_.write_queue_bytes) {
      Post(std::move(fn));
    } else {
      writable_waiters_.push_back(std::move(fn));
    }
  }
  bool closed() const override { return closed_; }

 private:
  void DoRead();
  void OnHeader(beast::error_code ec);
  void OnRead(beast::error_code ec);
  void ReadError(beast::error_code ec);
  void Dispatch();
  // On the strand, after the handler returned on a work thread: `pending` becomes the exchange
  // to cancel on disconnect if exchange `id` is still the one in progress.
  void Adopt(uint64_t id, std::shared_ptr<PendingExchange> pending);
  void ReadPeer();
  void OnPeerRead(beast::error_code ec, size_t n);
  void Enqueue(std::string bytes);
  void DoWrite();
  void OnWrite(beast::error_code ec);
  void EndExchange() {
    ReleaseInflightSlot();
    in_exchange_ = false;
    exchange_.reset();
    if (!writing_ && queue_.empty()) Continue();
  }
  // Closes the connection after `timeout` (the drain before a graceful close).
  void ArmIdleTimer(std::chrono::seconds timeout) {
    idle_timer_.expires_after(timeout);
    idle_timer_.async_wait(
        [self = shared_from_this(), gen = ++idle_generation_](beast::error_code ec) {
          if (!ec && gen == self->idle_generation_) self->Close();
        });
  }
  void Continue();
  // Bytes of pipelined requests the session buffers while an exchange is pending.
  size_t PipelineLimit() const {
    return options_.max_header_bytes + static_cast<size_t>(options_.max_body_bytes) + 4096;
  }
  // False (after answering 429) when the request must not run: the connection is over
  // max_connections or max_inflight_requests exchanges are in progress. GET /health always runs.
  bool Admit(const HttpRequest& request);
  void SetBusy(bool busy) {
    if (busy_ != busy) load_->busy.fetch_add(busy ? 1 : -1);
    busy_ = busy;
  }
  void ReleaseInflightSlot() {
    if (std::exchange(holds_inflight_slot_, false)) load_->inflight.fetch_sub(1);
  }
  void RejectTooMany(const std::string& message);
  void FailRequest(const ApiError& e);
  void Close();

  beast::tcp_stream stream_;
  const Strand strand_;       // the stream's executor
  const WorkExecutor work_;   // where handlers run (off the I/O threads)
  uint64_t exchange_id_ = 0;  // counts exchanges; Adopt matches its handler's
  asio::steady_timer idle_timer_;
  uint64_t idle_generation_ = 0;
  const HttpServerOptions& options_;
  RequestHandler& handler_;
  std::shared_ptr<ServerLoad> load_;
  const bool over_connection_limit_;
  bool holds_inflight_slot_ = false;
  bool busy_ = false;  // counted in load_->busy
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<PendingExchange> exchange_;
  bool in_exchange_ = false;
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool peer_reading_ = false;        // a read that watches for disconnects (or drains at close)
  bool restart_read_ = false;        // the peer read was cancelled to read the next request
  bool closing_ = false;             // response sent with Connection: close; draining the peer
  std::atomic<bool> closed_{false};  // read by closed() from any thread
  bool writing_ = false;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  std::vector<std::function<void()>> writable_waiters_;
};

void Session::DoRead() {
  if (closed_) return;
  ++idle_generation_;
  idle_timer_.cancel();
  parser_.emplace();
  parser_->header_limit(options_.max_header_bytes);
  parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
  stream_.expires_after(std::chrono::seconds(options_.io_timeout_s));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(beast::error_code ec) {
  if (ec) return ReadError(ec);
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code e, size_t) { self->OnRead(e); });
  };
  const auto& req = parser_->get();
  if (beast::iequals(req[http::field::expect], "100-continue") && !parser_->is_done()) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue),
                      [self = shared_from_this(), read_body](beast::error_code e, size_t) {
                        if (e) return self->Close();
                        read_body();
                      });
    return;
  }
  read_body();
}

void Session::ReadError(beast::error_code ec) {
  const bool parse_error =
      ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message;
  if (!parse_error) return Close();  // the peer closed, timed out or reset
  in_exchange_ = true;
  SetBusy(true);
  keep_alive_ = false;
  if (ec == http::error::body_limit) {
    return FailRequest(HttpError(413, "The request body is larger than the limit of " +
                                          std::to_string(options_.max_body_bytes) +
                                          " bytes (router.max_body_bytes)"));
  }
  if (ec == http::error::header_limit) {
    return FailRequest(HttpError(431, "The request headers are larger than " +
                                          std::to_string(options_.max_header_bytes) +
                                          " bytes (router.max_header_bytes)"));
  }
  FailRequest(HttpError(400, "Malformed HTTP request: " + ec.message()));
}

void Session::OnRead(beast::error_code ec) {
  if (ec) return ReadError(ec);
  stream_.expires_never();
  in_exchange_ = true;
  ++exchange_id_;
  SetBusy(true);
  const auto& req = parser_->get();
  keep_alive_ = req.keep_alive();
  chunked_ = req.version() >= 11;
  Dispatch();
}

void Session::Dispatch() {
  http::request<http::string_body> req = parser_->release();
  HttpRequest request;
  request.method = std::string(req.method_string());
  const beast::string_view target = req.target();
  request.path = std::string(target.substr(0, target.find('?')));
  request.authorization = std::string(req[http::field::authorization]);
  request.body = std::move(req.body());
  if (!Admit(request)) return;
  // Notice a client that goes away while the response is pending, also when it already sent
  // the start of its next request (pipelining): those bytes wait in the buffer, and the read
  // behind them still sees the hang-up.
  ReadPeer();
  // Requests without a body (GET /health, /v1/models) are cheap: answered here, so /health
  // never queues behind heavy work. Others (JSON parsing, chat templating, tokenization) run on
  // a work thread: one big request must not hold an I/O thread that other connections,
  // accept() and /health need.
  if (request.body.empty() && request.method == "GET") {
    std::shared_ptr<PendingExchange> pending;
    try {
      pending = handler_.Handle(request, shared_from_this());
    } catch (const std::exception& e) {
      return FailRequest(ToApiError(Internal(std::string("internal error: ") + e.what())));
    }
    return Adopt(exchange_id_, std::move(pending));
  }
  asio::post(work_, [self = shared_from_this(), id = exchange_id_, request = std::move(request)] {
    std::shared_ptr<PendingExchange> pending;
    try {
      pending = self->handler_.Handle(request, self);
    } catch (const std::exception& e) {
      const ApiError error = ToApiError(Internal(std::string("internal error: ") + e.what()));
      self->Post([self, id, error] {
        if (id == self->exchange_id_) self->FailRequest(error);
      });
      return;
    }
    self->Post([self, id, pending = std::move(pending)] { self->Adopt(id, pending); });
  });
}

void Session::Adopt(uint64_t id, std::shared_ptr<PendingExchange> pending) {
  if (!pending) return;
  if (closed_) return pending->Cancel();  // the client left while the handler ran
  if (in_exchange_ && id == exchange_id_) exchange_ = std::move(pending);
}

bool Session::Admit(const HttpRequest& request) {
  if (load_->draining.load()) {
    // /health too: load balancers must stop sending here.
    keep_alive_ = false;
    FailRequest(HttpError(503, "The router is shutting down; retry on another router"));
    return false;
  }
  if (request.method == "GET" && request.path == "/health") return true;
  if (over_connection_limit_) {
    keep_alive_ = false;  // make room: this connection closes after the answer
    RejectTooMany("The router has reached its limit of " +
                  std::to_string(options_.max_connections) +
                  " open connections (router.max_connections); retry later");
    return false;
  }
  if (load_->inflight.fetch_add(1) >= options_.max_inflight_requests) {
    load_->inflight.fetch_sub(1);
    RejectTooMany("The router has reached its limit of " +
                  std::to_string(options_.max_inflight_requests) +
                  " requests in progress (router.max_inflight_requests); retry later");
    return false;
  }
  holds_inflight_slot_ = true;
  return true;
}

void Session::RejectTooMany(const std::string& message) {
  ApiError e = HttpError(429, message);
  e.code = "rate_limit_exceeded";
  e.retry_after_s = options_.retry_after_s;
  Respond(ApiErrorResponse(e));
}

void Session::FailRequest(const ApiError& e) {
  Respond(ApiErrorResponse(e));
}

void Session::ReadPeer() {
  if (peer_reading_ || closed_) return;
  // A client may send pipelined requests while one is pending; hold at most one more full
  // request. Beyond that the watch pauses (memory stays bounded) until this exchange ends.
  if (!closing_ && buffer_.size() >= PipelineLimit()) return;
  peer_reading_ = true;
  stream_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnPeerRead(ec, n); });
}

void Session::OnPeerRead(beast::error_code ec, size_t n) {
  peer_reading_ = false;
  const bool restart = std::exchange(restart_read_, false);
  if (closed_) return;
  // An error is the peer going away: cancel what is pending. (A read we cancelled ourselves to
  // start parsing the next request is not.)
  if (ec && !(restart && ec == asio::error::operation_aborted)) return Close();
  if (closing_) {
    buffer_.consume(buffer_.size());
    return ReadPeer();
  }
  if (!ec) buffer_.commit(n);  // the start of the next request; parsed after this exchange
  if (!in_exchange_ && !writing_ && queue_.empty()) return DoRead();
  if (!ec) ReadPeer();  // keep watching for the hang-up behind the pipelined bytes
}

void Session::Enqueue(std::string bytes) {
  queued_bytes_ += bytes.size();
  queue_.push_back(std::move(bytes));
  if (!writing_) DoWrite();
}

void Session::DoWrite() {
  writing_ = true;
  // Every write gets the timeout (a pending read keeps its own; the next read sets its own).
  stream_.expires_after(std::chrono::seconds(options_.io_timeout_s));
  asio::async_write(
      stream_, asio::buffer(queue_.front()),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (ec) return Close();
  queued_bytes_ -= queue_.front().size();
  queue_.pop_front();
  if (queued_bytes_ < options_.write_queue_bytes && !writable_waiters_.empty()) {
    for (auto& fn : std::exchange(writable_waiters_, {})) Post(std::move(fn));
  }
  if (!queue_.empty()) return DoWrite();
  if (!in_exchange_) Continue();
}

// The exchange is over and everything is written: read the next request or close.
void Session::Continue() {
  SetBusy(false);
  if (closed_ || closing_) return;
  if (!keep_alive_ || load_->draining.load()) {
    // Close gracefully: stop sending, then drain what the peer still sends until it closes
    // (or the timeout), so that it reads the response instead of a reset.
    closing_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.consume(buffer_.size());
    ArmIdleTimer(std::chrono::seconds(2));
    return ReadPeer();
  }
  if (!peer_reading_) return DoRead();
  // Stop the disconnect watch; its completion starts reading the next request (with the read
  // timeout, which also bounds an idle keep-alive connection).
  restart_read_ = true;
  beast::error_code ignored;
  stream_.socket().cancel(ignored);
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  in_exchange_ = false;
  SetBusy(false);
  ReleaseInflightSlot();
  idle_timer_.cancel();
  if (auto pending = std::move(exchange_)) pending->Cancel();
  writable_waiters_.clear();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

// ---- server --------------------------------------------------------------------------------

struct HttpServer::Impl {
  HttpServerOptions options;
  RequestHandler& handler;
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  asio::steady_timer accept_backoff{acceptor.get_executor()};
  std::chrono::steady_clock::time_point last_accept_log{};
  std::shared_ptr<ServerLoad> load = std::make_shared<ServerLoad>();
  std::vector<std::thread> threads;
  asio::thread_pool work_pool;  // handlers (see Session::Dispatch)
  std::mutex mu;
  std::vector<std::weak_ptr<Session>> sessions;
  bool accepting = false;
  int port = 0;

  Impl(HttpServerOptions o, RequestHandler& h)
      : options(std::move(o)),
        handler(h),
        work_pool(static_cast<size_t>(std::max(1, options.work_threads))) {}

  void Accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (IsResourceShortage(ec)) return BackOff(ec);
      if (!ec) {
        const bool over = load->connections.fetch_add(1) >= options.max_connections;
        auto session = std::make_shared<Session>(std::move(s), options, handler,
                                                 work_pool.get_executor(), load, over);
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

HttpServer::HttpServer(HttpServerOptions options, RequestHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler)) {}

HttpServer::~HttpServer() {
  Stop();
}

Status HttpServer::Start() {
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
