// The coordinators this router forwards to (router.upstreams). A background thread asks each
// one for Admin.Health every interval; requests go to the healthy upstream with the fewest
// outstanding Generate calls. gRPC stays inside upstream_pool.cc: callers see proto messages,
// Status and the GenerateStream handle.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/llm.pb.h"
#include "router/api_error.h"
#include "router/metrics.h"
#include "router/prefix_affinity.h"

namespace llm::router {

// What a healthy upstream reports about its model.
struct ModelLimits {
  std::string model;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
};

struct UpstreamState {
  std::string address;
  bool healthy = false;  // reachable and serving (not draining)
  int outstanding = 0;
  ModelLimits limits;
  std::string last_error;
};

// Callbacks of one Generate call. Both run on gRPC threads and must not block (post the work
// elsewhere). on_message runs once per response; on_done runs exactly once, last, with nothing
// when the stream ended normally, else the error the client gets (router/upstream_errors.h;
// a call the owner cancelled ends with an error the owner ignores).
struct GenerateCallbacks {
  std::function<void(v1::GenerateResponse)> on_message;
  std::function<void(std::optional<ApiError>)> on_done;
};

// One Generate stream. After each on_message, the owner calls ReadNext() for the next message
// or Cancel() to end the call (both thread-safe). The call ends (on_done) once the stream is
// over or cancelled; the handle may outlive it.
class GenerateStream {
 public:
  virtual ~GenerateStream() = default;
  virtual void ReadNext() = 0;
  // Aborts the request upstream (the coordinator frees its blocks); on_done then reports
  // CANCELLED unless the call already finished.
  virtual void Cancel() = 0;
};

class UpstreamPool {
 public:
  // `tls_ca_pem` non-empty: the coordinators speak TLS (coordinator.tls_cert_file) and are
  // trusted when their certificate chains to these PEM roots.
  UpstreamPool(std::vector<std::string> addresses, std::chrono::milliseconds health_interval,
               const std::string& tls_ca_pem = "");
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Checks every upstream once (bounded by `first_check_timeout`), then keeps checking in a
  // background thread until Stop().
  void Start(std::chrono::milliseconds first_check_timeout);
  void Stop();

  bool AnyHealthy() const;
  // The limits of a healthy upstream; kUnavailable when none is healthy.
  StatusOr<ModelLimits> Limits() const;
  std::vector<UpstreamState> Snapshot() const;
  // Admin.Stats of every upstream, asked in parallel, each within `timeout` (for /metrics).
  std::vector<UpstreamStats> FetchStats(std::chrono::milliseconds timeout) const;

  // How requests are spread (router.routing); call before Start.
  void SetRouting(const RoutingPolicy& policy);

  // Starts a Generate call on a healthy upstream: by default the one its prompt's first tokens
  // hash to (prefix affinity, router/prefix_affinity.h) unless that one is much busier than the
  // least-loaded one, which then takes it. kUnavailable when none is
  // healthy. A gRPC error reaches on_done mapped by UpstreamApiError; UNAVAILABLE also marks
  // the upstream unhealthy until its next check. An upstream that refuses the call before
  // sending anything (UNAVAILABLE: draining, shutting down, unreachable) is replaced by the
  // next healthy one not tried yet, so a rolling restart loses no request.
  StatusOr<std::shared_ptr<GenerateStream>> StartGenerate(const v1::GenerateRequest& request,
                                                          std::chrono::seconds timeout,
                                                          GenerateCallbacks callbacks);

  // Run-time changes (llm-admin upstreams, POST/DELETE /upstreams): Add checks the new one at
  // once (bounded) and routes to it when healthy; Remove stops routing to it, and its calls in
  // flight finish there. InvalidArgument (empty, too long, spaces), FailedPrecondition (already
  // there), NotFound, ResourceExhausted (more than kMaxUpstreams).
  static constexpr size_t kMaxUpstreams = 1024;
  static constexpr size_t kMaxUpstreamAddressBytes = 256;
  Status Add(const std::string& address);
  Status Remove(const std::string& address);

  // Generate calls started and not yet done (all upstreams).
  int Outstanding() const;
  // Waits until Outstanding() is 0 or `timeout` passes; returns whether it reached 0.
  bool WaitIdle(std::chrono::milliseconds timeout) const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace llm::router
