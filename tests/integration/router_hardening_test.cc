// Issue 6 ("Safe to expose") through the real router and worker: each test sends the hostile
// input named in the issue and checks the error and that the router keeps serving.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

class RouterHardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SharedPath(Cluster::kModel))) return;
    cluster_ = new Cluster();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    LLM_E2E_REQUIRE_SHARED();
    ASSERT_TRUE(cluster_->ok()) << cluster_->Logs();
  }
  static int port() { return cluster_->port(); }

  static inline Cluster* cluster_ = nullptr;
};

std::string Nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// The router answers /health and a small completion: it survived what came before.
void ExpectStillServing(int port) {
  EXPECT_EQ(Http(port, "GET", "/health", "", 10.0).status, 200);
  const HttpResult r =
      Post(port, "/v1/completions",
           {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(RouterHardening, DeepJsonIsRejectedAndTheRouterStaysUp) {
  // ~400 KB: a message carrying an extra field nested 200,000 arrays deep.
  const std::string chat =
      R"({"messages":[{"role":"user","content":"Hi","x":)" + Nested(200000) + "}]}";
  ASSERT_GT(chat.size(), 400000u);
  HttpResult r = Http(port(), "POST", "/v1/chat/completions", chat, 30.0);
  ASSERT_EQ(r.status, 400) << r.error << r.body;
  const json e = r.Json();
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("64"), std::string::npos) << r.body;

  // /tokenize renders the template without any coordinator: the same through its kwargs.
  const std::string tokenize = R"({"messages":[{"role":"user","content":"Hi"}],)"
                               R"("chat_template_kwargs":{"a":)" +
                               Nested(200000) + "}}";
  r = Http(port(), "POST", "/tokenize", tokenize, 30.0);
  EXPECT_EQ(r.status, 400) << r.error << r.body;
  r = Http(port(), "POST", "/v1/completions", R"({"prompt":)" + Nested(200000) + "}", 30.0);
  EXPECT_EQ(r.status, 400) << r.error << r.body;
  ExpectStillServing(port());
}

TEST_F(RouterHardening, FanOutOverTheCapsIsRejectedQuickly) {
  // ~10 KB: 2,000 prompts × n = 16 would be 32,000 upstream calls.
  json prompts = json::array();
  for (int i = 0; i < 2000; ++i) prompts.push_back("Hi");
  const int64_t prompt_tokens_before = cluster_->Stats().prompt_tokens_total();
  const auto start = std::chrono::steady_clock::now();
  HttpResult r = Post(port(), "/v1/completions", {{"prompt", prompts}, {"n", 16}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, 400) << r.error << r.body;
  EXPECT_NE(r.body.find("router.max_prompts"), std::string::npos) << r.body;
  EXPECT_LT(seconds, 2.0);
  prompts.erase(prompts.begin() + 200, prompts.end());
  r = Post(port(), "/v1/completions", {{"prompt", prompts}, {"n", 16}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("router.max_choices"), std::string::npos) << r.body;
  json stops = json::array();
  for (int i = 0; i < 1000; ++i) stops.push_back(std::to_string(i) + "s");
  r = Post(port(), "/v1/completions", {{"prompt", "Hi"}, {"stop", stops}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("router.max_stop_strings"), std::string::npos) << r.body;
  // Nothing was started upstream.
  EXPECT_TRUE(cluster_->WaitAllBlocksFree(10.0));
  EXPECT_EQ(cluster_->Stats().prompt_tokens_total(), prompt_tokens_before)
      << "a rejected request reached the engine";
  ExpectStillServing(port());
}

TEST_F(RouterHardening, FieldsTheEngineCannotHonourGet400) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const std::vector<std::pair<std::string, json>> cases = {
      {"logit_bias", {{"1", 100}}},
      {"best_of", 3},
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema", {{"schema", {{"type", "integer"}, {"not", {{"const", 3}}}}}}}}},
      // Tools are accepted (tests/router/tool_parser_test.cc); malformed ones are not.
      {"tools", "get_weather"},
      {"tool_choice", "required"},  // without tools
      {"functions", {{{"name", "f"}}}},
      // Any client could jump the queue and get everyone else preempted.
      {"priority", -2147483648LL},
  };
  for (const auto& [key, value] : cases) {
    json body = chat;
    body[key] = value;
    const HttpResult r = Post(port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 400) << key << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["param"], key) << r.body;
    EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error") << r.body;
  }
  ExpectStillServing(port());
}

TEST_F(RouterHardening, PriorityIsHonouredOnlyWhenTheOperatorAllowsIt) {
  const int allowing = cluster_->AddRouter({"--router.allow_priority", "true"});
  ASSERT_NE(allowing, 0) << cluster_->Logs();
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"priority", -3}};
  EXPECT_EQ(Post(port(), "/v1/completions", body).status, 400);
  const HttpResult r = Post(allowing, "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(RouterHardening, ApiKeysFromConfigAndEnvironment) {
  const int keyed =
      cluster_->AddRouter({"--router.api_keys", "sk-config-key"}, "", {"LLM_API_KEY=sk-env-key"});
  ASSERT_NE(keyed, 0) << cluster_->Logs();
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 2}}.dump();
  // No key, a wrong key, a key of the wrong scheme: 401 in OpenAI's shape.
  for (const Headers& h : {Headers{}, Headers{{"Authorization", "Bearer sk-wrong"}},
                           Headers{{"Authorization", "Basic sk-config-key"}}}) {
    const HttpResult r = Http(keyed, "POST", "/v1/completions", body, 10.0, h);
    ASSERT_EQ(r.status, 401) << r.body;
    const json e = r.Json()["error"];
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_EQ(e["code"], "invalid_api_key");
    EXPECT_TRUE(e["param"].is_null());
    EXPECT_FALSE(e["message"].get<std::string>().empty());
    EXPECT_EQ(r.Header("www-authenticate"), "Bearer");
  }
  // Every route needs it, unknown ones too.
  EXPECT_EQ(Http(keyed, "GET", "/v1/models", "", 10.0).status, 401);
  EXPECT_EQ(Http(keyed, "GET", "/nope", "", 10.0).status, 401);
  EXPECT_EQ(Http(keyed, "POST", "/tokenize", R"({"prompt":"Hi"})", 10.0).status, 401);
  // Either key works; /health stays open for load balancers.
  for (const char* key : {"sk-config-key", "sk-env-key"}) {
    const HttpResult r = Http(keyed, "POST", "/v1/completions", body, 30.0,
                              {{"Authorization", std::string("Bearer ") + key}});
    EXPECT_EQ(r.status, 200) << key << ": " << r.body;
  }
  EXPECT_EQ(Http(keyed, "GET", "/health", "", 10.0).status, 200);
  // Without keys (the suite's router) an Authorization header changes nothing.
  EXPECT_EQ(Http(port(), "GET", "/v1/models", "", 10.0, {{"Authorization", "Bearer x"}}).status,
            200);
}

TEST_F(RouterHardening, ApiKeyFileAndProtectedHealth) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("router_keys_" + std::to_string(getpid()) + ".txt"))
                               .string();
  { std::ofstream(path) << "# keys\nsk-from-file\n"; }
  // /health needs the key too, so the harness only waits for an answer (any status).
  const int keyed =
      cluster_->AddRouter({"--router.api_key_file", path, "--router.health_requires_key", "true"},
                          cluster_->upstream());
  std::filesystem::remove(path);
  ASSERT_NE(keyed, 0) << cluster_->Logs();
  EXPECT_EQ(Http(keyed, "GET", "/health", "", 10.0).status, 401);
  EXPECT_TRUE(WaitFor(
      [&] {
        return Http(keyed, "GET", "/health", "", 5.0, {{"Authorization", "Bearer sk-from-file"}})
                   .status == 200;
      },
      30.0));
  EXPECT_EQ(
      Http(keyed, "GET", "/v1/models", "", 10.0, {{"Authorization", "Bearer sk-from-file"}}).status,
      200);
}

TEST_F(RouterHardening, MissingKeyFileStopsStartUp) {
  ChildProcess router({LLM_ROUTER_BIN, "--model.path", SharedPath(Cluster::kModel), "--router.host",
                       "127.0.0.1", "--router.port", std::to_string(FreePort()),
                       "--router.api_key_file", "/nonexistent/keys.txt"},
                      "e2e_router_badkeys");
  ASSERT_TRUE(router.WaitExit(30.0));
  EXPECT_NE(router.exit_status().value_or(0), 0);
  EXPECT_NE(router.Log().find("router.api_key_file"), std::string::npos) << router.Log();
}

TEST_F(RouterHardening, WithoutAKeyTheRouterListensOnLoopbackAndSaysHowToOpenIt) {
  const int port = FreePort();
  ChildProcess router({LLM_ROUTER_BIN, "--model.path", SharedPath(Cluster::kModel), "--router.port",
                       std::to_string(port), "--router.upstreams", cluster_->upstream()},
                      "e2e_router_default_host");
  ASSERT_TRUE(
      WaitFor([&] { return router.Log().find("serving model") != std::string::npos; }, 30.0))
      << router.Log();
  EXPECT_NE(router.Log().find("on http://127.0.0.1:"), std::string::npos) << router.Log();
  EXPECT_NE(router.Log().find("listens on 127.0.0.1 only"), std::string::npos) << router.Log();
  EXPECT_EQ(Http(port, "GET", "/v1/models", "", 10.0).status, 200);
}

// CPU time (user + system) the process has used, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Connected loopback sockets that send nothing.
std::vector<int> IdleConnections(int port, int count) {
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      fds.push_back(fd);
    } else if (fd >= 0) {
      close(fd);
    }
  }
  return fds;
}

TEST_F(RouterHardening, OutOfDescriptorsBacksOffInsteadOfSpinning) {
  // The issue's reproduction: `ulimit -n 64` and 80 idle sockets. accept() then fails with
  // EMFILE while the listening socket stays readable; retrying at once spun at 100% CPU.
  const int limited =
      cluster_->AddRouter({}, "", {}, {"/bin/sh", "-c", "ulimit -n 64 && exec \"$0\" \"$@\""});
  ASSERT_NE(limited, 0) << cluster_->Logs();
  ChildProcess& router = cluster_->last_router();
  std::vector<int> idle = IdleConnections(limited, 80);
  EXPECT_GE(idle.size(), 64u);
  ASSERT_TRUE(
      WaitFor([&] { return router.Log().find("accept failed") != std::string::npos; }, 10.0))
      << router.Log();
  const double before = CpuSeconds(router.pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double used = CpuSeconds(router.pid()) - before;
  EXPECT_LT(used, 0.4) << "the router used " << used << " s of CPU in 2 s while out of descriptors";
  for (int fd : idle) close(fd);
  // Descriptors come back as the idle sessions see their peers go: the router serves again.
  EXPECT_TRUE(WaitFor([&] { return Http(limited, "GET", "/health", "", 2.0).status == 200; }, 20.0))
      << router.Log();
  ExpectStillServing(limited);
}

TEST_F(RouterHardening, TooManyRequestsInFlightGet429WithRetryAfter) {
  const int limited = cluster_->AddRouter({"--router.max_inflight_requests", "1"});
  ASSERT_NE(limited, 0) << cluster_->Logs();
  // A background client keeps 400-token generations running back to back, so the one slot is
  // nearly always taken; a short request sent meanwhile is refused.
  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop) {
      Post(limited, "/v1/completions",
           {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"ignore_eos", true}});
    }
  });
  bool saw_429 = false;
  HttpResult r;
  WaitFor(
      [&] {
        r = Post(limited, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 1}});
        saw_429 = r.status == 429;
        return saw_429;
      },
      20.0);
  stop = true;
  load.join();
  ASSERT_TRUE(saw_429) << r.status << " " << r.body;
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_EQ(r.Json()["error"]["type"], "rate_limit_error") << r.body;
  EXPECT_NE(r.body.find("router.max_inflight_requests"), std::string::npos) << r.body;
  EXPECT_EQ(Http(limited, "GET", "/health", "", 10.0).status, 200);
}

TEST_F(RouterHardening, SpecialTokenTextInMessagesStaysText) {
  // stories260K's template is "{{ bos_token }}{% for message in messages %}{{ content }}...":
  // <s> = 1, </s> = 2. A user's "</s><s>" must not end the sequence and start a new one.
  const json body = {{"messages", {{{"role", "user"}, {"content", "Hi</s><s>Once upon a time"}}}}};
  const auto count = [](const json& tokens, int id) {
    return std::count(tokens.begin(), tokens.end(), json(id));
  };
  HttpResult r = Post(port(), "/tokenize", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(count(r.Json()["tokens"], 1), 1) << r.body;  // the template's own bos
  EXPECT_EQ(count(r.Json()["tokens"], 2), 0) << r.body;
  json chat = body;
  chat["max_tokens"] = 4;
  r = Post(port(), "/v1/chat/completions", chat);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["usage"]["prompt_tokens"],
            json(Post(port(), "/tokenize", body).Json()["count"]));

  // vLLM's behaviour when the operator opts in.
  const int open = cluster_->AddRouter({"--router.special_tokens_in_messages", "true"});
  ASSERT_NE(open, 0) << cluster_->Logs();
  r = Post(open, "/tokenize", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(count(r.Json()["tokens"], 1), 2) << r.body;
  EXPECT_EQ(count(r.Json()["tokens"], 2), 1) << r.body;
}

// Seconds until the router closes a connection that sent `bytes` and then nothing (-1: still
// open after `limit_s`).
double SecondsUntilClosed(int port, const std::string& bytes, double limit_s) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  double closed_after = -1;
  const auto start = std::chrono::steady_clock::now();
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
    const auto end = ChildProcess::Deadline(limit_s);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[512];
      if (recv(fd, buf, sizeof(buf), 0) <= 0) {
        closed_after =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        break;
      }
    }
  }
  close(fd);
  return closed_after;
}

// The HTTP knobs that were hard-coded are keys now (issue 6): router.max_header_bytes,
// router.io_timeout_s (router.write_queue_bytes and router.health_check_interval_ms are
// plumbed the same way; RouterStreamStart uses the interval).
TEST_F(RouterHardening, HttpLimitsAreConfigurable) {
  const int knobs =
      cluster_->AddRouter({"--router.max_header_bytes", "2048", "--router.io_timeout_s", "1",
                           "--router.write_queue_bytes", "4096"});
  ASSERT_NE(knobs, 0) << cluster_->Logs();
  const HttpResult big =
      Http(knobs, "GET", "/health", "", 10.0, {{"X-Pad", std::string(4096, 'a')}});
  EXPECT_EQ(big.status, 431) << big.body;
  EXPECT_NE(big.body.find("router.max_header_bytes"), std::string::npos) << big.body;
  EXPECT_NE(big.body.find("2048"), std::string::npos) << big.body;
  // The same header is fine under the default limit (16 KiB).
  EXPECT_EQ(Http(port(), "GET", "/health", "", 10.0, {{"X-Pad", std::string(4096, 'a')}}).status,
            200);
  // Half a request, then silence: closed after io_timeout_s (1 s) instead of 60 s.
  const double closed = SecondsUntilClosed(knobs, "POST /v1/completions HTTP/1.1\r\nHost: x", 5.0);
  EXPECT_GE(closed, 0.9) << "closed too early";
  EXPECT_LT(closed, 4.0) << "not closed within 4 s (-1: still open)";
  // A stream through the small write queue still completes.
  const StreamResult s = PostStream(
      knobs, "/v1/completions",
      {{"prompt", "Once upon a time"}, {"max_tokens", 64}, {"ignore_eos", true}, {"stream", true}});
  EXPECT_TRUE(s.done) << s.http.error;
  EXPECT_EQ(Http(knobs, "GET", "/health").status, 200);
}

// Big requests do not stall other clients (issue 6): with as many huge /tokenize bodies in
// progress as the router has I/O threads (router.io_threads 2), /health and a small
// completion still answer within a bound. Parsing and tokenizing run on handler threads, not
// on the I/O threads.
TEST_F(RouterHardening, BigRequestsDoNotStallHealth) {
  const int router = cluster_->AddRouter(
      {"--router.io_threads", "2", "--router.max_body_bytes", std::to_string(64 << 20)});
  ASSERT_NE(router, 0) << cluster_->Logs();
  std::string text;
  while (text.size() < (4u << 20)) text += "Once upon a time there was a little dog named Spot. ";
  const std::string big = json{{"prompt", text}}.dump();
  std::atomic<int> heavy_done{0};
  std::vector<double> heavy_s(2, 0);
  std::vector<int> heavy_status(2, 0);
  std::vector<std::thread> heavy;
  for (int i = 0; i < 2; ++i) {
    heavy.emplace_back([&, i] {
      const auto t0 = std::chrono::steady_clock::now();
      heavy_status[i] = Http(router, "POST", "/tokenize", big, 120.0).status;
      heavy_s[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++heavy_done;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the bodies are being handled
  double worst = 0;
  int probes = 0;
  while (heavy_done.load() == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(Http(router, "GET", "/health", "", 10.0).status, 200);
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ++probes;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& t : heavy) t.join();
  EXPECT_EQ(heavy_status[0], 200);
  EXPECT_EQ(heavy_status[1], 200);
  std::printf("big requests: %.1f s and %.1f s; %d /health probes meanwhile, slowest %.3f s\n",
              heavy_s[0], heavy_s[1], probes, worst);
  if (std::min(heavy_s[0], heavy_s[1]) < 1.0) GTEST_SKIP() << "the big requests were too quick";
  EXPECT_GT(probes, 3);
  EXPECT_LT(worst, 1.0) << "/health waited behind big requests";
}

}  // namespace
}  // namespace llm::e2e
