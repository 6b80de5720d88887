// SSE streams start at once (issue 6): the response headers, and for chat the first chunk with
// the assistant role, go out before the first token, so a proxy with an idle timeout does not
// cut a request that waits upstream. An error before any token then arrives as a last
// `data: {"error": ...}` event followed by `data: [DONE]`; errors known before the upstream
// call (400, 401, 429, no healthy coordinator) stay plain HTTP responses.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

json ChatStream(int max_tokens) {
  return {{"model", "stories260K"},
          {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", true}};
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The coordinator is stopped (SIGSTOP), so no token can come: the headers and the role chunk
// must arrive anyway, and the stream completes once the coordinator continues.
TEST(RouterStreamStart, HeadersAndRoleChunkComeBeforeTheFirstToken) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  ASSERT_EQ(Http(cluster.port(), "GET", "/health").status, 200);
  ASSERT_EQ(kill(cluster.worker().pid(), SIGSTOP), 0);
  const auto sent = std::chrono::steady_clock::now();
  HttpClient c(cluster.port(), 10.0);
  ASSERT_TRUE(c.Send("POST", "/v1/chat/completions", ChatStream(24).dump()));
  double first_event_s = -1;
  std::vector<json> events;
  bool done = false;
  const HttpResult r = c.ReadEvents([&](const std::string& e) {
    if (e == "[DONE]") {
      done = true;
      return false;
    }
    events.push_back(json::parse(e, nullptr, false));
    if (events.size() == 1) {
      first_event_s = SecondsSince(sent);
      kill(cluster.worker().pid(), SIGCONT);  // now let the tokens come
    }
    return true;
  });
  kill(cluster.worker().pid(), SIGCONT);
  ASSERT_EQ(r.status, 200) << r.error << r.body << cluster.Logs();
  EXPECT_EQ(r.content_type, "text/event-stream");
  ASSERT_FALSE(events.empty()) << r.error;
  EXPECT_GE(first_event_s, 0.0);
  EXPECT_LT(first_event_s, 3.0) << "the role chunk waited for the coordinator";
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant") << events[0];
  EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], "") << events[0];
  EXPECT_TRUE(done) << r.error << cluster.Logs();
  EXPECT_FALSE(events.back()["choices"][0]["finish_reason"].is_null()) << events.back();
}

// What arrives on a fresh connection within `timeout_s` after sending `request` (raw socket
// with poll: the harness's client blocks until a whole event).
std::string ReceivedWithin(int port, const std::string& request, double timeout_s) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    const auto end = ChildProcess::Deadline(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return got;
}

// A completions stream has no role chunk: its headers alone come at once.
TEST(RouterStreamStart, CompletionHeadersComeBeforeTheFirstToken) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  ASSERT_EQ(kill(cluster.worker().pid(), SIGSTOP), 0);
  const std::string body =
      json({{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"stream", true}}).dump();
  const std::string got =
      ReceivedWithin(cluster.port(),
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body,
                     2.0);
  kill(cluster.worker().pid(), SIGCONT);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream"), std::string::npos) << got;
  EXPECT_EQ(got.find("data:"), std::string::npos) << got;  // no token while stopped
}

// A draining coordinator refuses the call (UNAVAILABLE) after the stream started: the client
// gets the role chunk, then an error event and [DONE]. The router is started with a long
// health-check interval so that it has not yet noticed the drain.
TEST(RouterStreamStart, UpstreamErrorBeforeAnyTokenIsALastErrorEvent) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const int port = cluster.AddRouter({"--router.health_check_interval_ms", "600000"});
  ASSERT_NE(port, 0) << cluster.Logs();
  ASSERT_TRUE(cluster.Drain(true));
  const StreamResult s = PostStream(port, "/v1/chat/completions", ChatStream(8));
  ASSERT_EQ(s.http.status, 200) << s.http.body;
  EXPECT_TRUE(s.done);
  ASSERT_EQ(s.events.size(), 2u) << s.http.body;
  EXPECT_EQ(s.events[0]["choices"][0]["delta"]["role"], "assistant");
  ASSERT_TRUE(s.events[1].contains("error")) << s.events[1];
  EXPECT_EQ(s.events[1]["error"]["type"], "service_unavailable_error") << s.events[1];
  EXPECT_NE(s.events[1]["error"]["message"].get<std::string>().find("draining"), std::string::npos)
      << s.events[1];
  // Without streaming the same refusal is a plain 503.
  json plain = ChatStream(8);
  plain["stream"] = false;
  const HttpResult r = Post(port, "/v1/chat/completions", plain);
  EXPECT_EQ(r.status, 503) << r.body;
  // Validation errors are known before any upstream call: still plain 400s.
  json bad = ChatStream(8);
  bad["temperature"] = -1;
  const HttpResult invalid = Post(port, "/v1/chat/completions", bad);
  EXPECT_EQ(invalid.status, 400) << invalid.body;
  EXPECT_EQ(invalid.content_type, "application/json");
  ASSERT_TRUE(cluster.Drain(false));
}

}  // namespace
}  // namespace llm::e2e
