// Router SIGTERM/SIGINT drain (issue 6): the listening socket closes (new connections are
// refused), requests arriving on open keep-alive connections get 503 "shutting down", and
// requests in flight, streams included, finish within router.shutdown_grace_s; then what
// remains is cancelled and the router exits 0. A second signal cancels at once. The
// coordinator is SIGSTOPped to hold a stream in flight while the router drains.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

json LongStream() {
  return {{"model", "stories260K"},
          {"prompt", "Once upon a time"},
          {"max_tokens", 400},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

bool ExitedZero(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(RouterDrain, StreamInFlightSurvivesSigtermAndCompletes) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster({}, {"--router.shutdown_grace_s", "30"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  // An idle keep-alive connection opened before the signal.
  HttpClient idle(cluster.port());
  ASSERT_TRUE(idle.Send("GET", "/health", ""));
  ASSERT_EQ(idle.Receive().status, 200);

  HttpClient c(cluster.port());
  ASSERT_TRUE(c.Send("POST", "/v1/completions", LongStream().dump()));
  int events = 0;
  bool done = false;
  json last;
  HttpResult during_drain, fresh_result;
  bool fresh_connected = true;
  bool router_alive_while_draining = false;
  const HttpResult r = c.ReadEvents([&](const std::string& e) {
    if (e == "[DONE]") {
      done = true;
      return false;
    }
    last = json::parse(e, nullptr, false);
    if (++events == 2) {
      // Hold the stream mid-flight, then ask the router to stop.
      kill(cluster.worker().pid(), SIGSTOP);
      cluster.router().Signal(SIGTERM);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      // A new request on the open keep-alive connection: 503 shutting down.
      if (idle.Send("POST", "/v1/completions", LongStream().dump())) during_drain = idle.Receive();
      // A new connection: refused (or, at worst, a 503).
      HttpClient fresh(cluster.port(), 5.0);
      fresh_connected = fresh.ok() && fresh.Send("GET", "/health", "");
      if (fresh_connected) fresh_result = fresh.Receive();
      router_alive_while_draining = !cluster.router().Exited();
      kill(cluster.worker().pid(), SIGCONT);
    }
    return true;
  });
  kill(cluster.worker().pid(), SIGCONT);
  EXPECT_TRUE(router_alive_while_draining) << cluster.Logs();
  EXPECT_EQ(during_drain.status, 503) << during_drain.error << during_drain.body;
  EXPECT_NE(during_drain.body.find("shutting down"), std::string::npos) << during_drain.body;
  EXPECT_TRUE(!fresh_connected || fresh_result.status == 503 || fresh_result.status == 0)
      << fresh_result.status << " " << fresh_result.body;
  // The stream in flight completed in full.
  EXPECT_TRUE(done) << r.error << cluster.Logs();
  ASSERT_TRUE(last.contains("usage")) << last;
  EXPECT_EQ(last["usage"]["completion_tokens"], 400) << last;
  // Then the router exits by itself, with 0.
  ASSERT_TRUE(cluster.router().WaitExit(10.0)) << cluster.Logs();
  EXPECT_TRUE(ExitedZero(*cluster.router().exit_status())) << cluster.Logs();
  EXPECT_NE(cluster.router().Log().find("drained"), std::string::npos) << cluster.Logs();
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
}

// Past the grace period the router cancels what is still in flight and exits 0.
TEST(RouterDrain, GraceExpiryCancelsWhatRemainsAndExitsZero) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster({}, {"--router.shutdown_grace_s", "1"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  HttpClient c(cluster.port());
  ASSERT_TRUE(c.Send("POST", "/v1/completions", LongStream().dump()));
  int events = 0;
  double exit_s = -1;
  const HttpResult r = c.ReadEvents([&](const std::string&) {
    if (++events == 2) {
      kill(cluster.worker().pid(), SIGSTOP);  // the stream cannot finish now
      const auto t0 = std::chrono::steady_clock::now();
      cluster.router().Signal(SIGTERM);
      if (cluster.router().WaitExit(10.0)) {
        exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      kill(cluster.worker().pid(), SIGCONT);
    }
    return true;
  });
  kill(cluster.worker().pid(), SIGCONT);
  ASSERT_GE(exit_s, 0.0) << "the router did not exit after its grace period\n" << cluster.Logs();
  EXPECT_GE(exit_s, 0.9);
  EXPECT_LT(exit_s, 8.0);
  EXPECT_TRUE(ExitedZero(*cluster.router().exit_status())) << cluster.Logs();
  EXPECT_NE(cluster.router().Log().find("still busy after 1 s"), std::string::npos)
      << cluster.Logs();
  EXPECT_FALSE(r.error.empty());  // the connection was cut before [DONE]
  // The cancelled request is aborted upstream once the coordinator runs again.
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
}

// A second signal does not wait for the grace period.
TEST(RouterDrain, SecondSignalStopsAtOnce) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster({}, {"--router.shutdown_grace_s", "60"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  HttpClient c(cluster.port());
  ASSERT_TRUE(c.Send("POST", "/v1/completions", LongStream().dump()));
  int events = 0;
  double exit_s = -1;
  c.ReadEvents([&](const std::string&) {
    if (++events == 2) {
      kill(cluster.worker().pid(), SIGSTOP);
      cluster.router().Signal(SIGTERM);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      EXPECT_FALSE(cluster.router().Exited()) << "the first signal did not drain";
      const auto t0 = std::chrono::steady_clock::now();
      cluster.router().Signal(SIGINT);
      if (cluster.router().WaitExit(10.0)) {
        exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      kill(cluster.worker().pid(), SIGCONT);
    }
    return true;
  });
  kill(cluster.worker().pid(), SIGCONT);
  ASSERT_GE(exit_s, 0.0) << cluster.Logs();
  EXPECT_LT(exit_s, 3.0);
  EXPECT_TRUE(ExitedZero(*cluster.router().exit_status())) << cluster.Logs();
  EXPECT_NE(cluster.router().Log().find("second signal"), std::string::npos) << cluster.Logs();
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0)) << cluster.Stats().DebugString();
}

}  // namespace
}  // namespace llm::e2e
