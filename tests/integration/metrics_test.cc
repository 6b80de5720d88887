// GET /metrics: Prometheus text that parses line by line, whose counters and histograms move
// with the traffic sent (exact token counts with ignore_eos; the engine's queue / prefill /
// decode / inference times once per finished request), with the engine's gauges from
// the coordinator (KV cache usage back to 0 once the requests, an aborted one included, are
// done), and unknown paths folded into one label.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

// "name{labels}" -> value, checking the text format line by line.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
  static const std::regex kMeta(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.rfind('#', 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, kMeta)) << line;
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, m, kSample)) << line;
    if (m.size() == 4) out[m[1].str() + m[2].str()] = std::stod(m[3].str());
  }
  return out;
}

std::map<std::string, double> Scrape(int port) {
  const HttpResult r = Http(port, "GET", "/metrics", "", 10.0);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.content_type.find("text/plain"), std::string::npos) << r.content_type;
  return ParseMetrics(r.body);
}

TEST(Metrics, CountersAndHistogramsFollowTheTraffic) {
  if (!std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing ../shared/" << Cluster::kModel;
  }
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  const std::string m = "{model_name=\"stories260K\"}";
  const std::string up = "{model_name=\"stories260K\",upstream=\"" + cluster.upstream() + "\"}";
  auto before = Scrape(cluster.port());
  EXPECT_EQ(before["llmserve:generation_tokens_total" + m], 0);
  EXPECT_EQ(before["llmserve:upstream_up" + up], 1);
  EXPECT_EQ(before["llmserve:num_requests_running" + up], 0);
  // vLLM's cache_config_info: stories260K is a float32 model, so auto keeps a float32 cache.
  const std::string cache_info =
      "llmserve:cache_config_info{model_name=\"stories260K\",upstream=\"" + cluster.upstream() +
      "\",block_size=\"16\",cache_dtype=\"float32\"";
  const auto info = before.lower_bound(cache_info);
  ASSERT_NE(info, before.end());
  EXPECT_EQ(info->first.rfind(cache_info, 0), 0u) << info->first;
  EXPECT_EQ(info->second, 1);

  for (int i = 0; i < 2; ++i) {
    const HttpResult r = Post(cluster.port(), "/v1/completions",
                              {{"prompt", "Once upon a time"},
                               {"max_tokens", 5},
                               {"ignore_eos", true},
                               {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const StreamResult s = PostStream(cluster.port(), "/v1/chat/completions",
                                    {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                     {"max_tokens", 7},
                                     {"ignore_eos", true},
                                     {"stream", true}});
  ASSERT_EQ(s.http.status, 200);
  EXPECT_EQ(Http(cluster.port(), "GET", "/no/such/path", "", 5.0).status, 404);
  EXPECT_EQ(Post(cluster.port(), "/v1/completions", {{"prompt", "x"}, {"n", 0}}).status, 400);

  auto after = Scrape(cluster.port());
  EXPECT_EQ(after["llmserve:generation_tokens_total" + m], 5 + 5 + 7);
  EXPECT_EQ(after["llmserve:request_success_total{model_name=\"stories260K\",finished_reason="
                  "\"length\"}"],
            3);
  EXPECT_EQ(after["llmserve:http_requests_total{model_name=\"stories260K\",route=\"/v1/"
                  "completions\",status=\"200\"}"],
            2);
  EXPECT_EQ(after["llmserve:http_requests_total{model_name=\"stories260K\",route=\"/v1/"
                  "completions\",status=\"400\"}"],
            1);
  EXPECT_EQ(after["llmserve:http_requests_total{model_name=\"stories260K\",route=\"other\","
                  "status=\"404\"}"],
            1);
  EXPECT_EQ(after["llmserve:time_to_first_token_seconds_count" + m], 3);
  EXPECT_EQ(after["llmserve:e2e_request_latency_seconds_count" + m], 3);
  EXPECT_EQ(after["llmserve:time_to_first_token_seconds_bucket{model_name=\"stories260K\",le="
                  "\"+Inf\"}"],
            3);
  // The engine's timings of each finished request, from the coordinator's last message.
  for (const char* phase : {"queue", "prefill", "decode", "inference"}) {
    const std::string name = std::string("llmserve:request_") + phase + "_time_seconds";
    EXPECT_EQ(before[name + "_count" + m], 0) << name;
    EXPECT_EQ(after[name + "_count" + m], 3) << name;
    EXPECT_EQ(after[name + "_bucket{model_name=\"stories260K\",le=\"+Inf\"}"], 3) << name;
    EXPECT_GE(after[name + "_sum" + m], 0) << name;
  }
  EXPECT_GT(after["llmserve:request_decode_time_seconds_sum" + m], 0);
  EXPECT_LE(after["llmserve:request_inference_time_seconds_sum" + m],
            after["llmserve:e2e_request_latency_seconds_sum" + m]);
  EXPECT_GT(after["llmserve:prompt_tokens_total" + m], 5);
  EXPECT_EQ(after["llmserve:kv_cache_usage_perc" + up], 0);

  // A stream the client abandons: counted as abort, and its KV blocks come back.
  {
    HttpClient client(cluster.port());
    ASSERT_TRUE(client.Send("POST", "/v1/completions",
                            json({{"prompt", "Once upon a time"},
                                  {"max_tokens", 500},
                                  {"ignore_eos", true},
                                  {"stream", true}})
                                .dump()));
    int events = 0;
    client.ReadEvents([&](const std::string&) { return ++events < 2; });  // then hang up
  }
  ASSERT_TRUE(cluster.WaitAllBlocksFree(20.0));
  // Counted once: as "abort" when the hang-up cut it (the usual case), as "length" on a machine
  // fast enough to finish 400 tokens before the router noticed.
  const std::string reason = "llmserve:request_success_total{model_name=\"stories260K\",";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto now = Scrape(cluster.port());
        return now[reason + "finished_reason=\"abort\"}"] +
                   now[reason + "finished_reason=\"length\"}"] ==
               4;
      },
      10.0));
  EXPECT_EQ(Scrape(cluster.port())["llmserve:kv_cache_usage_perc" + up], 0);
}

}  // namespace
}  // namespace llm::e2e
