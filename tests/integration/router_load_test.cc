// End to end under load and failure: 64 concurrent streams, clients that disconnect
// mid-stream (their requests are aborted upstream and every KV block is freed), two routers
// over one coordinator, no coordinator and a draining coordinator (SIGTERM: router_drain_test).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

json StreamBody(int max_tokens, int i) {
  return {{"model", "stories260K"},
          {"prompt", i % 2 ? "Once upon a time" : "The little dog"},
          {"max_tokens", max_tokens},
          {"temperature", 0.7},
          {"seed", i},
          {"ignore_eos", true},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

TEST(RouterLoad, SixtyFourConcurrentStreamsComplete) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  constexpr int kStreams = 64;
  constexpr int kTokens = 24;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      results[i] = PostStream(cluster.port(), "/v1/completions", StreamBody(kTokens, i));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    const StreamResult& r = results[i];
    ASSERT_EQ(r.http.status, 200) << i << ": " << r.http.error << r.http.body;
    ASSERT_TRUE(r.done) << i;
    ASSERT_FALSE(r.events.empty());
    EXPECT_EQ(r.events.back()["usage"]["completion_tokens"], kTokens) << i;
    EXPECT_EQ(r.events.back()["choices"].size(), 0u);
  }
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
}

TEST(RouterLoad, DisconnectedClientsAreAbortedAndFreeTheirBlocks) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  constexpr int kStreams = 16;
  constexpr int kTokens = 400;
  const int64_t generated_before = cluster.Stats().generated_tokens_total();
  std::atomic<int> aborted{0};
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      if (i % 2 == 0) {
        results[i] = PostStream(cluster.port(), "/v1/completions", StreamBody(kTokens, i));
        return;
      }
      HttpClient c(cluster.port());
      if (!c.Send("POST", "/v1/completions", StreamBody(kTokens, i).dump())) return;
      int events = 0;
      c.ReadEvents([&](const std::string&) { return ++events < 3; });
      c.Close();  // mid-stream
      ++aborted;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(aborted.load(), kStreams / 2);
  for (int i = 0; i < kStreams; i += 2) {
    ASSERT_TRUE(results[i].done) << i << results[i].http.error;
    EXPECT_EQ(results[i].events.back()["usage"]["completion_tokens"], kTokens);
  }
  ASSERT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
  const int64_t generated = cluster.Stats().generated_tokens_total() - generated_before;
  EXPECT_LT(generated, int64_t{kStreams} * kTokens) << "the aborted requests ran to the end";
  // The server still serves.
  const StreamResult after = PostStream(cluster.port(), "/v1/completions", StreamBody(8, 1));
  EXPECT_TRUE(after.done);
}

TEST(RouterLoad, NonStreamClientThatLeavesIsAborted) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  constexpr int kRequests = 8;
  constexpr int kTokens = 500;
  const int64_t generated_before = cluster.Stats().generated_tokens_total();
  for (int i = 0; i < kRequests; ++i) {
    json body = StreamBody(kTokens, i);
    body["stream"] = false;
    body.erase("stream_options");
    HttpClient c(cluster.port());
    ASSERT_TRUE(c.Send("POST", "/v1/completions", body.dump()));
    c.Close();  // gone before the answer
  }
  ASSERT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
  const int64_t generated = cluster.Stats().generated_tokens_total() - generated_before;
  EXPECT_LT(generated, int64_t{kRequests} * kTokens) << "the requests ran to the end";
  EXPECT_EQ(Http(cluster.port(), "GET", "/health").status, 200);
}

// A request followed by the first bytes of a pipelined second one, then a hang-up (issue 6):
// the buffered bytes must not hide the disconnect, so the generation is aborted upstream.
TEST(RouterLoad, PipelinedRequestThenHangUpIsAborted) {
  LLM_E2E_REQUIRE_SHARED();
  // stories260K writes 480 tokens in well under a second, faster than a loaded machine may
  // schedule the router: the coordinator is held with SIGSTOP while the client sends and hangs
  // up, so the generation cannot finish before the router has seen the hang-up. The router's
  // health check is slowed so that it does not mark the held coordinator unhealthy.
  Cluster cluster({}, {"--router.health_check_interval_ms", "60000"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  constexpr int kTokens = 480;
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "non-stream");
    const v1::StatsResponse before = cluster.Stats();
    json body = StreamBody(kTokens, 1);
    body["stream"] = stream;
    body.erase("stream_options");
    const std::string text = body.dump();
    const std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(text.size()) + "\r\n\r\n" + text;
    const std::string next_start = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConte";
    cluster.worker().Signal(SIGSTOP);
    {
      HttpClient c(cluster.port());
      ASSERT_TRUE(c.SendRaw(request + next_start));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the call is on its way
      c.Close();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the router sees the hang-up
    cluster.worker().Signal(SIGCONT);
    EXPECT_TRUE(WaitFor(
        [&] {
          const v1::StatsResponse s = cluster.Stats();
          return s.running_sequences() == 0 && s.waiting_sequences() == 0;
        },
        10.0))
        << cluster.Stats().DebugString();
    ASSERT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
    const v1::StatsResponse after = cluster.Stats();
    // Either the coordinator aborted the request, or gRPC dropped the cancelled call before it
    // reached the engine; never were all the tokens generated for a client that had left.
    EXPECT_TRUE(after.aborted_total() > before.aborted_total() ||
                after.requests_total() == before.requests_total())
        << after.DebugString();
    EXPECT_LT(after.generated_tokens_total() - before.generated_tokens_total(), kTokens)
        << "all tokens were generated for a client that had left";
  }
  EXPECT_EQ(Http(cluster.port(), "GET", "/health").status, 200);
}

TEST(RouterLoad, CoordinatorLostMidStreamEndsTheStreamWithAnError) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  HttpClient c(cluster.port());
  ASSERT_TRUE(c.Send("POST", "/v1/completions", StreamBody(480, 1).dump()));
  int events = 0;
  bool killed = false;
  bool done = false;
  json last;
  const HttpResult r = c.ReadEvents([&](const std::string& e) {
    if (e == "[DONE]") {
      done = true;
      return false;
    }
    last = json::parse(e, nullptr, false);
    if (++events == 2) {
      cluster.worker().Stop(SIGKILL, 5.0);
      killed = true;
    }
    return true;
  });
  ASSERT_TRUE(killed) << r.error << cluster.Logs();
  if (last.contains("usage") && last["usage"].is_object()) {
    GTEST_SKIP() << "the stream finished before the coordinator was killed";
  }
  EXPECT_TRUE(done) << r.error;
  ASSERT_TRUE(last.contains("error")) << last;
  EXPECT_TRUE(last["error"]["message"].is_string());
  EXPECT_TRUE(WaitFor([&] { return Http(cluster.port(), "GET", "/health").status == 503; }, 10));
  const HttpResult after = Post(cluster.port(), "/v1/completions", StreamBody(4, 1));
  EXPECT_EQ(after.status, 503) << after.body;
}

TEST(RouterLoad, TwoRoutersOverOneCoordinator) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const int second = cluster.AddRouter();
  ASSERT_NE(second, 0) << cluster.Logs();
  json body = StreamBody(16, 3);
  body["stream"] = false;
  body.erase("stream_options");
  const HttpResult a = Post(cluster.port(), "/v1/completions", body);
  const HttpResult b = Post(second, "/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(a.Json()["choices"], b.Json()["choices"]);  // same seed, same text
}

TEST(RouterLoad, NoCoordinatorAndDrainingGive503) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const int orphan = cluster.AddRouter({}, "127.0.0.1:" + std::to_string(FreePort()));
  ASSERT_NE(orphan, 0) << cluster.Logs();
  json body = StreamBody(4, 1);
  body.erase("stream_options");
  body["stream"] = false;
  EXPECT_EQ(Http(orphan, "GET", "/health").status, 503);
  const HttpResult none = Post(orphan, "/v1/completions", body);
  EXPECT_EQ(none.status, 503) << none.body;
  EXPECT_TRUE(none.Json().contains("error"));

  ASSERT_TRUE(cluster.Drain(true));
  EXPECT_TRUE(WaitFor([&] { return Http(cluster.port(), "GET", "/health").status == 503; }, 10));
  const HttpResult draining = Post(cluster.port(), "/v1/completions", body);
  EXPECT_EQ(draining.status, 503) << draining.body;
  ASSERT_TRUE(cluster.Drain(false));
  EXPECT_TRUE(
      WaitFor([&] { return Post(cluster.port(), "/v1/completions", body).status == 200; }, 10));
}

}  // namespace
}  // namespace llm::e2e
