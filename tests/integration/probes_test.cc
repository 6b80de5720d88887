// Probes: /livez (the router process serves) stays 200 while no coordinator can generate;
// /readyz and /health (readiness) say 503 then, and 200 with a healthy coordinator. The probes
// need no API key unless router.health_requires_key.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

TEST(Probes, LivenessIsNotReadiness) {
  if (!std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing ../shared/" << Cluster::kModel;
  }
  Cluster cluster({}, {"--router.api_keys", "sk-probe"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  for (const char* path : {"/livez", "/readyz", "/health"}) {
    EXPECT_EQ(Http(cluster.port(), "GET", path, "", 5.0).status, 200) << path;
  }
  EXPECT_EQ(Http(cluster.port(), "GET", "/v1/models", "", 5.0).status, 401);  // keys still apply

  // A router whose only upstream does not exist: alive, not ready.
  const int lonely = cluster.AddRouter({}, "127.0.0.1:" + std::to_string(FreePort()));
  ASSERT_NE(lonely, 0) << cluster.Logs();
  EXPECT_EQ(Http(lonely, "GET", "/livez", "", 5.0).status, 200);
  EXPECT_EQ(Http(lonely, "GET", "/readyz", "", 5.0).status, 503);
  EXPECT_EQ(Http(lonely, "GET", "/health", "", 5.0).status, 503);
  EXPECT_EQ(Http(lonely, "POST", "/livez", "", 5.0).status, 405);
}

}  // namespace
}  // namespace llm::e2e
