// The standard gRPC health protocol (grpc.health.v1.Health) on the coordinator's port, as
// Kubernetes gRPC probes ask it, through the real `worker`: "" and llm.v1.Generation are
// SERVING once the model is loaded, NOT_SERVING while draining and from SIGTERM on, SERVING
// again after Resume; Watch streams the changes; an unknown service is NOT_FOUND.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "proto/grpc_health.grpc.pb.h"
#include "proto/grpc_health.pb.h"
#include "tests/coordinator/coordinator_client.h"

namespace llm::testing {
namespace {

namespace health = ::grpc::health::v1;
using Status = health::HealthCheckResponse;

// Check(service): the status, or the gRPC error code as a negative number.
int Check(health::Health::Stub& stub, const std::string& service) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(5));
  health::HealthCheckRequest req;
  req.set_service(service);
  health::HealthCheckResponse r;
  const grpc::Status s = stub.Check(&ctx, req, &r);
  return s.ok() ? static_cast<int>(r.status()) : -static_cast<int>(s.error_code());
}

void Admin(WorkerProcess& w, bool drain) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(5));
  if (drain) {
    pb::DrainResponse r;
    ASSERT_TRUE(w.admin().Drain(&ctx, pb::DrainRequest(), &r).ok());
  } else {
    pb::ResumeResponse r;
    ASSERT_TRUE(w.admin().Resume(&ctx, pb::ResumeRequest(), &r).ok());
  }
}

TEST(CoordinatorHealthService, ServingDrainResumeShutdownAndUnknownService) {
  WorkerProcess w(DemoFlags({"--coordinator.shutdown_grace_s", "60"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(w.port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = health::Health::NewStub(channel);
  EXPECT_EQ(Check(*stub, ""), Status::SERVING);
  EXPECT_EQ(Check(*stub, "llm.v1.Generation"), Status::SERVING);
  EXPECT_EQ(Check(*stub, "no.such.Service"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));

  // Watch: the status now, then each change.
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(In(60));
  health::HealthCheckRequest watch_req;
  watch_req.set_service("llm.v1.Generation");
  auto watch = stub->Watch(&watch_ctx, watch_req);
  health::HealthCheckResponse seen;
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), Status::SERVING);

  Admin(w, true);
  EXPECT_EQ(Check(*stub, ""), Status::NOT_SERVING);
  EXPECT_EQ(Check(*stub, "llm.v1.Generation"), Status::NOT_SERVING);
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), Status::NOT_SERVING);

  Admin(w, false);
  EXPECT_EQ(Check(*stub, ""), Status::SERVING);
  EXPECT_EQ(Check(*stub, "llm.v1.Generation"), Status::SERVING);
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), Status::SERVING);

  // An unknown service on Watch: SERVICE_UNKNOWN (the stream stays open).
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10));
    health::HealthCheckRequest req;
    req.set_service("no.such.Service");
    auto unknown = stub->Watch(&ctx, req);
    health::HealthCheckResponse r;
    ASSERT_TRUE(unknown->Read(&r));
    EXPECT_EQ(r.status(), Status::SERVICE_UNKNOWN);
    ctx.TryCancel();
    unknown->Finish();
  }

  // SIGTERM with a request running: NOT_SERVING during the grace period.
  grpc::ClientContext gen_ctx;
  gen_ctx.set_deadline(In(120));
  auto reader = w.generation().Generate(&gen_ctx, MakeRequest({1, 403, 407}, 300));
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  w.Signal(SIGTERM);
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), Status::NOT_SERVING);
  EXPECT_EQ(Check(*stub, ""), Status::NOT_SERVING);
  while (reader->Read(&msg)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  watch_ctx.TryCancel();
  while (watch->Read(&seen)) {
  }
  watch->Finish();
  ASSERT_TRUE(w.WaitExit(15.0)) << w.Log();
}

}  // namespace
}  // namespace llm::testing
