#include "router/upstream_pool.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "proto/llm.grpc.pb.h"
#include "router/prefix_affinity.h"
#include "router/upstream_errors.h"

namespace llm::router {

// A call in flight that the health checker can end with an error (GenerateCall below).
class FailableCall {
 public:
  virtual ~FailableCall() = default;
  virtual void Fail(ApiError error) = 0;
};

struct Upstream {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Generation::Stub> generation;
  std::unique_ptr<v1::Admin::Stub> admin;
  std::atomic<int> outstanding{0};
  // Guarded by UpstreamPool::Impl::mu.
  bool healthy = false;
  ModelLimits limits;
  std::string last_error;
  // In flight; each removes itself in OnDone.
  std::unordered_map<FailableCall*, std::weak_ptr<FailableCall>> calls;
};

struct UpstreamPool::Impl {
  // Guarded by mu (Add/Remove change it at run time); calls hold their upstream, so a removed
  // one lives until its last call is done.
  std::vector<std::shared_ptr<Upstream>> upstreams;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  grpc::ChannelArguments channel_args;
  std::chrono::milliseconds interval{1000};
  RoutingPolicy policy;  // set before Start
  size_t next_turn = 0;  // round_robin: where the next search starts (guarded by mu)
  mutable std::mutex mu;
  std::condition_variable cv;  // wakes the checker on Stop
  bool stopping = false;
  std::thread checker;
  std::atomic<int> outstanding{0};
  mutable std::mutex idle_mu;
  mutable std::condition_variable idle_cv;

  void CheckOne(Upstream& u);
  void CheckHealth(Upstream& u, std::vector<std::shared_ptr<FailableCall>>* to_fail,
                   std::string* why);
  std::vector<std::shared_ptr<Upstream>> List() const {
    std::lock_guard<std::mutex> lock(mu);
    return upstreams;
  }
  void CheckAll() {
    for (auto& u : List()) CheckOne(*u);
  }
  std::shared_ptr<Upstream> Make(std::string address) {
    auto u = std::make_shared<Upstream>();
    u->address = std::move(address);
    u->channel = grpc::CreateCustomChannel(u->address, credentials, channel_args);
    u->generation = v1::Generation::NewStub(u->channel);
    u->admin = v1::Admin::NewStub(u->channel);
    return u;
  }
  // The upstream for a request whose prompt hashes to `key` (see router/prefix_affinity.h):
  // among the healthy ones not in `tried`, the rendezvous winner for the key unless it has
  // policy.max_imbalance more calls in flight than the least-loaded one, which then takes it
  // (least_loaded: always; round_robin: the next one in turn). Counted as outstanding at once;
  // null when none is left.
  std::shared_ptr<Upstream> Pick(const std::vector<std::shared_ptr<Upstream>>& tried,
                                 uint64_t key) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<Upstream> least, affine;
    uint64_t best_weight = 0;
    for (const auto& u : upstreams) {
      if (!u->healthy || std::find(tried.begin(), tried.end(), u) != tried.end()) continue;
      if (!least || u->outstanding.load() < least->outstanding.load()) least = u;
      const uint64_t w = RendezvousWeight(key, u->address);
      if (!affine || w > best_weight) {
        affine = u;
        best_weight = w;
      }
    }
    std::shared_ptr<Upstream> best = least;
    if (policy.mode == RoutingPolicy::Mode::kPrefixAffinity && affine &&
        affine->outstanding.load() - least->outstanding.load() < policy.max_imbalance) {
      best = affine;
    }
    if (policy.mode == RoutingPolicy::Mode::kRoundRobin && least) {
      // The first healthy, untried upstream at or after the turn counter.
      const size_t n = upstreams.size();
      for (size_t i = 0; i < n; ++i) {
        const auto& u = upstreams[(next_turn + i) % n];
        if (!u->healthy || std::find(tried.begin(), tried.end(), u) != tried.end()) continue;
        best = u;
        next_turn = (next_turn + i + 1) % n;
        break;
      }
    }
    if (best) {
      best->outstanding.fetch_add(1);
      outstanding.fetch_add(1);
    }
    return best;
  }
  std::string NoneHealthy() const {
    std::lock_guard<std::mutex> lock(mu);
    return "no coordinator is available (none of " + std::to_string(upstreams.size()) +
           " upstreams is healthy)";
  }
  void MarkUnhealthy(Upstream& u, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    u.healthy = false;
    u.last_error = why;
  }
  void CallDone(Upstream& u) {
    u.outstanding.fetch_sub(1);
    if (outstanding.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(idle_mu);
      idle_cv.notify_all();
    }
  }
};

void UpstreamPool::Impl::CheckOne(Upstream& u) {
  std::vector<std::shared_ptr<FailableCall>> to_fail;
  std::string why;
  CheckHealth(u, &to_fail, &why);
  // Outside mu: a call's cancellation reaches back into the pool.
  for (auto& call : to_fail) call->Fail(HttpError(503, why));
}

void UpstreamPool::Impl::CheckHealth(Upstream& u,
                                     std::vector<std::shared_ptr<FailableCall>>* to_fail,
                                     std::string* why) {
  grpc::ClientContext ctx;
  // Wait (bounded) for a connection in progress instead of failing fast on a channel that is
  // still in reconnect backoff: a coordinator that just came up is seen at the next check.
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1000));
  v1::HealthRequest req;
  v1::HealthResponse resp;
  const grpc::Status s = u.admin->Health(&ctx, req, &resp);
  std::lock_guard<std::mutex> lock(mu);
  if (!s.ok()) {
    u.healthy = false;
    u.last_error = s.error_message();
    return;
  }
  u.healthy = resp.serving();
  u.last_error = resp.serving() ? "" : resp.detail().empty() ? "draining" : resp.detail();
  u.limits = {resp.model(), resp.max_model_len(), resp.vocab_size()};
  // Draining and shutting down let running requests finish; a cluster whose ranks stopped
  // answering will not, so its open requests end now with an error instead of at the deadline.
  const bool wedged = resp.ranks_unresponsive();
  if (wedged && !u.calls.empty()) {
    LogEvent(
        LogLevel::kError, "coordinator is not healthy; failing its open requests",
        {{"upstream", u.address}, {"detail", resp.detail()}, {"open_requests", u.calls.size()}});
    *why = "coordinator " + u.address + " is not healthy: " + resp.detail();
    for (auto& [raw, weak] : u.calls) {
      if (auto call = weak.lock()) to_fail->push_back(std::move(call));
    }
  }
}

namespace {

// What a GenerateCall reports to its PooledGenerate: each message, and the end (`retryable`:
// the upstream refused or could not be reached (UNAVAILABLE) and nobody cancelled the call).
struct CallCallbacks {
  std::function<void(v1::GenerateResponse)> on_message;
  std::function<void(std::optional<ApiError>, bool retryable)> on_done;
};

// One Generate call (gRPC callback API). A hold keeps the call open between reads that the
// owner requests from other threads; it is released exactly once, when the stream ended or the
// owner cancelled with no read outstanding. OnDone then reports and drops the self-reference.
class GenerateCall final : public GenerateStream,
                           public FailableCall,
                           public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateCall(std::shared_ptr<UpstreamPool::Impl> pool, std::shared_ptr<Upstream> upstream,
               CallCallbacks callbacks)
      : pool_(std::move(pool)),
        upstream_holder_(std::move(upstream)),
        upstream_(*upstream_holder_),
        callbacks_(std::move(callbacks)) {}

  void Start(std::shared_ptr<GenerateCall> self, const v1::GenerateRequest& request,
             std::chrono::seconds timeout) {
    self_ = std::move(self);
    {
      std::lock_guard<std::mutex> lock(pool_->mu);
      upstream_.calls.emplace(this, std::weak_ptr<FailableCall>(self_));
    }
    request_ = request;
    ctx_.set_deadline(std::chrono::system_clock::now() + timeout);
    upstream_.generation->async()->Generate(&ctx_, &request_, this);
    AddHold();
    reading_ = true;
    StartRead(&response_);
    StartCall();
  }

  void ReadNext() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_ || released_ || reading_) return;
      reading_ = true;
    }
    StartRead(&response_);
  }

  // The health checker's verdict: end the call with `status` (not CANCELLED).
  void Fail(ApiError error) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_) failure_ = std::move(error);
    }
    ctx_.TryCancel();
  }

  void Cancel() override {
    bool release = false;
    {
      // Marked before the cancel: the CANCELLED it brings must not read as the upstream's own
      // (which OnDone retries elsewhere).
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      release = !reading_;
    }
    ctx_.TryCancel();
    if (release) ReleaseHold();
  }

  void OnReadDone(bool ok) override {
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      release = !ok || cancelled_;
    }
    if (release) {
      ReleaseHold();
      return;
    }
    // Take the message out before the callback: the owner may call ReadNext (from another
    // thread) as soon as it has it, and the next read lands in response_.
    v1::GenerateResponse message;
    message.Swap(&response_);
    callbacks_.on_message(std::move(message));
  }

  void OnDone(const grpc::Status& s) override {
    {
      std::lock_guard<std::mutex> lock(pool_->mu);
      upstream_.calls.erase(this);
    }
    std::optional<ApiError> error;
    if (!s.ok()) error = UpstreamApiError(s.error_code(), s.error_message(), upstream_.address);
    // CANCELLED that the router did not ask for is the upstream dropping the call as it shuts
    // down (a call that meets grpc::Server::Shutdown is cancelled by the server, after the
    // coordinator has stopped answering UNAVAILABLE itself): as retryable as UNAVAILABLE.
    bool retryable = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     s.error_code() == grpc::StatusCode::CANCELLED;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failure_ && !s.ok()) error = *failure_;
      retryable = retryable && !failure_ && !cancelled_;
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      pool_->MarkUnhealthy(upstream_, s.error_message());
    }
    callbacks_.on_done(std::move(error), retryable);
    callbacks_ = {};
    pool_->CallDone(upstream_);  // after on_done: WaitIdle() then means no callback is running
    self_.reset();               // may delete this
  }

 private:
  void ReleaseHold() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (released_) return;
      released_ = true;
    }
    RemoveHold();
  }

  std::shared_ptr<UpstreamPool::Impl> pool_;
  std::shared_ptr<Upstream> upstream_holder_;  // a removed upstream lives until its calls end
  Upstream& upstream_;
  CallCallbacks callbacks_;
  std::shared_ptr<GenerateCall> self_;
  grpc::ClientContext ctx_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  std::mutex mu_;
  bool reading_ = false;
  bool cancelled_ = false;
  bool released_ = false;
  std::optional<ApiError> failure_;  // set by Fail: reported instead of CANCELLED
};

// The handle the owner gets: one request, sent to one upstream after another while they refuse
// it before producing anything (UNAVAILABLE: draining, shutting down, unreachable; CANCELLED by
// the upstream, not the router: shut down under the call), each upstream at most once. Once a
// message arrived, the request stays where it is.
class PooledGenerate final : public GenerateStream,
                             public std::enable_shared_from_this<PooledGenerate> {
 public:
  PooledGenerate(std::shared_ptr<UpstreamPool::Impl> pool, v1::GenerateRequest request,
                 uint64_t affinity_key, std::chrono::seconds timeout, GenerateCallbacks owner)
      : pool_(std::move(pool)),
        request_(std::move(request)),
        key_(affinity_key),
        timeout_(timeout),
        owner_(std::move(owner)) {}

  // Starts the call on `upstream` (already counted as outstanding by Pick). Attempts follow
  // one another (the next starts in the previous one's on_done), so tried_ needs no lock.
  void Attempt(std::shared_ptr<Upstream> upstream) {
    tried_.push_back(upstream);
    auto self = shared_from_this();
    auto call = std::make_shared<GenerateCall>(
        pool_, std::move(upstream),
        CallCallbacks{[self](v1::GenerateResponse m) {
                        self->got_message_.store(true);
                        self->owner_.on_message(std::move(m));
                      },
                      [self](std::optional<ApiError> e, bool retryable) {
                        self->OnCallDone(std::move(e), retryable);
                      }});
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = call;
      cancelled = cancelled_;
    }
    call->Start(call, request_, timeout_);
    if (cancelled) call->Cancel();
  }

  void ReadNext() override {
    if (auto call = Current()) call->ReadNext();
  }
  void Cancel() override {
    std::shared_ptr<GenerateCall> call;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      call = current_;
    }
    if (call) call->Cancel();
  }

 private:
  std::shared_ptr<GenerateCall> Current() {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }

  void OnCallDone(std::optional<ApiError> error, bool retryable) {
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
    }
    if (error && retryable && !cancelled && !got_message_.load()) {
      if (std::shared_ptr<Upstream> next = pool_->Pick(tried_, key_)) {
        LogEvent(LogLevel::kWarn, "upstream refused the request; retrying on another",
                 {{"request_id", request_.request_id()},
                  {"upstream", tried_.back()->address},
                  {"next_upstream", next->address},
                  {"error", error->message}});
        return Attempt(std::move(next));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_.reset();  // the call holds this object through its callbacks: break the cycle
    }
    owner_.on_done(std::move(error));
    owner_ = {};
  }

  std::shared_ptr<UpstreamPool::Impl> pool_;
  const v1::GenerateRequest request_;
  const uint64_t key_;  // prefix affinity (router/prefix_affinity.h)
  const std::chrono::seconds timeout_;
  GenerateCallbacks owner_;
  std::vector<std::shared_ptr<Upstream>> tried_;
  std::atomic<bool> got_message_{false};
  std::mutex mu_;
  std::shared_ptr<GenerateCall> current_;
  bool cancelled_ = false;
};

}  // namespace

UpstreamPool::UpstreamPool(std::vector<std::string> addresses,
                           std::chrono::milliseconds health_interval, const std::string& tls_ca_pem)
    : impl_(std::make_shared<Impl>()) {
  impl_->interval = health_interval;
  grpc::ChannelArguments& args = impl_->channel_args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Keepalive pings: a coordinator host that vanishes (no FIN, no RST) fails its calls in
  // about 15 s instead of at the request deadline. The coordinator permits these pings.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  impl_->credentials = grpc::InsecureChannelCredentials();
  if (!tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = tls_ca_pem;
    impl_->credentials = grpc::SslCredentials(tls);
  }
  for (std::string& address : addresses)
    impl_->upstreams.push_back(impl_->Make(std::move(address)));
}

UpstreamPool::~UpstreamPool() {
  Stop();
}

void UpstreamPool::Start(std::chrono::milliseconds first_check_timeout) {
  // The first round runs on the checker thread; wait for it (bounded) so that a router that
  // starts next to a running coordinator is healthy at once.
  auto first_done = std::make_shared<std::atomic<bool>>(false);
  impl_->checker = std::thread([impl = impl_, first_done] {
    impl->CheckAll();
    {
      std::lock_guard<std::mutex> lock(impl->idle_mu);
      first_done->store(true);
    }
    impl->idle_cv.notify_all();
    std::unique_lock<std::mutex> lock(impl->mu);
    while (!impl->stopping) {
      impl->cv.wait_for(lock, impl->interval);
      if (impl->stopping) break;
      lock.unlock();
      impl->CheckAll();
      lock.lock();
    }
  });
  std::unique_lock<std::mutex> lock(impl_->idle_mu);
  impl_->idle_cv.wait_for(lock, first_check_timeout, [&] { return first_done->load(); });
}

void UpstreamPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->checker.joinable()) impl_->checker.join();
}

bool UpstreamPool::AnyHealthy() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& u : impl_->upstreams) {
    if (u->healthy) return true;
  }
  return false;
}

StatusOr<ModelLimits> UpstreamPool::Limits() const {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& u : impl_->upstreams) {
      if (u->healthy) return u->limits;
    }
  }
  return Unavailable(impl_->NoneHealthy());
}

std::vector<UpstreamState> UpstreamPool::Snapshot() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<UpstreamState> out;
  for (const auto& u : impl_->upstreams) {
    out.push_back({u->address, u->healthy, u->outstanding.load(), u->limits, u->last_error});
  }
  return out;
}

std::vector<UpstreamStats> UpstreamPool::FetchStats(std::chrono::milliseconds timeout) const {
  const std::vector<std::shared_ptr<Upstream>> upstreams = impl_->List();
  const size_t n = upstreams.size();
  std::vector<UpstreamStats> out(n);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(n);
  std::vector<grpc::Status> statuses(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  const v1::StatsRequest request;
  for (size_t i = 0; i < n; ++i) {
    Upstream& u = *upstreams[i];
    out[i].address = u.address;
    contexts[i] = std::make_unique<grpc::ClientContext>();
    contexts[i]->set_deadline(std::chrono::system_clock::now() + timeout);
    u.admin->async()->Stats(contexts[i].get(), &request, &out[i].stats, [&, i](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      statuses[i] = std::move(s);
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == n; });  // each call ends by its deadline
  for (size_t i = 0; i < n; ++i) out[i].ok = statuses[i].ok();
  return out;
}

StatusOr<std::shared_ptr<GenerateStream>> UpstreamPool::StartGenerate(
    const v1::GenerateRequest& request, std::chrono::seconds timeout, GenerateCallbacks callbacks) {
  // Every attempt of the request (retries included) routes by the same key.
  const uint64_t key = PrefixAffinityKey(
      std::span<const int32_t>(request.prompt_token_ids().data(),
                               static_cast<size_t>(request.prompt_token_ids().size())),
      impl_->policy.prefix_tokens);
  std::shared_ptr<Upstream> first = impl_->Pick({}, key);
  if (!first) return Unavailable(impl_->NoneHealthy());
  auto handle =
      std::make_shared<PooledGenerate>(impl_, request, key, timeout, std::move(callbacks));
  handle->Attempt(std::move(first));
  return std::shared_ptr<GenerateStream>(handle);
}

Status UpstreamPool::Add(const std::string& address) {
  if (address.empty() || address.size() > kMaxUpstreamAddressBytes) {
    return InvalidArgument("an upstream address is host:port, at most " +
                           std::to_string(kMaxUpstreamAddressBytes) + " characters");
  }
  for (const char c : address) {
    if (c <= ' ' || c >= 0x7f) {
      return InvalidArgument("upstream address '" + address +
                             "' has a space or a non-printable character");
    }
  }
  std::shared_ptr<Upstream> u;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& existing : impl_->upstreams) {
      if (existing->address == address) {
        return FailedPrecondition("upstream " + address + " is already in the pool");
      }
    }
    if (impl_->upstreams.size() >= kMaxUpstreams) {
      return ResourceExhausted("the pool already has " + std::to_string(kMaxUpstreams) +
                               " upstreams");
    }
    u = impl_->Make(address);
    impl_->upstreams.push_back(u);
  }
  impl_->CheckOne(*u);  // usable at once when it answers (bounded: 1 s)
  bool healthy;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    healthy = u->healthy;
  }
  LogEvent(LogLevel::kInfo, "upstream added", {{"upstream", address}, {"healthy", healthy}});
  return Status::Ok();
}

Status UpstreamPool::Remove(const std::string& address) {
  std::shared_ptr<Upstream> removed;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = std::find_if(impl_->upstreams.begin(), impl_->upstreams.end(),
                           [&](const auto& u) { return u->address == address; });
    if (it == impl_->upstreams.end()) {
      return NotFound("upstream " + address + " is not in the pool");
    }
    removed = *it;
    impl_->upstreams.erase(it);
  }
  LogEvent(LogLevel::kInfo, "upstream removed",
           {{"upstream", address}, {"requests_in_flight", removed->outstanding.load()}});
  return Status::Ok();
}

void UpstreamPool::SetRouting(const RoutingPolicy& policy) {
  impl_->policy = policy;
}

int UpstreamPool::Outstanding() const {
  return impl_->outstanding.load();
}

bool UpstreamPool::WaitIdle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->idle_mu);
  return impl_->idle_cv.wait_for(lock, timeout, [&] { return impl_->outstanding.load() == 0; });
}

}  // namespace llm::router
