// Run-time upstreams and retry on a refusing coordinator (issue 11): GET/POST/DELETE /upstreams
// change where a running router sends requests (admin token or a client on the router's host),
// and a request that a draining coordinator refuses before any token is retried on another
// one, so a rolling restart of one worker job loses no request.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

const json kCompletion = {
    {"model", "stories260K"}, {"prompt", "Once upon a time"}, {"max_tokens", 3}};

// A second coordinator on its own port, serving the same model.
struct SecondWorker {
  int port = FreePort();
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<v1::Admin::Stub> admin;

  SecondWorker() {
    process = std::make_unique<ChildProcess>(
        std::vector<std::string>{LLM_WORKER_BIN, "--model.path", SharedPath(Cluster::kModel),
                                 "--coordinator.host", "127.0.0.1", "--coordinator.port",
                                 std::to_string(port), "--engine.threads_per_rank", "1",
                                 "--engine.kv_cache_mib", "8"},
        "e2e_worker_b");
    admin = v1::Admin::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  bool Serving() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    v1::HealthResponse r;
    return admin->Health(&ctx, v1::HealthRequest(), &r).ok() && r.serving();
  }
  int64_t RequestsTotal() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StatsResponse s;
    return admin->Stats(&ctx, v1::StatsRequest(), &s).ok() ? s.requests_total() : -1;
  }
};

std::vector<std::string> Addresses(const HttpResult& r) {
  std::vector<std::string> out;
  const json body = r.Json();
  for (const json& u : body["data"]) out.push_back(u["address"]);
  return out;
}

TEST(Upstreams, AddRemoveAtRunTimeAndRetryPastADrainingCoordinator) {
  LLM_E2E_REQUIRE_SHARED();
  // Health checks every minute: the router learns of the drain only through the refusal.
  Cluster cluster(
      {}, {"--router.health_check_interval_ms", "60000", "--router.routing", "least_loaded"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  SecondWorker b;
  ASSERT_TRUE(WaitFor([&] { return b.Serving() || b.process->Exited(); }, 60.0) && b.Serving())
      << b.process->Log();
  const int port = cluster.port();

  HttpResult list = Http(port, "GET", "/upstreams");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(Addresses(list), std::vector<std::string>{cluster.upstream()});
  EXPECT_EQ(list.Json()["data"][0]["healthy"], true);
  EXPECT_EQ(list.Json()["data"][0]["model"], "stories260K");

  // Add the second coordinator: checked at once, healthy.
  const HttpResult added = Http(port, "POST", "/upstreams", json{{"address", b.address()}}.dump());
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.Json()["healthy"], true) << added.body;
  EXPECT_EQ(Addresses(Http(port, "GET", "/upstreams")),
            (std::vector<std::string>{cluster.upstream(), b.address()}));
  // Bad input: a clear error, nothing changes.
  EXPECT_EQ(Http(port, "POST", "/upstreams", json{{"address", b.address()}}.dump()).status, 409);
  EXPECT_EQ(Http(port, "POST", "/upstreams", json{{"address", "a b:1"}}.dump()).status, 400);
  EXPECT_EQ(
      Http(port, "POST", "/upstreams", json{{"address", std::string(300, 'x')}}.dump()).status,
      400);
  EXPECT_EQ(Http(port, "POST", "/upstreams", "{\"addr\": 1}").status, 400);
  EXPECT_EQ(Http(port, "PUT", "/upstreams", "{}").status, 405);

  // Drain the first coordinator; the router still thinks it healthy (no check for a minute)
  // and sends there first (both idle: the first in the list). Each refusal is retried on b.
  ASSERT_TRUE(cluster.Drain(true));
  const int64_t b_before = b.RequestsTotal();
  for (int i = 0; i < 4; ++i) {
    const HttpResult r = Post(port, "/v1/completions", kCompletion);
    EXPECT_EQ(r.status, 200) << r.body << cluster.Logs();
  }
  EXPECT_EQ(b.RequestsTotal() - b_before, 4);
  EXPECT_NE(cluster.worker().Log().find("request refused"), std::string::npos) << cluster.Logs();
  EXPECT_NE(cluster.router().Log().find("retrying on another"), std::string::npos)
      << cluster.Logs();
  EXPECT_EQ(Http(port, "GET", "/upstreams").Json()["data"][0]["healthy"], false);

  // Remove the drained one; requests keep working on b.
  const HttpResult removed =
      Http(port, "DELETE", "/upstreams", json{{"address", cluster.upstream()}}.dump());
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(Addresses(Http(port, "GET", "/upstreams")), std::vector<std::string>{b.address()});
  EXPECT_EQ(Http(port, "DELETE", "/upstreams", json{{"address", cluster.upstream()}}.dump()).status,
            404);
  ASSERT_TRUE(cluster.Drain(false));
  EXPECT_EQ(Post(port, "/v1/completions", kCompletion).status, 200);
  EXPECT_NE(cluster.router().Log().find("upstream removed"), std::string::npos);

  // Every upstream draining: the refusal reaches the client as 503 (no endless retry).
  grpc::ClientContext ctx;
  v1::DrainResponse drained;
  ASSERT_TRUE(b.admin->Drain(&ctx, v1::DrainRequest(), &drained).ok());
  EXPECT_EQ(Post(port, "/v1/completions", kCompletion).status, 503);
}

TEST(Upstreams, AdminTokenGuardsTheRoutes) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster({}, {"--router.admin_token", "adm-secret", "--router.api_keys", "sk-user"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const int port = cluster.port();
  EXPECT_EQ(Http(port, "GET", "/upstreams").status, 401);
  EXPECT_EQ(Http(port, "GET", "/upstreams", "", 10.0, {{"Authorization", "Bearer sk-user"}}).status,
            401);  // an API key is not the admin token
  const HttpResult ok =
      Http(port, "GET", "/upstreams", "", 10.0, {{"Authorization", "Bearer adm-secret"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Addresses(ok), std::vector<std::string>{cluster.upstream()});
  // The admin token is not an API key either.
  EXPECT_EQ(
      Http(port, "GET", "/v1/models", "", 10.0, {{"Authorization", "Bearer adm-secret"}}).status,
      401);
}

// Prefix affinity (the default routing): concurrent requests that share their first 64 tokens
// all go to one coordinator, whose prefix cache then serves the shared part; least_loaded
// spreads the same requests over both; round_robin takes them in turn.
TEST(Upstreams, PrefixAffinityKeepsASharedPrefixOnOneCoordinator) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  SecondWorker b;
  ASSERT_TRUE(WaitFor([&] { return b.Serving() || b.process->Exited(); }, 60.0) && b.Serving())
      << b.process->Log();
  const int affinity = cluster.AddRouter({}, cluster.upstream() + "," + b.address());
  const int spread = cluster.AddRouter({"--router.routing", "least_loaded"},
                                       cluster.upstream() + "," + b.address());
  ASSERT_NE(affinity, 0) << cluster.Logs();
  ASSERT_NE(spread, 0) << cluster.Logs();
  ASSERT_TRUE(WaitFor(
      [&] {
        const json j = Http(affinity, "GET", "/upstreams").Json();
        return j["data"].size() == 2 && j["data"][0]["healthy"] == true &&
               j["data"][1]["healthy"] == true;
      },
      10.0));

  auto requests_on = [&] {
    return std::make_pair(cluster.Stats().requests_total(), b.RequestsTotal());
  };
  // 8 requests at once: a shared 80-token start (BOS + 79 tokens), then 3 tokens of their own.
  auto burst = [&](int port, int salt) {
    std::vector<std::thread> clients;
    std::vector<int> status(8, 0);
    for (int i = 0; i < 8; ++i) {
      clients.emplace_back([&, i] {
        std::vector<int> prompt = {1};
        for (int t = 0; t < 79; ++t) prompt.push_back(300 + (t * 7 + salt) % 200);
        for (int t = 0; t < 3; ++t) prompt.push_back(10 + i * 3 + t);
        status[i] = Post(port, "/v1/completions",
                         {{"prompt", prompt}, {"max_tokens", 24}, {"ignore_eos", true}})
                        .status;
      });
    }
    for (auto& c : clients) c.join();
    for (int s : status) EXPECT_EQ(s, 200);
  };

  const auto before = requests_on();
  burst(affinity, 0);
  const auto after = requests_on();
  const int64_t on_a = after.first - before.first, on_b = after.second - before.second;
  EXPECT_EQ(on_a + on_b, 8);
  EXPECT_TRUE(on_a == 8 || on_b == 8) << on_a << " / " << on_b;

  // The same burst through the least-loaded router lands on both.
  burst(spread, 1);
  const auto spread_after = requests_on();
  EXPECT_GT(spread_after.first - after.first, 0);
  EXPECT_GT(spread_after.second - after.second, 0);

  // round_robin: one after the other, each in turn, whatever the prompt.
  const int turns = cluster.AddRouter({"--router.routing", "round_robin"},
                                      cluster.upstream() + "," + b.address());
  ASSERT_NE(turns, 0) << cluster.Logs();
  ASSERT_TRUE(WaitFor(
      [&] {
        const json j = Http(turns, "GET", "/upstreams").Json();
        return j["data"].size() == 2 && j["data"][0]["healthy"] == true &&
               j["data"][1]["healthy"] == true;
      },
      10.0));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(Post(turns, "/v1/completions", {{"prompt", {1, 300, 301}}, {"max_tokens", 2}}).status,
              200);
  }
  const auto turns_after = requests_on();
  EXPECT_EQ(turns_after.first - spread_after.first, 3);
  EXPECT_EQ(turns_after.second - spread_after.second, 3);
}

}  // namespace
}  // namespace llm::e2e
