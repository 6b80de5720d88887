#include "router/upstream_pool.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "proto/llm.grpc.pb.h"
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
  std::vector<std::unique_ptr<Upstream>> upstreams;
  std::chrono::milliseconds interval{1000};
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
  void CheckAll() {
    for (auto& u : upstreams) CheckOne(*u);
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
    std::fprintf(stderr, "router: coordinator %s: %s; failing its %zu open request(s)\n",
                 u.address.c_str(), resp.detail().c_str(), u.calls.size());
    *why = "coordinator " + u.address + " is not healthy: " + resp.detail();
    for (auto& [raw, weak] : u.calls) {
      if (auto call = weak.lock()) to_fail->push_back(std::move(call));
    }
  }
}

namespace {

// One Generate call (gRPC callback API). A hold keeps the call open between reads that the
// owner requests from other threads; it is released exactly once, when the stream ended or the
// owner cancelled with no read outstanding. OnDone then reports and drops the self-reference.
class GenerateCall final : public GenerateStream,
                           public FailableCall,
                           public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateCall(std::shared_ptr<UpstreamPool::Impl> pool, Upstream& upstream,
               GenerateCallbacks callbacks)
      : pool_(std::move(pool)), upstream_(upstream), callbacks_(std::move(callbacks)) {}

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
    ctx_.TryCancel();
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      release = !reading_;
    }
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failure_ && !s.ok()) error = *failure_;
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      pool_->MarkUnhealthy(upstream_, s.error_message());
    }
    callbacks_.on_done(std::move(error));
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
  Upstream& upstream_;
  GenerateCallbacks callbacks_;
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

}  // namespace

UpstreamPool::UpstreamPool(std::vector<std::string> addresses,
                           std::chrono::milliseconds health_interval, const std::string& tls_ca_pem)
    : impl_(std::make_shared<Impl>()) {
  impl_->interval = health_interval;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Keepalive pings: a coordinator host that vanishes (no FIN, no RST) fails its calls in
  // about 15 s instead of at the request deadline. The coordinator permits these pings.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = tls_ca_pem;
    credentials = grpc::SslCredentials(tls);
  }
  for (std::string& address : addresses) {
    auto u = std::make_unique<Upstream>();
    u->address = std::move(address);
    u->channel = grpc::CreateCustomChannel(u->address, credentials, args);
    u->generation = v1::Generation::NewStub(u->channel);
    u->admin = v1::Admin::NewStub(u->channel);
    impl_->upstreams.push_back(std::move(u));
  }
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
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& u : impl_->upstreams) {
    if (u->healthy) return u->limits;
  }
  return Unavailable("no coordinator is available (none of " +
                     std::to_string(impl_->upstreams.size()) + " upstreams is healthy)");
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
  const size_t n = impl_->upstreams.size();
  std::vector<UpstreamStats> out(n);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(n);
  std::vector<grpc::Status> statuses(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  const v1::StatsRequest request;
  for (size_t i = 0; i < n; ++i) {
    Upstream& u = *impl_->upstreams[i];
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
  Upstream* best = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& u : impl_->upstreams) {
      if (u->healthy && (!best || u->outstanding.load() < best->outstanding.load())) {
        best = u.get();
      }
    }
    if (!best) {
      return Unavailable("no coordinator is available (none of " +
                         std::to_string(impl_->upstreams.size()) + " upstreams is healthy)");
    }
    best->outstanding.fetch_add(1);
    impl_->outstanding.fetch_add(1);
  }
  auto call = std::make_shared<GenerateCall>(impl_, *best, std::move(callbacks));
  call->Start(call, request, timeout);
  return std::shared_ptr<GenerateStream>(call);
}

int UpstreamPool::Outstanding() const {
  return impl_->outstanding.load();
}

bool UpstreamPool::WaitIdle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->idle_mu);
  return impl_->idle_cv.wait_for(lock, timeout, [&] { return impl_->outstanding.load() == 0; });
}

}  // namespace llm::router
