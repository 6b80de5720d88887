// One HTTP/1.1 connection of the router as an explicit state machine, over any Beast stream:
// beast::tcp_stream (plain HTTP), beast::ssl_stream<beast::tcp_stream> (HTTPS) and, in the unit
// tests and the fuzz target, beast::test::stream. Internal to router/ (http_server.cc, tests):
// other modules see only http_server.h and http_exchange.h.
//
// Phases (SessionPhase) and their transitions:
//
//   Handshake ──> ReadingRequest ──> Handling ──> Streaming ──> Flushing ──> Closing ──> Closed
//                    ^   |              |                        ^   |
//                    |   +──────────────+────────────────────────+   |
//                    +─────────────────── keep-alive ────────────────+
//
//   Handshake → ReadingRequest   the TLS handshake succeeded (other streams start reading)
//   ReadingRequest → Handling    a whole request was parsed
//   ReadingRequest → Flushing    the parser refused it: 400, 413 or 431 (then close)
//   Handling → Streaming         BeginStream (its header is queued at once)
//   Handling → Flushing          Respond, or the session's own 429 / 503 / 500
//   Streaming → Flushing         EndStream
//   Flushing → ReadingRequest    keep-alive, once everything is written (pipelined bytes first)
//   Flushing → Closing           Connection: close (HTTP/1.0, a refused request, draining)
//   Closing → Closed             the peer closed, or `linger` passed
//   any → Closed                 the peer hangs up or resets (in Flushing: resets), a read or
//                                write fails or times out, the server shuts down (Shutdown).
//                                Entering Closed cancels the pending exchange
//                                (PendingExchange::Cancel) and closes the stream; completions
//                                that arrive later are ignored.
//
// What each phase means and which deadline runs:
//   Handshake       TLS server handshake; deadline io_timeout.
//   ReadingRequest  bytes go through the request parser (header and body limits); deadline
//                   io_timeout from the start of the request (an idle keep-alive connection
//                   included). A header with "Expect: 100-continue" gets 100 Continue.
//   Handling        the request is complete; its handler runs (on a work thread, or here for a
//                   bodyless GET) and then its pending exchange; nothing written yet.
//   Streaming       a streamed response's header is out (chunked for HTTP/1.1; raw bytes until
//                   close for HTTP/1.0); pieces follow until EndStream.
//   Flushing        the exchange is over (Respond, EndStream or an error answer); the write queue
//                   drains, then keep-alive reads the next request (pipelined bytes first) and
//                   anything else closes. A peer that closes its side now still gets the rest
//                   of its response.
//   Closing         the response said "Connection: close": TCP shuts its send side and discards
//                   what the peer still sends until it closes (so it reads the response rather
//                   than a reset), TLS exchanges close_notify; deadline `linger`.
//   Closed          the stream is closed.
//
// Besides the phase, two loops run: the read loop (one read in flight at a time; in Handling,
// Streaming and Flushing it buffers the next pipelined request, at most one full request, and
// notices a hang-up, which cancels the pending exchange) and the write loop (one frame in flight
// at a time from a bounded queue, each write with its own io_timeout deadline). Responses are
// framed by Beast: http::response_serializer for the whole response or the streamed header,
// http::make_chunk / http::make_chunk_last for the pieces.
//
// Threads: every member is touched on the session's strand only (phase_ is also read by closed()
// from other threads); the ResponseSink writers called elsewhere hop to the strand first.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "router/api_error.h"
#include "router/http_exchange.h"
#include "router/http_server.h"

namespace llm::router {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using Strand = asio::strand<asio::io_context::executor_type>;
using BeastResponse = http::response<http::string_body>;

// What all sessions of a server share: the counts behind max_connections and
// max_inflight_requests, the busy count a drain waits for, and the drain flag. Shared-owned
// because sessions can outlive the server during shutdown.
struct ServerLoad {
  std::atomic<int> connections{0};
  std::atomic<int> inflight{0};
  // Sessions in Handling, Streaming or Flushing: a draining server waits for this to reach 0.
  std::atomic<int> busy{0};
  // Shutting down: every new request gets 503 and connections close after their response.
  std::atomic<bool> draining{false};
};

// The limits of one session (HttpServerOptions, with the timeouts as durations).
struct SessionLimits {
  uint32_t max_header_bytes = 16 * 1024;
  uint64_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds io_timeout{60'000};
  std::chrono::milliseconds linger{2'000};  // Closing: how long to wait for the peer's close
  size_t write_queue_bytes = 256 * 1024;
  int max_connections = 1024;
  int max_inflight_requests = 256;
  int retry_after_s = 1;

  static SessionLimits From(const HttpServerOptions& options);
};

// What a session is given besides its stream.
struct SessionContext {
  Strand strand;                      // every handler of the session runs here
  asio::any_io_executor work;         // where request handlers run (bodyless GETs: on the strand)
  RequestHandler* handler = nullptr;  // outlives the session
  SessionLimits limits;
  std::shared_ptr<ServerLoad> load;
};

enum class SessionPhase {
  kHandshake,
  kReadingRequest,
  kHandling,
  kStreaming,
  kFlushing,
  kClosing,
  kClosed,
};
const char* SessionPhaseName(SessionPhase phase);

// The parts of a session that do not depend on the stream type (http_session.cc).
namespace session_detail {
// Client request ids longer than this are replaced (they end up in every log line).
inline constexpr size_t kMaxRequestIdBytes = 128;
// `client_id` when usable as a request id (1-128 printable ASCII, no spaces), else a new random
// 32-hex-digit one.
std::string RequestIdFromHeader(std::string_view client_id);
// The request as the handler sees it (the query string dropped, its request id decided).
HttpRequest ToHttpRequest(http::request<http::string_body>&& request);
// A complete response with Content-Length.
std::unique_ptr<BeastResponse> FullResponse(HttpResponse response, bool keep_alive);
// The header of a streamed response: chunked (with Cache-Control: no-cache) or, for an HTTP/1.0
// client, without framing (the body ends when the connection closes).
std::unique_ptr<BeastResponse> StreamHead(int status, const std::string& content_type, bool chunked,
                                          bool keep_alive);
// "HTTP/1.1 100 Continue".
std::unique_ptr<BeastResponse> ContinueHead();
// The answer to a request the parser refused: 413 (body), 431 (header) or 400, naming the key.
ApiError RequestReadError(const beast::error_code& ec, const SessionLimits& limits);
// An error answer of the session's own (429 with Retry-After).
ApiError TooManyRequests(const std::string& message, int retry_after_s);
}  // namespace session_detail

// What the server needs of a session, whatever its stream type.
class HttpSessionBase : public ResponseSink {
 public:
  // Starts the state machine (the TLS handshake or the first read).
  virtual void Run() = 0;
  // From any thread: cancel the pending exchange and close.
  virtual void Shutdown() = 0;
  virtual SessionPhase phase() const = 0;
};

// How the session closes a stream, by what the stream is (no specialisations to keep in sync):
// TLS streams handshake and exchange close_notify; TCP streams shut their send side and linger;
// others (test streams) just close.
template <class Stream>
constexpr bool kStreamIsTls = requires(Stream& s) {
  s.handshake(asio::ssl::stream_base::server);
};
template <class Stream>
constexpr bool kStreamIsTcp = requires(Stream& s) {
  beast::get_lowest_layer(s).socket().shutdown(asio::socket_base::shutdown_send);
};

template <class Stream>
void CloseStream(Stream& stream) {
  if constexpr (kStreamIsTcp<Stream>) {
    beast::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  }
  beast::get_lowest_layer(stream).close();
}

template <class Stream>
class HttpSession final : public HttpSessionBase,
                          public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  // Counts the connection in ctx.load (uncounted when destroyed); a connection beyond
  // max_connections gets 429 for every request but GET /health, then closes.
  template <class... StreamArgs>
  explicit HttpSession(SessionContext ctx, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...),
        strand_(ctx.strand),
        work_(std::move(ctx.work)),
        handler_(*ctx.handler),
        limits_(ctx.limits),
        load_(std::move(ctx.load)),
        over_connection_limit_(load_->connections.fetch_add(1) >= limits_.max_connections),
        read_deadline_{asio::steady_timer(strand_)},
        write_deadline_{asio::steady_timer(strand_)} {}
  ~HttpSession() override {
    SetBusy(false);
    ReleaseInflightSlot();
    load_->connections.fetch_sub(1);
  }

  Stream& stream() { return stream_; }

  void Run() override {
    asio::dispatch(strand_, [self = this->shared_from_this()] { self->Start(); });
  }
  void Shutdown() override {
    asio::post(strand_, [self = this->shared_from_this()] { self->Close(); });
  }
  SessionPhase phase() const override { return phase_.load(); }

  // ResponseSink. The writers may be called from a work thread (the handler runs there): they
  // hop to the strand, in call order.
  void Respond(HttpResponse r) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = this->shared_from_this(), r = std::move(r)]() mutable {
        self->Respond(std::move(r));
      });
    }
    if (phase_ != SessionPhase::kHandling) return;  // no exchange, already streaming, or closed
    Answer(std::move(r));
  }
  void BeginStream(int status, const std::string& content_type) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = this->shared_from_this(), status, content_type] {
        self->BeginStream(status, content_type);
      });
    }
    if (phase_ != SessionPhase::kHandling) return;
    if (load_->draining.load() || !http11_) keep_alive_ = false;
    auto head = session_detail::StreamHead(status, content_type, http11_, keep_alive_);
    head->set("X-Request-Id", request_id_);
    Enqueue({Frame::kHead, std::move(head), {}});
    Enter(SessionPhase::kStreaming);
  }
  void StreamWrite(std::string data) override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = this->shared_from_this(), data = std::move(data)]() mutable {
        self->StreamWrite(std::move(data));
      });
    }
    // An empty chunk would read as the last one.
    if (phase_ != SessionPhase::kStreaming || data.empty()) return;
    Enqueue({http11_ ? Frame::kChunk : Frame::kRaw, nullptr, std::move(data)});
  }
  void EndStream() override {
    if (!strand_.running_in_this_thread()) {
      return Post([self = this->shared_from_this()] { self->EndStream(); });
    }
    if (phase_ != SessionPhase::kStreaming) return;
    if (http11_) Enqueue({Frame::kLastChunk, nullptr, {}});
    EndExchange();
  }
  void Post(std::function<void()> fn) override { asio::post(strand_, std::move(fn)); }
  void WhenWritable(std::function<void()> fn) override {
    if (!strand_.running_in_this_thread()) {
      return Post(
          [self = this->shared_from_this(), fn = std::move(fn)] { self->WhenWritable(fn); });
    }
    if (phase_ == SessionPhase::kClosed) return;
    if (queued_bytes_ < limits_.write_queue_bytes) {
      Post(std::move(fn));
    } else {
      writable_waiters_.push_back(std::move(fn));
    }
  }
  bool closed() const override { return phase_.load() == SessionPhase::kClosed; }

 private:
  // One write of the write loop.
  struct Frame {
    enum Kind {
      kMessage,    // a whole response (header + Content-Length body)
      kHead,       // a header alone: a streamed response's, or 100 Continue
      kChunk,      // a piece of a chunked response
      kLastChunk,  // the end of a chunked response
      kRaw,        // a piece of an HTTP/1.0 stream (no framing)
    };
    Kind kind;
    std::unique_ptr<BeastResponse> message;  // kMessage, kHead
    std::string data;                        // kChunk, kRaw
    size_t bytes() const { return message ? message->body().size() : data.size(); }
  };
  // A timer whose stale completions are told apart by a generation count.
  struct Deadline {
    asio::steady_timer timer;
    uint64_t generation = 0;
  };

  template <class F>
  auto OnStrand(F&& f) {
    return asio::bind_executor(strand_, std::forward<F>(f));
  }

  // ---- phases ----

  // The one place the phase changes; keeps the busy count, the in-flight slot and the read
  // deadline in step with it.
  void Enter(SessionPhase next) {
    phase_ = next;
    SetBusy(next == SessionPhase::kHandling || next == SessionPhase::kStreaming ||
            next == SessionPhase::kFlushing);
    if (next != SessionPhase::kHandling && next != SessionPhase::kStreaming) {
      ReleaseInflightSlot();
    }
    switch (next) {
      case SessionPhase::kHandshake:
      case SessionPhase::kReadingRequest:
        Arm(read_deadline_, limits_.io_timeout);
        break;
      case SessionPhase::kClosing:
        Arm(read_deadline_, limits_.linger);
        break;
      case SessionPhase::kClosed:
        Disarm(write_deadline_);
        Disarm(read_deadline_);
        break;
      default:
        Disarm(read_deadline_);
    }
  }

  void Start() {
    if constexpr (kStreamIsTls<Stream>) {
      Enter(SessionPhase::kHandshake);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              OnStrand([self = this->shared_from_this()](beast::error_code ec) {
                                self->OnHandshake(ec);
                              }));
    } else {
      BeginReadingRequest();
    }
  }

  void OnHandshake(beast::error_code ec) {
    if (phase_ != SessionPhase::kHandshake) return;  // closed meanwhile
    if (ec) return Close();  // not TLS (a plain HTTP client), a bad client hello, a timeout
    BeginReadingRequest();
  }

  void BeginReadingRequest() {
    Enter(SessionPhase::kReadingRequest);
    parser_.emplace();
    parser_->header_limit(limits_.max_header_bytes);
    parser_->body_limit(limits_.max_body_bytes);
    ParseRequest();  // pipelined bytes first
  }

  // ReadingRequest: runs the buffered bytes through the parser.
  void ParseRequest() {
    while (phase_ == SessionPhase::kReadingRequest && buffer_.size() > 0) {
      const bool had_header = parser_->is_header_done();
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec && ec != http::error::need_more) return RefuseRequest(ec);
      if (!had_header && parser_->is_header_done() && !parser_->is_done() &&
          beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
        Enqueue({Frame::kHead, session_detail::ContinueHead(), {}});
      }
      if (parser_->is_done()) return OnRequest();
      if (used == 0) break;  // the header is not complete yet
    }
    ReadMore();
  }

  // ReadingRequest → Flushing: the parser refused the request (413, 431, 400). The rest of the
  // connection cannot be framed: it closes after the answer.
  void RefuseRequest(const beast::error_code& ec) {
    keep_alive_ = false;
    request_id_.clear();  // no request was read
    Answer(ApiErrorResponse(session_detail::RequestReadError(ec, limits_)));
  }

  // ReadingRequest → Handling.
  void OnRequest() {
    ++exchange_id_;
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    keep_alive_ = req.keep_alive();
    http11_ = req.version() >= 11;
    HttpRequest request = session_detail::ToHttpRequest(std::move(req));
    request_id_ = request.request_id;
    if constexpr (kStreamIsTcp<Stream>) {
      beast::error_code ec;
      const auto peer = beast::get_lowest_layer(stream_).socket().remote_endpoint(ec);
      request.from_loopback = !ec && peer.address().is_loopback();
    }
    Enter(SessionPhase::kHandling);
    if (!Admit(request)) return;
    // Watch for a client that goes away while the response is pending, also when it already
    // sent the start of its next request (pipelining): those bytes wait in the buffer, and the
    // read behind them still sees the hang-up.
    ReadMore();
    // Requests without a body (GET /health, /v1/models) are cheap: answered here, so /health
    // never queues behind heavy work. Others (JSON parsing, chat templating, tokenization) run
    // on a work thread: one big request must not hold an I/O thread.
    if (request.body.empty() && request.method == "GET") {
      std::shared_ptr<PendingExchange> pending;
      try {
        pending = handler_.Handle(request, this->shared_from_this());
      } catch (const std::exception& e) {
        return FailExchange(exchange_id_, e.what());
      }
      return Adopt(exchange_id_, std::move(pending));
    }
    asio::post(
        work_, [self = this->shared_from_this(), id = exchange_id_, request = std::move(request)] {
          std::shared_ptr<PendingExchange> pending;
          try {
            pending = self->handler_.Handle(request, self);
          } catch (const std::exception& e) {
            self->Post([self, id, what = std::string(e.what())] { self->FailExchange(id, what); });
            return;
          }
          self->Post([self, id, pending = std::move(pending)] { self->Adopt(id, pending); });
        });
  }

  // False (after answering 429 or 503) when the request must not run: the server drains, the
  // connection is over max_connections or max_inflight_requests exchanges are in progress.
  // GET /health always runs (unless draining).
  bool Admit(const HttpRequest& request) {
    if (load_->draining.load()) {
      keep_alive_ = false;  // /health too: load balancers must stop sending here
      Answer(
          ApiErrorResponse(HttpError(503, "The router is shutting down; retry on another router")));
      return false;
    }
    if (request.method == "GET" && request.path == "/health") return true;
    if (over_connection_limit_) {
      keep_alive_ = false;  // make room: this connection closes after the answer
      Answer(ApiErrorResponse(session_detail::TooManyRequests(
          "The router has reached its limit of " + std::to_string(limits_.max_connections) +
              " open connections (router.max_connections); retry later",
          limits_.retry_after_s)));
      return false;
    }
    if (load_->inflight.fetch_add(1) >= limits_.max_inflight_requests) {
      load_->inflight.fetch_sub(1);
      Answer(ApiErrorResponse(session_detail::TooManyRequests(
          "The router has reached its limit of " + std::to_string(limits_.max_inflight_requests) +
              " requests in progress (router.max_inflight_requests); retry later",
          limits_.retry_after_s)));
      return false;
    }
    holds_inflight_slot_ = true;
    return true;
  }

  // On the strand, after the handler returned: `pending` becomes the exchange to cancel on
  // disconnect if exchange `id` is still in progress.
  void Adopt(uint64_t id, std::shared_ptr<PendingExchange> pending) {
    if (!pending) return;
    if (phase_ == SessionPhase::kClosed) return pending->Cancel();  // the client left meanwhile
    if (id == exchange_id_ &&
        (phase_ == SessionPhase::kHandling || phase_ == SessionPhase::kStreaming)) {
      exchange_ = std::move(pending);
    }
  }

  // The handler of exchange `id` threw: a 500 if nothing was sent yet.
  void FailExchange(uint64_t id, const std::string& what) {
    if (id != exchange_id_ || phase_ != SessionPhase::kHandling) return;
    Answer(ApiErrorResponse(ToApiError(Internal("internal error: " + what))));
  }

  // Handling (or a refused request) → Flushing with a whole response.
  void Answer(HttpResponse r) {
    if (load_->draining.load()) keep_alive_ = false;
    if (!request_id_.empty()) r.headers.emplace_back("X-Request-Id", request_id_);
    Enqueue({Frame::kMessage, session_detail::FullResponse(std::move(r), keep_alive_), {}});
    EndExchange();
  }

  // Handling/Streaming → Flushing.
  void EndExchange() {
    exchange_.reset();
    Enter(SessionPhase::kFlushing);
    if (!writing_ && queue_.empty()) AfterResponse();
  }

  // Flushing, everything written → ReadingRequest (keep-alive) or Closing.
  void AfterResponse() {
    if (keep_alive_ && !load_->draining.load()) return BeginReadingRequest();
    BeginClosing();
  }

  void BeginClosing() {
    Enter(SessionPhase::kClosing);
    buffer_.consume(buffer_.size());
    if constexpr (kStreamIsTls<Stream>) {
      stream_.async_shutdown(
          OnStrand([self = this->shared_from_this()](beast::error_code) { self->Close(); }));
    } else if constexpr (kStreamIsTcp<Stream>) {
      // Stop sending, then drain what the peer still sends until it closes (or the linger
      // deadline), so that it reads the response instead of a reset.
      beast::error_code ignored;
      beast::get_lowest_layer(stream_).socket().shutdown(asio::socket_base::shutdown_send, ignored);
      ReadMore();
    } else {
      Close();
    }
  }

  // Any phase → Closed.
  void Close() {
    if (phase_ == SessionPhase::kClosed) return;
    Enter(SessionPhase::kClosed);
    if (auto pending = std::move(exchange_)) pending->Cancel();
    writable_waiters_.clear();
    CloseStream(stream_);
  }

  // ---- read loop ----

  // Bytes of pipelined requests buffered while an exchange is in progress.
  size_t PipelineLimit() const {
    return limits_.max_header_bytes + static_cast<size_t>(limits_.max_body_bytes) + 4096;
  }

  void ReadMore() {
    if (reading_) return;
    switch (phase_.load()) {
      case SessionPhase::kHandshake:
      case SessionPhase::kClosed:
        return;
      case SessionPhase::kReadingRequest:
        break;
      case SessionPhase::kClosing:
        if constexpr (kStreamIsTls<Stream>) return;  // async_shutdown reads the peer's close_notify
        break;
      default:
        // Hold at most one more full request; beyond that the watch pauses (memory stays
        // bounded) until this exchange ends.
        if (buffer_.size() >= PipelineLimit()) return;
    }
    reading_ = true;
    // Into a chunk of its own, not buffer_.prepare(): the parser consumes buffer_ while this
    // read is in flight (pipelined requests), which moves buffer_'s write position.
    stream_.async_read_some(asio::buffer(read_chunk_),
                            OnStrand([self = this->shared_from_this()](
                                         beast::error_code ec, size_t n) { self->OnRead(ec, n); }));
  }

  void OnRead(beast::error_code ec, size_t n) {
    reading_ = false;
    switch (phase_.load()) {
      case SessionPhase::kClosed:
        return;
      case SessionPhase::kClosing:
        if constexpr (kStreamIsTls<Stream>) return;  // async_shutdown ends the connection
        if (ec) return Close();                      // the peer closed: it has read everything
        return ReadMore();                           // discard
      default:
        break;
    }
    if (ec) {
      // The peer closed its side (EOF, or TLS close_notify) once its response was complete:
      // finish writing it, then close (over TLS with our close_notify).
      if (phase_ == SessionPhase::kFlushing && ec == asio::error::eof) {
        keep_alive_ = false;
        return;
      }
      // It closed, reset or failed with an exchange in progress (or while we read a request):
      // nothing more can be read or answered, and the pending exchange is cancelled (also
      // when a pipelined request waits in the buffer).
      return Close();
    }
    buffer_.commit(asio::buffer_copy(buffer_.prepare(n), asio::buffer(read_chunk_.data(), n)));
    if (phase_ == SessionPhase::kReadingRequest) return ParseRequest();
    ReadMore();  // Handling/Streaming/Flushing: keep the bytes, keep watching
  }

  // ---- write loop ----

  void Enqueue(Frame frame) {
    queued_bytes_ += frame.bytes();
    queue_.push_back(std::move(frame));
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    writing_ = true;
    Arm(write_deadline_, limits_.io_timeout);
    Frame& f = queue_.front();  // stays in place (a deque) until its write completes
    auto done = OnStrand(
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
    switch (f.kind) {
      case Frame::kMessage:
        serializer_.emplace(*f.message);
        return http::async_write(stream_, *serializer_, std::move(done));
      case Frame::kHead:
        serializer_.emplace(*f.message);
        return http::async_write_header(stream_, *serializer_, std::move(done));
      case Frame::kChunk:
        return asio::async_write(stream_, http::make_chunk(asio::buffer(f.data)), std::move(done));
      case Frame::kLastChunk:
        return asio::async_write(stream_, http::make_chunk_last(), std::move(done));
      case Frame::kRaw:
        return asio::async_write(stream_, asio::buffer(f.data), std::move(done));
    }
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    Disarm(write_deadline_);
    if (phase_ == SessionPhase::kClosed) return;
    if (ec) return Close();
    serializer_.reset();
    queued_bytes_ -= queue_.front().bytes();
    queue_.pop_front();
    if (queued_bytes_ < limits_.write_queue_bytes && !writable_waiters_.empty()) {
      for (auto& fn : std::exchange(writable_waiters_, {})) Post(std::move(fn));
    }
    if (!queue_.empty()) return WriteNext();
    if (phase_ == SessionPhase::kFlushing) AfterResponse();
  }

  // ---- deadlines and accounting ----

  // Closes the session when `d` expires, unless it is re-armed or disarmed first.
  void Arm(Deadline& d, std::chrono::milliseconds after) {
    d.timer.expires_after(after);
    d.timer.async_wait(OnStrand([self = this->shared_from_this(), deadline = &d,
                                 generation = ++d.generation](beast::error_code ec) {
      if (!ec && generation == deadline->generation) self->Close();
    }));
  }
  void Disarm(Deadline& d) {
    ++d.generation;
    d.timer.cancel();
  }

  void SetBusy(bool busy) {
    if (busy_ != busy) load_->busy.fetch_add(busy ? 1 : -1);
    busy_ = busy;
  }
  void ReleaseInflightSlot() {
    if (std::exchange(holds_inflight_slot_, false)) load_->inflight.fetch_sub(1);
  }

  static constexpr size_t kReadSize = 8 * 1024;

  Stream stream_;
  const Strand strand_;
  const asio::any_io_executor work_;
  RequestHandler& handler_;
  const SessionLimits limits_;
  const std::shared_ptr<ServerLoad> load_;
  const bool over_connection_limit_;

  std::atomic<SessionPhase> phase_{SessionPhase::kReadingRequest};
  Deadline read_deadline_;   // Handshake, ReadingRequest, Closing
  Deadline write_deadline_;  // the write in flight
  bool busy_ = false;        // counted in load_->busy
  bool holds_inflight_slot_ = false;

  // The exchange (Handling, Streaming): the request's framing, and what to cancel.
  uint64_t exchange_id_ = 0;  // counts exchanges; Adopt matches its handler's
  std::string request_id_;    // of the exchange in progress: sent as X-Request-Id
  bool keep_alive_ = true;    // the response says keep-alive; false closes after it
  bool http11_ = true;        // chunked streams (HTTP/1.0: raw until close)
  std::shared_ptr<PendingExchange> exchange_;

  // Read loop.
  bool reading_ = false;
  std::array<char, kReadSize> read_chunk_;                         // what the read in flight fills
  beast::flat_buffer buffer_;                                      // bytes read, not yet parsed
  std::optional<http::request_parser<http::string_body>> parser_;  // ReadingRequest

  // Write loop.
  bool writing_ = false;
  std::deque<Frame> queue_;
  size_t queued_bytes_ = 0;  // body and chunk bytes not yet written
  std::optional<http::response_serializer<http::string_body>> serializer_;
  std::vector<std::function<void()>> writable_waiters_;
};

}  // namespace llm::router
