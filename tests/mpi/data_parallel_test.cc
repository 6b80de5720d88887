// Data and pipeline parallelism under real mpirun (oversubscribed on small machines): one
// `worker` job of engine.data_parallel_size × engine.pipeline_parallel_size ×
// engine.tensor_parallel_size ranks holds dp independent engines, group g's coordinator on
// coordinator.port + g. Every coordinator gives the golden greedy ids of ../shared/golden
// (DP2, DP2×TP2, DP4, PP2×TP2); a 16-rank DP2×PP2×TP4 job serves the golden text through the
// router; a router whose upstreams default to the
// job's coordinators spreads requests over both of a DP2 job; one group stopping (SIGTERM to
// its coordinator) leaves the other serving, its own ranks asleep, and the job still ends
// cleanly; a job size that is not the product fails at start-up naming the keys.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/integration/proc_stats.h"
#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

#define LLM_DP_REQUIRE()                                                                        \
  LLM_E2E_REQUIRE_SHARED();                                                                     \
  if (!std::filesystem::exists(SharedPath(kGolden)))                                            \
    GTEST_SKIP() << "missing " << SharedPath(kGolden);                                          \
  const std::string mpirun = FindOnPath("mpirun");                                              \
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on the PATH (Debian package openmpi-bin)"; \
  static_assert(true)

constexpr const char* kGolden = "golden/stories260K_greedy.jsonl";

bool LoopbackPortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

// Whether something accepts connections on loopback `port`.
bool PortOpen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool open = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (fd >= 0) close(fd);
  return open;
}

// The first of `n` consecutive free loopback ports (0 when none was found).
int FreePortRange(int n) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int base = FreePort();
    if (base == 0 || base + n - 1 > 65535) continue;
    bool all = true;
    for (int i = 1; i < n && all; ++i) all = LoopbackPortFree(base + i);
    if (all) return base;
  }
  return 0;
}

struct GoldenCase {
  std::vector<int32_t> prompt, greedy;
};

std::vector<GoldenCase> ReadGolden() {
  std::ifstream in(SharedPath(kGolden));
  std::vector<GoldenCase> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json j = json::parse(line);
    out.push_back({j["prompt_token_ids"].get<std::vector<int32_t>>(),
                   j["greedy_token_ids"].get<std::vector<int32_t>>()});
  }
  return out;
}

std::chrono::system_clock::time_point In(double s) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(s * 1e3));
}

// A `mpirun -np dp*pp*tp worker` job of stories260K engines and a gRPC client per coordinator:
// ports coordinator.port + g, or with `listed_ports` free ports in no order given as
// coordinator.ports.
class DpJob {
 public:
  DpJob(const std::string& mpirun, int dp, int tp, bool listed_ports = false, int pp = 1)
      : dp_(dp) {
    const int base = FreePortRange(dp);
    std::string list;
    for (int g = 0; g < dp; ++g) {
      int port = base + g;
      while (listed_ports && (port == 0 || std::count(ports_.begin(), ports_.end(), port) > 0)) {
        port = FreePort();
      }
      ports_.push_back(base == 0 ? 0 : port);
      list.append(list.empty() ? "" : ",").append(std::to_string(ports_.back()));
    }
    base_port_ = ports_[0];
    std::vector<std::string> argv = {mpirun,
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "--bind-to",
                                     "none",
                                     "-np",
                                     std::to_string(dp * pp * tp),
                                     "-x",
                                     "OMP_NUM_THREADS=1",
                                     "-x",
                                     "OMP_WAIT_POLICY=passive",
                                     LLM_WORKER_BIN,
                                     "--model.path",
                                     SharedPath(Cluster::kModel),
                                     "--coordinator.host",
                                     "127.0.0.1",
                                     "--coordinator.port",
                                     std::to_string(base_port_),
                                     "--coordinator.shutdown_grace_s",
                                     "5",
                                     "--engine.data_parallel_size",
                                     std::to_string(dp),
                                     "--engine.tensor_parallel_size",
                                     std::to_string(tp),
                                     "--engine.pipeline_parallel_size",
                                     std::to_string(pp),
                                     "--engine.threads_per_rank",
                                     "1",
                                     "--engine.kv_cache_mib",
                                     "8",
                                     "--engine.log_stats_interval_s",
                                     "0"};
    if (listed_ports) argv.insert(argv.end(), {"--coordinator.ports", list});
    job_ = std::make_unique<ChildProcess>(argv, "dp_job");
    for (int g = 0; g < dp; ++g) {
      auto channel = grpc::CreateChannel(Address(g), grpc::InsecureChannelCredentials());
      admin_.push_back(v1::Admin::NewStub(channel));
      generation_.push_back(v1::Generation::NewStub(channel));
    }
  }

  std::string Address(int group) const { return "127.0.0.1:" + std::to_string(ports_[group]); }
  // A router on `port` given only the job's engine.data_parallel_size and coordinator.port
  // (router.upstreams left at its default: every group's coordinator).
  ChildProcess Router(int port, const std::string& name) const {
    return ChildProcess(
        {LLM_ROUTER_BIN, "--model.path", SharedPath(Cluster::kModel), "--router.host", "127.0.0.1",
         "--router.port", std::to_string(port), "--coordinator.host", "127.0.0.1",
         "--coordinator.port", std::to_string(base_port_), "--engine.data_parallel_size",
         std::to_string(dp_), "--router.health_check_interval_ms", "200"},
        name);
  }
  // 0 when no free ports were found.
  int base_port() const { return base_port_; }
  ChildProcess& job() { return *job_; }

  // A coordinator's port was taken by another process before its rank bound it.
  bool BindFailed() const { return job_->Log().find("cannot listen") != std::string::npos; }
  // The last WaitHealthy's answer.
  bool healthy() const { return healthy_; }

  bool Healthy(int g) {
    // A channel whose first connection was refused backs off for a second or more: ask gRPC
    // only once the port accepts connections.
    if (!PortOpen(ports_[g])) return false;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(1.0));
    ctx.set_wait_for_ready(true);
    v1::HealthResponse r;
    return admin_[g]->Health(&ctx, v1::HealthRequest(), &r).ok() && r.serving();
  }
  // Every coordinator serving, within `timeout_s`; false at once when the job ended or a
  // coordinator could not bind its port (BindFailed()).
  bool WaitHealthy(double timeout_s) {
    bool serving = false;
    WaitFor(
        [&] {
          if (job_->Exited() || BindFailed()) return true;
          for (int g = 0; g < dp_; ++g) {
            if (!Healthy(g)) return false;
          }
          return serving = true;
        },
        timeout_s);
    healthy_ = serving && !job_->Exited();
    return healthy_;
  }

  v1::StatsResponse Stats(int g) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(5.0));
    v1::StatsResponse s;
    if (!admin_[g]->Stats(&ctx, v1::StatsRequest(), &s).ok()) s.set_kv_blocks_total(-1);
    return s;
  }

  // The greedy ids of `prompt` from group `g`'s coordinator (empty on an error, in `error`).
  std::vector<int32_t> Greedy(int g, const std::vector<int32_t>& prompt, int max_tokens,
                              std::string* error) {
    v1::GenerateRequest req;
    req.set_api_version(1);
    req.set_request_id("dp-test");
    for (int32_t t : prompt) req.add_prompt_token_ids(t);
    req.set_max_tokens(max_tokens);
    req.set_ignore_eos(true);
    req.mutable_sampling()->set_temperature(0.0f);
    req.mutable_sampling()->set_top_p(1.0f);
    req.mutable_sampling()->set_repetition_penalty(1.0f);
    req.mutable_sampling()->set_logprobs(-1);
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60.0));
    auto reader = generation_[g]->Generate(&ctx, req);
    std::vector<int32_t> ids;
    v1::GenerateResponse msg;
    while (reader->Read(&msg))
      ids.insert(ids.end(), msg.token_ids().begin(), msg.token_ids().end());
    const grpc::Status s = reader->Finish();
    if (!s.ok()) {
      *error = s.error_message();
      return {};
    }
    return ids;
  }

 private:
  int dp_;
  int base_port_ = 0;
  std::vector<int> ports_;  // by group
  std::unique_ptr<ChildProcess> job_;
  std::vector<std::unique_ptr<v1::Admin::Stub>> admin_;
  std::vector<std::unique_ptr<v1::Generation::Stub>> generation_;
  bool healthy_ = false;
};

// A DpJob whose coordinators all serve within `timeout_s` (check healthy() and base_port()).
// Its ports are only known to be free when picked; the ranks bind them seconds later, and a
// process of a test running beside this one can take one in between: the job then fails with
// "cannot listen", and is started again on fresh ports (three tries).
std::unique_ptr<DpJob> StartJob(const std::string& mpirun, int dp, int tp, double timeout_s,
                                bool listed_ports = false, int pp = 1) {
  std::unique_ptr<DpJob> job;
  for (int attempt = 0; attempt < 3; ++attempt) {
    job = std::make_unique<DpJob>(mpirun, dp, tp, listed_ports, pp);
    if (job->base_port() == 0 || job->WaitHealthy(timeout_s)) break;
    if (!job->BindFailed()) break;
    std::printf("[ dp ] a port was taken before the job bound it: again on fresh ports\n");
  }
  return job;
}

struct Layout {
  int dp, tp;
  bool listed_ports = false;  // coordinator.ports instead of coordinator.port + g
  int pp = 1;
  std::string Name() const {
    return "DP" + std::to_string(dp) + (pp > 1 ? "xPP" + std::to_string(pp) : "") + "xTP" +
           std::to_string(tp);
  }
};
void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.Name() << (l.listed_ports ? " with coordinator.ports" : "");
}

class DataParallelGolden : public ::testing::TestWithParam<Layout> {};

// Every coordinator of the job, asked at the same time, gives the golden greedy ids, reports
// its own group (Stats) and saw only its own requests: the engines are independent.
TEST_P(DataParallelGolden, EveryCoordinatorGivesTheGoldenIds) {
  LLM_DP_REQUIRE();
  const Layout layout = GetParam();
  const int dp = layout.dp, tp = layout.tp, pp = layout.pp, ranks_per_group = pp * tp;
  const std::vector<GoldenCase> golden = ReadGolden();
  ASSERT_FALSE(golden.empty());
  const auto t0 = std::chrono::steady_clock::now();
  const auto started = StartJob(mpirun, dp, tp, 120.0, layout.listed_ports, pp);
  DpJob& job = *started;
  ASSERT_NE(job.base_port(), 0) << "no " << dp << " consecutive free ports";
  ASSERT_TRUE(job.healthy()) << job.job().Log(6000);
  std::printf("[ dp ] healthy after %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::vector<std::vector<std::vector<int32_t>>> got(dp);
  std::vector<std::string> errors(dp);
  std::vector<std::thread> clients;
  for (int g = 0; g < dp; ++g) {
    clients.emplace_back([&, g] {
      for (const GoldenCase& c : golden) {
        got[g].push_back(job.Greedy(g, c.prompt, static_cast<int>(c.greedy.size()), &errors[g]));
      }
    });
  }
  for (auto& t : clients) t.join();
  std::printf("[ dp ] answered after %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (int g = 0; g < dp; ++g) {
    EXPECT_EQ(errors[g], "") << "group " << g;
    ASSERT_EQ(got[g].size(), golden.size());
    for (size_t i = 0; i < golden.size(); ++i) {
      EXPECT_EQ(got[g][i], golden[i].greedy) << layout.Name() << " group " << g << " prompt " << i;
    }
    const v1::StatsResponse s = job.Stats(g);
    EXPECT_EQ(s.data_parallel_rank(), g);
    EXPECT_EQ(s.data_parallel_size(), dp);
    EXPECT_EQ(s.world_size(), ranks_per_group);
    EXPECT_EQ(s.requests_total(), static_cast<int64_t>(golden.size())) << "group " << g;
    EXPECT_EQ(s.kv_blocks_free(), s.kv_blocks_total()) << "group " << g << ": blocks leaked";
    ASSERT_EQ(s.ranks_size(), ranks_per_group);
    for (int r = 0; r < ranks_per_group; ++r) {
      EXPECT_EQ(s.ranks(r).world_rank(), g * ranks_per_group + r);
      EXPECT_EQ(s.ranks(r).status(), "ok");
    }
  }
  // llm-admin stats names the group and each rank's world rank (with several groups).
  if (dp > 1) {
    const std::string cmd =
        std::string(LLM_ADMIN_BIN) + " --coordinator " + job.Address(dp - 1) + " stats 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string text;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) text.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << text;
    EXPECT_TRUE(
        std::regex_search(text, std::regex("data-parallel group: +" + std::to_string(dp - 1) +
                                           " of " + std::to_string(dp) + "\n")))
        << text;
    EXPECT_NE(text.find("world rank"), std::string::npos) << text;
  }
  // An idle engine's follower sleeps on its group's communicator as on the world's.
  if (ranks_per_group > 1) {
    std::map<int, pid_t> ranks;
    ASSERT_TRUE(WaitFor(
        [&] {
          ranks = RankPids(job.job().pid());
          return static_cast<int>(ranks.size()) == dp * ranks_per_group;
        },
        10.0));
    const pid_t follower = ranks[dp * ranks_per_group - 1];
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the spin phase
    const double before = CpuSecondsOf(follower);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double used = CpuSecondsOf(follower) - before;
    std::printf("[ dp ] an idle follower used %.3f CPU seconds in 1 s\n", used);
    EXPECT_LT(used, 0.1);
  }
  // World rank 0 prints the layout: one row per rank, each group's coordinator address.
  const std::string log = job.job().Log();
  EXPECT_NE(log.find("layout:  group  stage  tp_rank  world_rank"), std::string::npos) << log;
  for (int g = 0; g < dp; ++g) {
    EXPECT_NE(log.find("  " + job.Address(g) + "\n"), std::string::npos) << job.Address(g) << log;
  }
  // SIGTERM to mpirun (forwarded to every rank): every coordinator stops its group, and the
  // whole job ends by itself, long before a follower's own limit (grace + 10 s).
  const auto stop_at = std::chrono::steady_clock::now();
  job.job().Signal(SIGTERM);
  EXPECT_TRUE(job.job().WaitExit(12.0)) << "the job did not end\n" << job.job().Log(4000);
  EXPECT_EQ(job.job().Log().find("did not shut the job down"), std::string::npos)
      << job.job().Log(4000);
  std::printf("[ dp ] the job ended %.1f s after SIGTERM\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_at).count());
}

INSTANTIATE_TEST_SUITE_P(Layouts, DataParallelGolden,
                         ::testing::Values(Layout{2, 1}, Layout{2, 2, true}, Layout{4, 1},
                                           Layout{1, 2, false, 2}),
                         [](const ::testing::TestParamInfo<Layout>& p) {
                           return p.param.Name() + (p.param.listed_ports ? "ListedPorts" : "");
                         });

// A router given only engine.data_parallel_size and coordinator.port (router.upstreams left at
// its default) routes to both coordinators of a DP2 job. Then one group stops (SIGTERM to its
// coordinator alone): the other keeps serving through the router, the stopped group's rank
// waits for the job's end asleep, and SIGTERM to mpirun still ends the whole job cleanly.
TEST(DataParallelRouter, RequestsSpreadOverBothCoordinatorsAndOneGroupStopsAlone) {
  LLM_DP_REQUIRE();
  const auto started = StartJob(mpirun, 2, 1, 120.0);
  DpJob& job = *started;
  ASSERT_NE(job.base_port(), 0);
  ASSERT_TRUE(job.healthy()) << job.job().Log(6000);
  const int port = FreePort();
  ChildProcess router = job.Router(port, "dp_router");
  ASSERT_TRUE(WaitFor(
      [&] { return router.Exited() || Http(port, "GET", "/health", "", 1.0).status == 200; }, 60.0))
      << router.Log(4000);
  ASSERT_FALSE(router.Exited()) << router.Log(4000);
  const HttpResult ups = Http(port, "GET", "/upstreams", "", 5.0);
  ASSERT_EQ(ups.status, 200) << ups.body;
  ASSERT_EQ(ups.Json()["data"].size(), 2u) << ups.body;
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(ups.Json()["data"][g]["address"], job.Address(g)) << ups.body;
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        const json d = Http(port, "GET", "/upstreams", "", 5.0).Json()["data"];
        return d.is_array() && d.size() == 2 && d[0]["healthy"] == true && d[1]["healthy"] == true;
      },
      10.0));
  // Distinct prompts: prefix affinity hashes them over both coordinators.
  constexpr int kRequests = 16;
  const auto completion = [&](int i) {
    return Post(port, "/v1/completions",
                {{"model", "stories260K"},
                 {"prompt", json::array({1, 300 + 7 * i, 301 + 3 * i, 302 + i})},
                 {"max_tokens", 4},
                 {"temperature", 0}});
  };
  for (int i = 0; i < kRequests; ++i) {
    const HttpResult r = completion(i);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const v1::StatsResponse s0 = job.Stats(0), s1 = job.Stats(1);
  std::printf("[ dp ] requests per coordinator: %lld, %lld\n",
              static_cast<long long>(s0.requests_total()),
              static_cast<long long>(s1.requests_total()));
  EXPECT_GT(s0.requests_total(), 0);
  EXPECT_GT(s1.requests_total(), 0);
  EXPECT_EQ(s0.requests_total() + s1.requests_total(), kRequests);

  // Group 1 (world rank 1) stops alone.
  std::map<int, pid_t> ranks;
  ASSERT_TRUE(WaitFor(
      [&] {
        ranks = RankPids(job.job().pid());
        return ranks.size() == 2;
      },
      10.0));
  ASSERT_EQ(kill(ranks[1], SIGTERM), 0);
  EXPECT_TRUE(WaitFor([&] { return !job.Healthy(1); }, 20.0));
  EXPECT_TRUE(job.Healthy(0));
  for (int i = 0; i < 4; ++i) {
    const HttpResult r = completion(kRequests + i);
    EXPECT_EQ(r.status, 200) << r.body << router.Log(2000);
  }
  EXPECT_EQ(job.Stats(0).requests_total() + s1.requests_total(), kRequests + 4);
  // The stopped group's rank waits for the end of the job without spinning.
  ASSERT_EQ(kill(ranks[1], 0), 0) << "rank 1 exited before the job's end";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double before = CpuSecondsOf(ranks[1]);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = CpuSecondsOf(ranks[1]) - before;
  std::printf("[ dp ] a stopped group's rank used %.3f CPU seconds in 1 s\n", used);
  EXPECT_LT(used, 0.1);
  EXPECT_FALSE(job.job().Exited());
  // Group 0 stops too (SIGTERM to its coordinator alone): every rank then passes the job's
  // final barrier and MPI_Finalize, and mpirun exits with status 0 (after a SIGTERM to mpirun
  // itself, Open MPI reports 1 even when every rank exits cleanly).
  ASSERT_EQ(kill(ranks[0], SIGTERM), 0);
  ASSERT_TRUE(job.job().WaitExit(30.0)) << "the job did not end\n" << job.job().Log(4000);
  const int status = *job.job().exit_status();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "mpirun status " << status << "\n"
                                                             << job.job().Log(4000);
}

// 16 ranks in one job, as on two 8-GPU nodes: DP2 × PP2 × TP4 (stories260K's 4 KV heads one per
// tensor-parallel rank, its 5 layers 3 + 2 over the stages). A router given only the job's
// engine.data_parallel_size and coordinator.port serves the golden greedy text from both
// engines, streamed and not; then SIGTERM to mpirun ends every rank.
TEST(SixteenRanks, Dp2Pp2Tp4ServesTheGoldenTextThroughTheRouter) {
  LLM_DP_REQUIRE();
  const auto t0 = std::chrono::steady_clock::now();
  const auto started = StartJob(mpirun, 2, 4, 180.0, false, 2);
  DpJob& job = *started;
  ASSERT_NE(job.base_port(), 0);
  ASSERT_TRUE(job.healthy()) << job.job().Log(6000);
  std::printf("[ dp ] 16 ranks healthy after %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const int port = FreePort();
  ChildProcess router = job.Router(port, "sixteen_router");
  ASSERT_TRUE(WaitFor(
      [&] { return router.Exited() || Http(port, "GET", "/health", "", 1.0).status == 200; }, 60.0))
      << router.Log(4000);
  std::ifstream golden(SharedPath(kGolden));
  int cases = 0;
  for (std::string line; std::getline(golden, line);) {
    if (line.empty()) continue;
    const json g = json::parse(line);
    for (bool stream : {false, true}) {
      json body = GoldenRequest(g);
      body["stream"] = stream;
      std::string text;
      if (stream) {
        const StreamResult s = PostStream(port, "/v1/completions", body);
        ASSERT_EQ(s.http.status, 200) << s.http.body;
        ASSERT_TRUE(s.done);
        for (const json& e : s.events) {
          if (e.contains("choices") && !e["choices"].empty()) text += e["choices"][0]["text"];
        }
      } else {
        const HttpResult r = Post(port, "/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const json j = r.Json();
        text = j["choices"][0]["text"];
      }
      EXPECT_EQ(text, g["greedy_text"].get<std::string>()) << g["prompt"] << " stream=" << stream;
    }
    ++cases;
  }
  EXPECT_GE(cases, 1);
  // Structured output: the grammar masks travel with the plans to the last stage, which
  // samples; every answer is the schema's JSON, ended by the grammar.
  for (int i = 0; i < 4; ++i) {
    const json schema = {
        {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
    const HttpResult r =
        Post(port, "/v1/completions",
             {{"model", "stories260K"},
              {"prompt", "Once upon a time " + std::to_string(i)},
              {"max_tokens", 120},
              {"temperature", 1.0},
              {"seed", 7 + i},
              {"response_format",
               {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}}}}}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.Json()["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "stop") << r.body;
    const json value = json::parse(choice["text"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(value.is_object()) << r.body;
    EXPECT_TRUE(value["a"].is_number_integer()) << r.body;
  }
  // Each engine directly (the router's prefix affinity may have picked one for both prompts).
  const std::vector<GoldenCase> ids = ReadGolden();
  for (int g = 0; g < 2; ++g) {
    for (const GoldenCase& c : ids) {
      std::string error;
      EXPECT_EQ(job.Greedy(g, c.prompt, static_cast<int>(c.greedy.size()), &error), c.greedy)
          << "engine " << g << ": " << error;
    }
  }
  const v1::StatsResponse s0 = job.Stats(0), s1 = job.Stats(1);
  std::printf("[ dp ] requests per engine: %lld, %lld\n",
              static_cast<long long>(s0.requests_total()),
              static_cast<long long>(s1.requests_total()));
  EXPECT_EQ(s0.requests_total() + s1.requests_total(),
            2 * cases + 4 + 2 * static_cast<int64_t>(ids.size()));
  for (const auto& s : {s0, s1}) {
    EXPECT_EQ(s.world_size(), 8);
    EXPECT_EQ(s.kv_blocks_free(), s.kv_blocks_total());
  }
  job.job().Signal(SIGTERM);
  EXPECT_TRUE(job.job().WaitExit(30.0)) << "the job did not end\n" << job.job().Log(4000);
}

TEST(DataParallelLayout, JobSizeThatIsNotTheProductFailsNamingTheKeys) {
  LLM_DP_REQUIRE();
  ChildProcess job({mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3", LLM_WORKER_BIN,
                    "--model.path", SharedPath(Cluster::kModel), "--coordinator.port",
                    std::to_string(FreePortRange(2)), "--engine.data_parallel_size", "2"},
                   "dp_bad_layout");
  ASSERT_TRUE(job.WaitExit(60.0)) << job.Log(4000);
  EXPECT_NE(*job.exit_status(), 0);
  const std::string log = job.Log();
  EXPECT_NE(log.find("engine.data_parallel_size"), std::string::npos) << log;
  EXPECT_NE(log.find("engine.tensor_parallel_size"), std::string::npos) << log;
  EXPECT_NE(log.find("but this job has 3"), std::string::npos) << log;
}

}  // namespace
}  // namespace llm::e2e
