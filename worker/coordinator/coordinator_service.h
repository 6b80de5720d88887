// The coordinator's gRPC edge (proto/llm.proto): the Generation service (server-streaming
// Generate, gRPC callback API, one outstanding write per stream, client cancellation becomes
// EngineLoop::Cancel) and the Admin service (health, drain, resume, stats). gRPC types stay in
// the .cc; this header is plain C++.
//
// llm::Status becomes a gRPC status in exactly one place (ToGrpcStatus in the .cc).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker/coordinator/engine_loop.h"
#include "worker/model/communicator.h"

namespace llm {

// What Health and Stats report; fixed at start-up.
struct CoordinatorInfo {
  std::string served_model_name;
  int max_model_len = 0;
  int vocab_size = 0;
  int world_size = 1;          // ranks of this engine
  int data_parallel_rank = 0;  // this engine's group in the mpirun job (engine.data_parallel_size)
  int data_parallel_size = 1;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();  // uptime
};

// How Health tells a cluster whose ranks stopped answering: `comm` (may be nullptr: one rank)
// is asked how long its pending collective has waited; past heartbeat_timeout_s the
// coordinator reports not serving and refuses new requests.
// The same state is served as the standard gRPC health protocol (grpc.health.v1.Health, for
// Kubernetes gRPC probes): services "" and "llm.v1.Generation" are SERVING, and NOT_SERVING
// while draining, shutting down or while a rank does not answer (checked every second).
// Drain and Resume need `authorization: Bearer <admin_token>` metadata; without a token they
// are accepted from loopback peers only.
struct CoordinatorHealth {
  const Communicator* comm = nullptr;
  double heartbeat_timeout_s = 5;
  std::string admin_token;
  // PEM contents; both set: the port accepts TLS only.
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

class CoordinatorServer {
 public:
  // Binds host:port and serves on gRPC's own threads; requests go to `loop`, which must
  // outlive the server (as must health.comm). Unavailable when the address cannot be bound.
  static StatusOr<std::unique_ptr<CoordinatorServer>> Start(const std::string& host, int port,
                                                            const CoordinatorInfo& info,
                                                            EngineLoop* loop,
                                                            CoordinatorHealth health = {});

  // From now on Generate is refused (UNAVAILABLE, "shutting down") and Health (and the gRPC
  // health service) reports not serving; running requests go on. Any thread.
  void BeginShutdown();
  ~CoordinatorServer();  // Shutdown()
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Stops accepting calls and cancels the ones still open after a short grace period. Call
  // after EngineLoop::Run() returned (then every live stream has been finished). Idempotent.
  void Shutdown();

  struct Impl;

 private:
  explicit CoordinatorServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llm
