// `mpirun -np 1/2/4 worker` (tensor parallel, oversubscribed on small machines; 2 ranks with a
// float16 KV cache) behind a real router: the stories260K golden prompts give the golden greedy
// text through HTTP.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

#include "proto/grpc_health.grpc.pb.h"
#include "tests/integration/proc_stats.h"
#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

class MpiHttp : public ::testing::TestWithParam<int> {};

TEST_P(MpiHttp, GoldenGreedyThroughHttp) {
  LLM_E2E_REQUIRE_SHARED();
  std::ifstream golden(SharedPath("golden/stories260K_greedy.jsonl"));
  if (!golden) GTEST_SKIP() << "missing " << SharedPath("golden/stories260K_greedy.jsonl");
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on the PATH (Debian package openmpi-bin)";
  const int np = GetParam();
  // 2 ranks keep their KV cache in float16 (engine.kv_cache_dtype; each rank allocates its own
  // share of the KV heads in halves): the golden text holds for it as well.
  std::vector<std::string> flags = {"--engine.tensor_parallel_size", std::to_string(np)};
  if (np == 2) flags.insert(flags.end(), {"--engine.kv_cache_dtype", "float16"});
  Cluster cluster(flags, {},
                  {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np)});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  int cases = 0;
  for (std::string line; std::getline(golden, line);) {
    const json g = json::parse(line);
    const json body = GoldenRequest(g);
    const HttpResult r = Post(cluster.port(), "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json()["choices"][0]["text"], g["greedy_text"])
        << "np=" << np << " " << g["prompt"];
    EXPECT_EQ(r.Json()["usage"]["completion_tokens"], g["greedy_token_ids"].size());
    ++cases;
  }
  EXPECT_GT(cases, 0);
  const v1::StatsResponse stats = cluster.Stats();
  EXPECT_EQ(stats.world_size(), np);
  // One entry per rank, each with its host and answering (every step's collectives complete).
  ASSERT_EQ(stats.ranks_size(), np);
  for (int r = 0; r < np; ++r) {
    EXPECT_EQ(stats.ranks(r).rank(), r);
    EXPECT_FALSE(stats.ranks(r).host().empty()) << "rank " << r;
    EXPECT_EQ(stats.ranks(r).status(), "ok") << "rank " << r;
    EXPECT_TRUE(stats.ranks(r).has_last_seen_s()) << "rank " << r;
    EXPECT_LT(stats.ranks(r).last_seen_s(), 60) << "rank " << r;
  }
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0)) << "KV blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpiHttp, ::testing::Values(1, 2, 4));

// A 1-rank job computes on every core of the host when launched as tools/serve.sh launches it
// (--bind-to none); with mpirun's default binding it gets one core and says so in the log.
TEST(MpiThreads, OneRankUsesEveryCoreAndBindingIsReported) {
  LLM_E2E_REQUIRE_SHARED();
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on the PATH (Debian package openmpi-bin)";
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  {
    Cluster cluster(
        {"--engine.threads_per_rank", "0"}, {},
        {mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "1"});
    ASSERT_TRUE(cluster.ok()) << cluster.Logs();
    EXPECT_NE(cluster.worker().Log().find("compute threads: " + std::to_string(cores)),
              std::string::npos)
        << cluster.worker().Log();
  }
  if (cores < 2) return;  // binding to one core changes nothing on a 1-core host
  Cluster bound({"--engine.threads_per_rank", "0"}, {},
                {mpirun, "--allow-run-as-root", "--bind-to", "core", "-np", "1"});
  ASSERT_TRUE(bound.ok()) << bound.Logs();
  const std::string log = bound.worker().Log();
  EXPECT_NE(log.find("compute threads: 1"), std::string::npos) << log;
  EXPECT_NE(log.find("--bind-to none"), std::string::npos) << "no warning about the binding\n"
                                                           << log;
}

// A follower stopped with SIGSTOP mid-request: rank 0 must not spin a core waiting for it, the
// router must report 503 within seconds and end the open request with an error event, and the
// job must end (engine.rank_timeout_s) with a log line saying why.
TEST(MpiFailure, StoppedFollowerIsReportedAndEndsTheJob) {
  LLM_E2E_REQUIRE_SHARED();
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on the PATH (Debian package openmpi-bin)";
  Cluster cluster({"--engine.tensor_parallel_size", "2", "--engine.heartbeat_timeout_s", "2",
                   "--engine.rank_timeout_s", "12"},
                  {}, {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  std::map<int, pid_t> ranks;
  ASSERT_TRUE(WaitFor(
      [&] {
        ranks = RankPids(cluster.worker().pid());
        return ranks.size() == 2;
      },
      10.0))
      << "could not find the two ranks of mpirun " << cluster.worker().pid();
  // The follower stops; the next request's first collective waits for it.
  ASSERT_EQ(kill(ranks[1], SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  StreamResult stream;
  std::thread client([&] {
    stream = PostStream(cluster.port(), "/v1/completions",
                        {{"model", "stories260K"},
                         {"prompt", "Once upon a time"},
                         {"max_tokens", 64},
                         {"stream", true}});
  });
  EXPECT_TRUE(
      WaitFor([&] { return Http(cluster.port(), "GET", "/health", "", 2.0).status == 503; }, 10.0))
      << "the router still reports healthy 10 s after a rank stopped\n"
      << cluster.Logs();
  const double to_503 =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  EXPECT_LT(to_503, 10.0);
  // Stats marks the followers not answering (rank 0 cannot tell which one is stuck), and the
  // gRPC health service (Kubernetes probes) says NOT_SERVING.
  const v1::StatsResponse stalled = cluster.Stats();
  ASSERT_EQ(stalled.ranks_size(), 2);
  EXPECT_EQ(stalled.ranks(0).status(), "ok");
  EXPECT_EQ(stalled.ranks(1).status(), "not answering");
  EXPECT_GE(stalled.ranks(1).last_seen_s(), 2.0);
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(cluster.upstream(), grpc::InsecureChannelCredentials()));
  const auto grpc_health = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckResponse r;
    return health->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &r).ok() ? r.status() : -1;
  };
  EXPECT_TRUE(WaitFor(
      [&] { return grpc_health() == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }, 5.0));
  // Rank 0 waits for the stopped rank without spinning a core.
  const double before = CpuSecondsOf(ranks[0]);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double used = CpuSecondsOf(ranks[0]) - before;
  EXPECT_LT(used, 0.5) << "rank 0 used " << used
                       << " CPU seconds in 2 s waiting for a stopped rank";
  client.join();
  const double to_error =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  std::printf(
      "stopped follower: /health 503 after %.1f s, rank 0 used %.2f CPU s in 2 s, the "
      "open request failed after %.1f s\n",
      to_503, used, to_error);
  // The stream's headers and first chunk went out when the call started (before any token),
  // so the failure is a last error event followed by [DONE], never a bare status.
  EXPECT_EQ(stream.http.status, 200) << stream.http.error << stream.http.body;
  EXPECT_TRUE(stream.done) << stream.http.error;
  EXPECT_TRUE(!stream.events.empty() && stream.events.back().contains("error")) << stream.http.body;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count(),
            12.0)
      << "the open request was not failed before the job's own timeout";
  // The job ends by itself, saying why.
  EXPECT_TRUE(cluster.worker().WaitExit(30.0)) << "the job did not end\n" << cluster.Logs();
  EXPECT_NE(cluster.worker().Log().find("engine.rank_timeout_s"), std::string::npos)
      << cluster.worker().Log();
  kill(ranks[1], SIGCONT);
}

}  // namespace
}  // namespace llm::e2e
