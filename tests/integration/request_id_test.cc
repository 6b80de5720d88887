// Request ids and request log lines (issue 11): a client's X-Request-Id comes back in the
// response header, names the completion ("chatcmpl-<id>"), sits in error JSON, and appears in
// the request's log line on the router and on the coordinator, as text and as JSON lines.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

const json kChat = {{"model", "stories260K"},
                    {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                    {"max_tokens", 4}};

bool IsHex32(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The JSON objects of a JSON-lines log; `bad` counts the lines that are not JSON objects.
std::vector<json> JsonLines(const std::string& log, int* bad) {
  std::vector<json> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) {
      ++*bad;
      continue;
    }
    out.push_back(std::move(j));
  }
  return out;
}

TEST(RequestId, ClientIdIsEchoedLoggedAndCarriedToTheCoordinator) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();

  const HttpResult r = Http(cluster.port(), "POST", "/v1/chat/completions", kChat.dump(), 60.0,
                            {{"X-Request-Id", "trace-7f3a"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("x-request-id"), "trace-7f3a");
  EXPECT_EQ(r.Json()["id"], "chatcmpl-trace-7f3a");

  // One finished-request line on each process, naming the id.
  ASSERT_TRUE(WaitFor(
      [&] {
        return cluster.router().Log().find("request finished request_id=trace-7f3a") !=
                   std::string::npos &&
               cluster.worker().Log().find("request finished request_id=trace-7f3a") !=
                   std::string::npos;
      },
      10.0))
      << cluster.Logs();
  const std::string router_log = cluster.router().Log();
  const size_t at = router_log.find("request finished request_id=trace-7f3a");
  const std::string line = router_log.substr(at, router_log.find('\n', at) - at);
  for (const char* field : {"status=200", "prompt_tokens=", "completion_tokens=4",
                            "ttft_ms=", "total_ms=", "finish_reason=length", "model=stories260K"}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " in: " << line;
  }

  // Streams carry the header too.
  json stream_body = kChat;
  stream_body["stream"] = true;
  HttpClient c(cluster.port(), 60.0);
  ASSERT_TRUE(c.Send("POST", "/v1/chat/completions", stream_body.dump(), true,
                     {{"X-Request-Id", "stream-1"}}));
  std::vector<std::string> chunk_ids;
  const HttpResult streamed = c.ReadEvents([&](const std::string& e) {
    if (e == "[DONE]") return false;
    chunk_ids.push_back(json::parse(e, nullptr, false).value("id", ""));
    return true;
  });
  EXPECT_EQ(streamed.status, 200);
  ASSERT_FALSE(chunk_ids.empty());
  for (const std::string& id : chunk_ids) EXPECT_EQ(id, "chatcmpl-stream-1");
}

TEST(RequestId, GeneratedWhenMissingOrUnusableAndInErrorJson) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();

  const HttpResult plain = Post(cluster.port(), "/v1/chat/completions", kChat);
  ASSERT_EQ(plain.status, 200) << plain.body;
  const std::string id = plain.Header("x-request-id");
  EXPECT_TRUE(IsHex32(id)) << id;
  EXPECT_EQ(plain.Json()["id"], "chatcmpl-" + id);

  // Too long, or with a space: replaced (the id reaches every log line).
  for (const std::string& bad : {std::string(129, 'a'), std::string("two words")}) {
    const HttpResult r = Http(cluster.port(), "POST", "/v1/chat/completions", kChat.dump(), 60.0,
                              {{"X-Request-Id", bad}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(IsHex32(r.Header("x-request-id"))) << r.Header("x-request-id");
  }

  // An error answer names the id in its JSON and is logged with the reason.
  json bad_body = kChat;
  bad_body["temperature"] = -1;
  const HttpResult err = Http(cluster.port(), "POST", "/v1/chat/completions", bad_body.dump(), 30.0,
                              {{"X-Request-Id", "bad-temp-1"}});
  ASSERT_EQ(err.status, 400) << err.body;
  EXPECT_EQ(err.Header("x-request-id"), "bad-temp-1");
  EXPECT_EQ(err.Json()["error"]["request_id"], "bad-temp-1") << err.body;
  ASSERT_TRUE(WaitFor(
      [&] { return cluster.router().Log().find("request_id=bad-temp-1") != std::string::npos; },
      10.0))
      << cluster.Logs();
  EXPECT_NE(cluster.router().Log().find("status=400"), std::string::npos) << cluster.Logs();

  // Non-generation routes answer with an id too.
  EXPECT_TRUE(IsHex32(Http(cluster.port(), "GET", "/v1/models").Header("x-request-id")));
}

TEST(RequestId, JsonLogLinesOnEveryProcess) {
  LLM_E2E_REQUIRE_SHARED();
  Cluster cluster({"--log.format", "json"}, {"--log.format", "json"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const HttpResult r = Http(cluster.port(), "POST", "/v1/chat/completions", kChat.dump(), 60.0,
                            {{"X-Request-Id", "json-\"quoted\"-id"}});
  ASSERT_EQ(r.status, 200) << r.body;

  auto finished_line = [](const std::vector<json>& lines) -> json {
    for (const json& j : lines) {
      if (j.value("msg", "") == "request finished" &&
          j.value("request_id", "") == "json-\"quoted\"-id") {
        return j;
      }
    }
    return json();
  };
  json router_line, worker_line;
  int router_bad = 0, worker_bad = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        router_bad = worker_bad = 0;
        router_line = finished_line(JsonLines(cluster.router().Log(), &router_bad));
        worker_line = finished_line(JsonLines(cluster.worker().Log(), &worker_bad));
        return router_line.is_object() && worker_line.is_object();
      },
      10.0))
      << cluster.Logs();
  // Every line of both logs is one JSON object (start-up lines included).
  EXPECT_EQ(router_bad, 0) << cluster.router().Log();
  EXPECT_EQ(worker_bad, 0) << cluster.worker().Log();
  EXPECT_EQ(router_line["process"], "router");
  EXPECT_EQ(router_line["level"], "info");
  EXPECT_EQ(router_line["status"], 200);
  EXPECT_EQ(router_line["completion_tokens"], 4);
  EXPECT_EQ(router_line["finish_reason"], "length");
  EXPECT_TRUE(router_line["time"].is_string());
  EXPECT_EQ(worker_line["process"], "worker");
  EXPECT_EQ(worker_line["completion_tokens"], 4);
  EXPECT_EQ(worker_line["finish_reason"], "max_tokens");
}

}  // namespace
}  // namespace llm::e2e
