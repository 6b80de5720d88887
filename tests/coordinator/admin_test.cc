// The coordinator's edges through the real `worker` binary: bad requests get their gRPC status
// and the server keeps serving; Health/Drain/Resume/Stats; llm-admin; start-up errors; a clean
// exit on SIGTERM.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/coordinator/coordinator_client.h"

namespace llm::testing {
namespace {

constexpr const char* kModel = "models/stories260K";

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The admin service's Health (5 s deadline) into *h; false when the call fails.
bool GetHealth(WorkerProcess& w, pb::HealthResponse* h) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(5));
  return w.admin().Health(&ctx, pb::HealthRequest(), h).ok();
}

TEST(CoordinatorErrors, BadRequestsGetTheirStatusAndTheServerKeepsServing) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags());
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  struct Case {
    const char* name;
    std::function<void(pb::GenerateRequest&)> mutate;
    grpc::StatusCode code;
    std::vector<std::string> message_parts;
  };
  const std::vector<Case> cases = {
      {"token id outside the vocabulary",
       [](auto& r) { r.add_prompt_token_ids(100000); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"100000", "512"}},
      {"negative token id",
       [](auto& r) { r.set_prompt_token_ids(0, -3); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"-3"}},
      {"empty prompt",
       [](auto& r) { r.clear_prompt_token_ids(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"prompt"}},
      {"prompt + max_tokens too long",
       [](auto& r) { r.set_max_tokens(510); },
       grpc::StatusCode::OUT_OF_RANGE,
       {"3 tokens", "510", "512"}},
      {"prompt + max_tokens wraps a 32-bit int",
       [](auto& r) { r.set_max_tokens(2147483647 - 1); },
       grpc::StatusCode::OUT_OF_RANGE,
       {"2147483646", "512"}},
      {"stop token id outside the vocabulary",
       [](auto& r) { r.add_stop_token_ids(2147483647); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"stop_token_ids", "2147483647"}},
      {"too many stop token ids",
       [](auto& r) {
         for (int i = 0; i < 5000; ++i) r.add_stop_token_ids(5);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"stop_token_ids", "1024"}},
      {"max_tokens 0",
       [](auto& r) { r.set_max_tokens(0); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"max_tokens"}},
      {"negative temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(-1.0f); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"temperature"}},
      {"top_p above 1",
       [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"top_p"}},
      {"too many logprobs",
       [](auto& r) { r.mutable_sampling()->set_logprobs(50); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"logprobs"}},
      {"min_tokens above max_tokens",
       [](auto& r) { r.set_min_tokens(100); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"min_tokens"}},
      {"api_version 2",
       [](auto& r) { r.set_api_version(2); },
       grpc::StatusCode::FAILED_PRECONDITION,
       {"api_version 2"}},
      {"api_version unset",
       [](auto& r) { r.clear_api_version(); },
       grpc::StatusCode::FAILED_PRECONDITION,
       {"api_version 0"}},
  };
  // A request in flight while the bad ones arrive must not notice them.
  StreamResult running;
  std::thread bystander([&] {
    running = RunStream(w.generation(), MakeRequest({1, 403, 407}, 400));
  });
  for (const Case& c : cases) {
    pb::GenerateRequest req = MakeRequest({1, 403, 407}, 8);
    c.mutate(req);
    const StreamResult r = RunStream(w.generation(), req);
    EXPECT_EQ(r.status.error_code(), c.code) << c.name << ": " << r.status.error_message();
    EXPECT_TRUE(r.tokens.empty()) << c.name;
    for (const auto& part : c.message_parts) {
      EXPECT_TRUE(Contains(r.status.error_message(), part))
          << c.name << ": '" << r.status.error_message() << "' lacks '" << part << "'";
    }
  }
  bystander.join();
  EXPECT_TRUE(running.status.ok()) << running.status.error_message();
  EXPECT_EQ(running.tokens.size(), 400u);
  const StreamResult ok = RunStream(w.generation(), MakeRequest({1, 403, 407}, 8));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens.size(), 8u);
  const pb::StatsResponse s = WaitStats(w, AllBlocksFree);
  EXPECT_TRUE(AllBlocksFree(s));
  EXPECT_EQ(s.requests_total(), 2);
}

TEST(CoordinatorAdmin, HealthReportsTheModel) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags({"--model.max_model_len", "256"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  pb::HealthResponse h;
  ASSERT_TRUE(GetHealth(w, &h));
  EXPECT_TRUE(h.serving());
  EXPECT_EQ(h.model(), "stories260K");
  EXPECT_EQ(h.max_model_len(), 256);
  EXPECT_EQ(h.vocab_size(), 512);
  const pb::StatsResponse s = GetStats(w);
  EXPECT_EQ(s.world_size(), 1);
  EXPECT_EQ(s.kv_block_size(), 16);
  EXPECT_TRUE(AllBlocksFree(s));
  // Stats also says what is served, for how long, and how each rank is.
  EXPECT_EQ(s.model(), "stories260K");
  EXPECT_GT(s.uptime_s(), 0);
  EXPECT_LT(s.uptime_s(), 120);
  ASSERT_EQ(s.ranks_size(), 1);
  EXPECT_EQ(s.ranks(0).rank(), 0);
  EXPECT_FALSE(s.ranks(0).host().empty());
  EXPECT_EQ(s.ranks(0).status(), "ok");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_GE(GetStats(w).uptime_s(), s.uptime_s() + 1.0);
}

TEST(CoordinatorAdmin, DrainRefusesNewRequestsAndLetsRunningOnesFinish) {
  WorkerProcess w(DemoFlags());
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  // A long request that is running when the drain starts.
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  auto reader = w.generation().Generate(&ctx, MakeRequest({1, 403, 407}, 400));
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  int tokens = msg.token_ids_size();
  {
    grpc::ClientContext c;
    pb::DrainResponse r;
    ASSERT_TRUE(w.admin().Drain(&c, pb::DrainRequest(), &r).ok());
  }
  {
    pb::HealthResponse h;
    ASSERT_TRUE(GetHealth(w, &h));
    EXPECT_FALSE(h.serving());
  }
  const StreamResult refused = RunStream(w.generation(), MakeRequest({1, 403}, 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(Contains(refused.status.error_message(), "draining"))
      << refused.status.error_message();
  const pb::StatsResponse during = GetStats(w);
  EXPECT_TRUE(during.draining());
  EXPECT_EQ(during.running_sequences(), 1) << "the request ended before the drain was tested";
  while (reader->Read(&msg)) tokens += msg.token_ids_size();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 400);
  {
    grpc::ClientContext c;
    pb::ResumeResponse r;
    ASSERT_TRUE(w.admin().Resume(&c, pb::ResumeRequest(), &r).ok());
  }
  EXPECT_TRUE(RunStream(w.generation(), MakeRequest({1, 403}, 4)).status.ok());
  EXPECT_FALSE(GetStats(w).draining());
}

std::string RunCommand(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

// --json: one object with the proto's field names (what scripts read).
TEST(CoordinatorAdmin, LlmAdminPrintsJson) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags());
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  const std::string bin = std::string(LLM_ADMIN_BIN) +
                          " --json --coordinator 127.0.0.1:" + std::to_string(w.port()) + " ";
  int rc = -1;
  const auto stats = nlohmann::json::parse(RunCommand(bin + "stats", &rc));
  EXPECT_EQ(rc, 0);
  EXPECT_GT(stats.at("kv_blocks_total").get<int>(), 0);
  EXPECT_EQ(stats.at("kv_blocks_free"), stats.at("kv_blocks_total"));
  EXPECT_EQ(stats.at("prompt_tokens_total"), 0);  // 64-bit counters print as numbers
  EXPECT_EQ(stats.at("model"), "stories260K");
  EXPECT_GT(stats.at("uptime_s").get<double>(), 0);
  ASSERT_EQ(stats.at("ranks").size(), 1u);
  EXPECT_EQ(stats.at("ranks")[0].at("rank"), 0);
  EXPECT_EQ(stats.at("ranks")[0].at("status"), "ok");
  RunCommand(bin + "drain", &rc);
  EXPECT_EQ(rc, 0);
  auto health = nlohmann::json::parse(RunCommand(bin + "health", &rc));
  EXPECT_EQ(health.at("serving"), false);
  RunCommand(bin + "resume", &rc);
  health = nlohmann::json::parse(RunCommand(bin + "health", &rc));
  EXPECT_EQ(health.at("serving"), true);
  EXPECT_EQ(health.at("model"), "stories260K");
  RunCommand(bin + "bogus 2>/dev/null", &rc);
  EXPECT_NE(rc, 0);
}

// Without --json: aligned "key: value" lines, KV usage as blocks and percent, the uptime as
// 1h02m03s, and a table of the ranks.
TEST(CoordinatorAdmin, LlmAdminPrintsText) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags());
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  const std::string bin =
      std::string(LLM_ADMIN_BIN) + " --coordinator 127.0.0.1:" + std::to_string(w.port()) + " ";
  int rc = -1;
  const std::string stats = RunCommand(bin + "stats", &rc);
  EXPECT_EQ(rc, 0) << stats;
  const auto has = [&](const std::string& text, const char* pattern) {
    return std::regex_search(text, std::regex(pattern, std::regex::multiline));
  };
  EXPECT_TRUE(has(stats, R"(^model: +stories260K$)")) << stats;
  EXPECT_TRUE(has(stats, R"(^uptime: +([0-9]+h[0-9]{2}m[0-9]{2}s|[0-9]+m[0-9]{2}s|[0-9]+s)$)"))
      << stats;
  EXPECT_TRUE(
      has(stats, R"(^KV cache: +0 / [0-9]+ blocks used \(0\.0%\), 16 tokens per block, float32$)"))
      << stats;
  EXPECT_TRUE(has(stats, R"(^draining: +no$)")) << stats;
  EXPECT_TRUE(has(stats, R"(^rank +host +status +last seen$)")) << stats;
  EXPECT_TRUE(has(stats, R"(^0 +\S+ +ok +0s ago$)")) << stats;
  // Every "key: value" line has its value in the same column.
  std::istringstream lines(stats);
  size_t column = 0;
  for (std::string line; std::getline(lines, line) && !line.empty();) {
    const size_t colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << line;
    const size_t value = line.find_first_not_of(' ', colon + 1);
    if (column == 0) column = value;
    EXPECT_EQ(value, column) << line;
  }
  const std::string health = RunCommand(bin + "health", &rc);
  EXPECT_EQ(rc, 0) << health;
  EXPECT_TRUE(has(health, R"(^serving: +yes$)")) << health;
  EXPECT_TRUE(has(health, R"(^model: +stories260K$)")) << health;
  RunCommand(bin + "drain", &rc);
  EXPECT_EQ(rc, 0);
  const std::string draining = RunCommand(bin + "health", &rc);
  EXPECT_TRUE(has(draining, R"(^serving: +no$)")) << draining;
  EXPECT_TRUE(has(draining, R"(^detail: +draining$)")) << draining;
}

// llm-admin drain --wait: returns once the requests running at the drain have finished (all
// their tokens delivered), says how many; with a timeout shorter than the work it exits 1.
TEST(CoordinatorAdmin, DrainWaitReturnsWhenNothingRuns) {
  WorkerProcess w(DemoFlags());
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  const std::string bin =
      std::string(LLM_ADMIN_BIN) + " --coordinator 127.0.0.1:" + std::to_string(w.port()) + " ";
  struct Running {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>> reader;
    int tokens = 0;
  };
  std::vector<std::unique_ptr<Running>> running;
  for (int i = 0; i < 2; ++i) {
    auto r = std::make_unique<Running>();
    r->ctx.set_deadline(In(120));
    r->reader =
        w.generation().Generate(&r->ctx, MakeRequest({1, 403, static_cast<int>(407 + i)}, 800));
    pb::GenerateResponse msg;
    ASSERT_TRUE(r->reader->Read(&msg));
    r->tokens += msg.token_ids_size();
    running.push_back(std::move(r));
  }
  // Keep reading the streams meanwhile (the coordinator waits for the reader of each stream).
  std::vector<std::thread> readers;
  for (auto& r : running) {
    readers.emplace_back([&r] {
      pb::GenerateResponse msg;
      while (r->reader->Read(&msg)) r->tokens += msg.token_ids_size();
    });
  }
  int rc = -1;
  const std::string out = RunCommand(bin + "--json drain --wait --wait-timeout-s 120", &rc);
  for (auto& t : readers) t.join();
  EXPECT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["drained"], true);
  EXPECT_EQ(j["finished"], 2) << out;
  EXPECT_EQ(j["remaining"], 0);
  for (auto& r : running) {
    EXPECT_TRUE(r->reader->Finish().ok());
    EXPECT_EQ(r->tokens, 800);
  }
  EXPECT_TRUE(GetStats(w).draining());

  RunCommand(bin + "resume", &rc);
  ASSERT_EQ(rc, 0);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  // 2,000 tokens: seconds of work even on a fast CPU, against a 1 s wait.
  auto reader = w.generation().Generate(&ctx, MakeRequest({1, 403, 407}, 2000));
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  const std::string late =
      RunCommand(bin + "--json drain --wait --wait-timeout-s 1 2>/dev/null", &rc);
  EXPECT_NE(rc, 0) << late;
  const auto k = nlohmann::json::parse(late, nullptr, false);
  ASSERT_TRUE(k.is_object()) << late;
  EXPECT_EQ(k["drained"], false);
  EXPECT_EQ(k["remaining"], 1);
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  reader->Finish();
}

// With coordinator.admin_token set, Drain/Resume need it (llm-admin sends LLM_ADMIN_TOKEN or
// --admin-token); Health and Stats stay open.
TEST(CoordinatorAdmin, DrainAndResumeNeedTheAdminToken) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags({"--coordinator.admin_token", "s3cret-admin"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  const std::string bin =
      std::string(LLM_ADMIN_BIN) + " --coordinator 127.0.0.1:" + std::to_string(w.port()) + " ";
  int rc = -1;
  const std::string denied = RunCommand("env -u LLM_ADMIN_TOKEN " + bin + "drain 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_TRUE(Contains(denied, "admin_token")) << denied;
  RunCommand("LLM_ADMIN_TOKEN=wrong " + bin + "drain 2>/dev/null", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_FALSE(GetStats(w).draining());
  RunCommand("LLM_ADMIN_TOKEN=s3cret-admin " + bin + "drain", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(GetStats(w).draining());
  RunCommand(bin + "--admin-token s3cret-admin resume", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(GetStats(w).draining());
  RunCommand("env -u LLM_ADMIN_TOKEN " + bin + "health", &rc);
  EXPECT_EQ(rc, 0);
}

// With coordinator.tls_cert_file/tls_key_file the gRPC port speaks TLS only: llm-admin with
// the certificate as trusted root gets answers, a plaintext client does not.
TEST(CoordinatorAdmin, TlsOnTheGrpcPort) {
  LLM_REQUIRE_SHARED(kModel);
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "openssl is not installed (needed to make a test certificate)";
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tls_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  int rc = -1;
  RunCommand(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
          key + " -out " + cert + " 2>&1",
      &rc);
  ASSERT_EQ(rc, 0) << "openssl could not make a certificate";
  WorkerProcess w(
      StoriesFlags({"--coordinator.tls_cert_file", cert, "--coordinator.tls_key_file", key}));
  const std::string bin =
      std::string(LLM_ADMIN_BIN) + " --coordinator 127.0.0.1:" + std::to_string(w.port()) + " ";
  std::string health;
  for (int i = 0; i < 100; ++i) {  // up to ~20 s for the model to load
    health = RunCommand(bin + "--tls-ca " + cert + " --timeout-s 1 health 2>&1", &rc);
    if (rc == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(rc, 0) << health << w.Log();
  EXPECT_TRUE(Contains(health, "stories260K")) << health;
  RunCommand(bin + "--timeout-s 2 health 2>/dev/null", &rc);
  EXPECT_NE(rc, 0) << "a plaintext client was answered on the TLS port";
  EXPECT_TRUE(Contains(w.Log(), "TLS")) << w.Log();
  std::filesystem::remove_all(dir);
}

// The waiting queue is bounded in size and in time: beyond either, RESOURCE_EXHAUSTED (the
// router's 429), never unbounded memory or an endless wait; running requests are unaffected.
TEST(CoordinatorQueue, FullQueueAndQueueTimeoutAreResourceExhausted) {
  WorkerProcess w(DemoFlags({"--engine.max_num_seqs", "1", "--engine.max_waiting_requests", "1",
                             "--engine.queue_timeout_s", "1"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  auto running = w.generation().Generate(&ctx, MakeRequest({1, 403, 407}, 2000));
  pb::GenerateResponse msg;
  ASSERT_TRUE(running->Read(&msg));  // it runs: the one sequence slot is taken
  StreamResult queued;
  std::thread waiter([&] { queued = RunStream(w.generation(), MakeRequest({1, 403}, 4)); });
  ASSERT_TRUE(WaitStats(w, [](const pb::StatsResponse& s) {
                return s.waiting_sequences() == 1;
              }).waiting_sequences() == 1);
  const StreamResult refused = RunStream(w.generation(), MakeRequest({1, 407}, 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Contains(refused.status.error_message(), "engine.max_waiting_requests"))
      << refused.status.error_message();
  waiter.join();
  EXPECT_EQ(queued.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Contains(queued.status.error_message(), "engine.queue_timeout_s"))
      << queued.status.error_message();
  const pb::StatsResponse s = GetStats(w);
  EXPECT_EQ(s.rejected_queue_full_total(), 1);
  EXPECT_EQ(s.queue_timeouts_total(), 1);
  EXPECT_TRUE(running->Read(&msg)) << "the running request was disturbed";
  ctx.TryCancel();
  while (running->Read(&msg)) {
  }
  running->Finish();
  EXPECT_TRUE(AllBlocksFree(WaitStats(w, AllBlocksFree)));
}

// SIGTERM drains: new requests are refused at once, a request already streaming runs to its
// end inside the grace period, then the process exits 0.
TEST(CoordinatorLifecycle, SigtermDrainsRunningRequestsThenExits) {
  WorkerProcess w(DemoFlags({"--coordinator.shutdown_grace_s", "60"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  auto reader = w.generation().Generate(&ctx, MakeRequest({1, 403, 407}, 300));
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  int tokens = msg.token_ids_size();
  w.Signal(SIGTERM);
  // The signal thread's turn: until Health says so, not a fixed 200 ms sleep, which a loaded
  // 2-core machine can outlast (the request below would then be accepted). Bounded: 20 s.
  for (int i = 0; i < 200; ++i) {
    pb::HealthResponse h;
    if (GetHealth(w, &h) && !h.serving()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const StreamResult refused = RunStream(w.generation(), MakeRequest({1, 403, 407}, 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(Contains(refused.status.error_message(), "shutting down"))
      << refused.status.error_message();
  {
    pb::HealthResponse h;
    ASSERT_TRUE(GetHealth(w, &h));
    EXPECT_FALSE(h.serving());
    EXPECT_EQ(h.detail(), "shutting down");
  }
  while (reader->Read(&msg)) tokens += msg.token_ids_size();
  const grpc::Status s = reader->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tokens, 300) << "the running request was cut short";
  ASSERT_TRUE(w.WaitExit(15.0)) << "worker did not exit after draining:\n" << w.Log();
  ASSERT_TRUE(WIFEXITED(*w.exit_status())) << w.Log();
  EXPECT_EQ(WEXITSTATUS(*w.exit_status()), 0) << w.Log();
  EXPECT_TRUE(Contains(w.Log(), "received SIGTERM")) << w.Log();
}

// Past the grace period (or on a second signal) what still runs ends UNAVAILABLE.
TEST(CoordinatorLifecycle, SigtermGracePeriodEndsLongRequests) {
  for (bool second_signal : {false, true}) {
    WorkerProcess w(DemoFlags({"--coordinator.shutdown_grace_s", second_signal ? "600" : "1"}));
    ASSERT_TRUE(w.WaitHealthy()) << w.Log();
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    auto reader = w.generation().Generate(&ctx, MakeRequest({1, 403, 407}, 2000));
    pb::GenerateResponse msg;
    ASSERT_TRUE(reader->Read(&msg));
    w.Signal(SIGTERM);
    if (second_signal) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      w.Signal(SIGTERM);
    }
    while (reader->Read(&msg)) {
    }
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), "shutting down")) << s.error_message();
    ASSERT_TRUE(w.WaitExit(15.0)) << "worker did not exit:\n" << w.Log();
    EXPECT_TRUE(WIFEXITED(*w.exit_status()) && WEXITSTATUS(*w.exit_status()) == 0) << w.Log();
  }
}

TEST(CoordinatorLifecycle, IdleWorkerUsesNoCpu) {
  LLM_REQUIRE_SHARED(kModel);
  // Default OpenMP wait policy (ctest sets a passive one) and two compute threads.
  WorkerProcess w(StoriesFlags({"--engine.threads_per_rank", "2"}), {"OMP_WAIT_POLICY"});
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  ASSERT_TRUE(RunStream(w.generation(), MakeRequest({1, 403, 407}, 64)).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // OpenMP spin-wait ends
  const double before = w.CpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double used = w.CpuSeconds() - before;
  EXPECT_LT(used, 0.1) << "an idle worker used " << used << " CPU seconds in 2 s";
}

// engine.log_stats_interval_s: one stats line per interval while something changes (vLLM's
// "Avg prompt throughput ..."), none while the cluster is idle.
TEST(CoordinatorLifecycle, EngineStatsLineEveryIntervalOnlyWhenSomethingChanged) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags({"--engine.log_stats_interval_s", "1"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  const auto lines = [&w] {
    const std::string log = w.Log();
    size_t n = 0;
    for (size_t at = 0; (at = log.find("avg prompt throughput", at)) != std::string::npos; ++at) {
      ++n;
    }
    return n;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(lines(), 0u) << "an idle worker logged stats:\n" << w.Log();
  ASSERT_TRUE(RunStream(w.generation(), MakeRequest({1, 403, 407}, 64)).status.ok());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (lines() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(lines(), 1u) << "no stats line within 10 s of a request:\n" << w.Log();
  const std::regex line(
      R"(engine: avg prompt throughput: [0-9.]+ tokens/s, avg generation throughput: [0-9.]+ )"
      R"(tokens/s, running: [0-9]+ reqs, waiting: [0-9]+ reqs, KV cache usage: [0-9.]+%, )"
      R"(prefix cache hit rate: [0-9.]+%)");
  EXPECT_TRUE(std::regex_search(w.Log(), line)) << w.Log();
  // At most one more line (the interval the request ended in), then quiet.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const size_t settled = lines();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(lines(), settled) << "stats lines went on while idle:\n" << w.Log();
}

TEST(CoordinatorLifecycle, IdleWorkerExitsOnSigint) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags());
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  w.Signal(SIGINT);
  ASSERT_TRUE(w.WaitExit(15.0)) << w.Log();
  EXPECT_TRUE(WIFEXITED(*w.exit_status()) && WEXITSTATUS(*w.exit_status()) == 0) << w.Log();
}

// Start-up errors: the process exits non-zero, quickly, with a message naming the cause.
void ExpectStartupError(std::vector<std::string> flags, std::vector<std::string> env,
                        const std::vector<std::string>& parts) {
  WorkerProcess w(std::move(flags), std::move(env));
  ASSERT_TRUE(w.WaitExit(60.0)) << "worker did not exit:\n" << w.Log();
  EXPECT_TRUE(WIFEXITED(*w.exit_status()) && WEXITSTATUS(*w.exit_status()) != 0) << w.Log();
  for (const auto& part : parts) EXPECT_TRUE(Contains(w.Log(), part)) << w.Log();
}

TEST(CoordinatorLifecycle, StartupErrorsAreClear) {
  LLM_REQUIRE_SHARED(kModel);
  // A max_model_len asked for (512) must fit: 8 blocks of 16 tokens do not hold one sequence.
  ExpectStartupError(
      StoriesFlags({"--engine.kv_cache_blocks", "8", "--model.max_model_len", "512"}), {},
      {"does not fit", "128 tokens", "512"});
  ExpectStartupError(StoriesFlags({"--engine.no_such_key", "1"}), {}, {"no_such_key"});
  ExpectStartupError(StoriesFlags({"--model.max_model_len", "100000"}), {},
                     {"model.max_model_len", "512"});
  ExpectStartupError({"--model.path", "/nonexistent/model"}, {}, {"/nonexistent/model"});
}

// Without model.max_model_len the served length is the model's (512 here) only when the KV
// cache holds it: else what the cache holds, with a warning, as llama.cpp serves a shorter
// context than a model's trained one by default. A GGUF file of a 7B model says 32768 tokens,
// which deploy/cluster.yaml's 256 MiB cannot hold; refusing to start would stop
// `MODEL=x.gguf tools/serve.sh` for every such file.
TEST(CoordinatorLifecycle, ModelLengthTheCacheCannotHoldIsFittedToIt) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags({"--engine.kv_cache_blocks", "8"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  EXPECT_TRUE(Contains(w.Log(), "context of 512 tokens does not fit the KV cache")) << w.Log();
  EXPECT_TRUE(Contains(w.Log(), "serving sequences of up to 128 tokens")) << w.Log();
  pb::HealthResponse h;
  ASSERT_TRUE(GetHealth(w, &h));
  EXPECT_EQ(h.max_model_len(), 128);
  // 3 prompt tokens + 125 fit; one more is past the served length.
  const StreamResult fits = RunStream(w.generation(), MakeRequest({1, 403, 407}, 125));
  EXPECT_TRUE(fits.status.ok()) << fits.status.error_message();
  EXPECT_EQ(fits.tokens.size(), 125u);
  const StreamResult over = RunStream(w.generation(), MakeRequest({1, 403, 407}, 126));
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_TRUE(Contains(over.status.error_message(), "128")) << over.status.error_message();
  const pb::StatsResponse s = WaitStats(w, AllBlocksFree);
  EXPECT_TRUE(AllBlocksFree(s));
}

TEST(CoordinatorLifecycle, DeployExampleConfigServes) {
  LLM_REQUIRE_SHARED(kModel);
  // Every key of deploy/cluster.yaml is valid; only the model path (relative to the repo root
  // there) and the port (set by WorkerProcess) are overridden.
  WorkerProcess w({"--config", std::string(LLM_SOURCE_DIR) + "/deploy/cluster.yaml", "--model.path",
                   SharedPath(kModel), "--engine.threads_per_rank", "1"});
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  EXPECT_TRUE(Contains(w.Log(), "KV cache:")) << w.Log();
  EXPECT_TRUE(RunStream(w.generation(), MakeRequest({1, 403, 407}, 5)).status.ok());
}

TEST(CoordinatorLifecycle, DummyWeightsSayTheOutputIsMeaningless) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess w(StoriesFlags({"--model.load_format", "dummy"}));
  ASSERT_TRUE(w.WaitHealthy()) << w.Log();
  EXPECT_TRUE(Contains(w.Log(), "MEANINGLESS")) << w.Log();
  EXPECT_TRUE(Contains(w.Log(), "KV cache:")) << w.Log();
  EXPECT_TRUE(RunStream(w.generation(), MakeRequest({1, 2, 3}, 5)).status.ok());
}

}  // namespace
}  // namespace llm::testing
