// deploy/grafana/llmserve-dashboard.json queries only series the router exports: every
// `llmserve:...` name in a panel expression (or a template variable's query) must be a sample
// name in the text RouterMetrics::Render produces (a histogram's _bucket/_sum/_count, a
// counter's _total exactly as exported), so a typo in the dashboard fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "router/metrics.h"

namespace llm::router {
namespace {

// The engine's timing histograms (queue, prefill, decode, inference): they need their own
// panels, not only an exported name.
const std::set<std::string> kEngineTimingHistograms = {
    "llmserve:request_queue_time_seconds",
    "llmserve:request_prefill_time_seconds",
    "llmserve:request_decode_time_seconds",
};

const char kDashboardPath[] = LLM_SOURCE_DIR "/deploy/grafana/llmserve-dashboard.json";

// Every string under an "expr" key (panel targets) or a "query"/"definition" key (template
// variables), anywhere in the dashboard.
void CollectQueries(const nlohmann::json& j, std::vector<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (value.is_string() && (key == "expr" || key == "query" || key == "definition")) {
        out->push_back(value.get<std::string>());
      } else {
        CollectQueries(value, out);
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) CollectQueries(v, out);
  }
}

// The metric names in the queries. Digits are allowed after the prefix ("e2e_...").
std::set<std::string> MetricNames(const std::vector<std::string>& queries) {
  static const std::regex kName("llmserve:[a-z0-9_]+");
  std::set<std::string> names;
  for (const auto& q : queries) {
    for (auto it = std::sregex_iterator(q.begin(), q.end(), kName); it != std::sregex_iterator();
         ++it) {
      names.insert(it->str());
    }
  }
  return names;
}

// Sample names of an exposition text (the part of each non-comment line before '{' or ' ').
std::set<std::string> SampleNames(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

// The dashboard's metric names that the exposition lacks.
std::vector<std::string> Missing(const std::set<std::string>& used, const std::string& exposition) {
  const std::set<std::string> exported = SampleNames(exposition);
  std::vector<std::string> missing;
  for (const auto& name : used) {
    if (exported.count(name) == 0) missing.push_back(name);
  }
  return missing;
}

// A registry that has seen one request and one answering upstream, so that every family has
// samples (the labelled counters only have series once something was counted).
std::string RenderAfterTraffic() {
  RouterMetrics metrics("stories260K");
  metrics.CountResponse("/v1/completions", 200);
  metrics.CountResponse("/v1/chat/completions", 429);
  RequestRecord r;
  r.finish_reasons = {"stop", "length"};
  r.prompt_tokens = 5;
  r.generation_tokens = 32;
  r.ttft_s = 0.03;
  r.tpot_s = 0.01;
  r.e2e_s = 0.4;
  metrics.ObserveRequest(r);
  v1::RequestTimings timings;
  timings.set_queue_s(0.01);
  timings.set_prefill_s(0.02);
  timings.set_decode_s(0.3);
  timings.set_inference_s(0.32);
  metrics.ObserveEngineTimings(timings);
  UpstreamStats up;
  up.address = "127.0.0.1:50051";
  up.ok = true;
  up.stats.set_running_sequences(1);
  up.stats.set_waiting_sequences(2);
  up.stats.set_kv_blocks_total(100);
  up.stats.set_kv_blocks_free(40);
  up.stats.set_preemptions_total(3);
  up.stats.set_prefix_cache_hit_tokens_total(16);
  up.stats.set_prefix_cache_queried_tokens_total(64);
  up.stats.set_prefill_tokens_computed_total(48);
  return metrics.Render({up}, 3, 1);
}

nlohmann::json LoadDashboard() {
  std::ifstream in(kDashboardPath);
  EXPECT_TRUE(in.good()) << "cannot read " << kDashboardPath;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST(GrafanaDashboard, EveryQueriedMetricIsExported) {
  const nlohmann::json dashboard = LoadDashboard();
  ASSERT_FALSE(dashboard.is_discarded()) << kDashboardPath << " is not valid JSON";
  std::vector<std::string> queries;
  CollectQueries(dashboard, &queries);
  const std::set<std::string> used = MetricNames(queries);
  // Not vacuous: the panels of the brief are there.
  ASSERT_GE(queries.size(), 30u);
  ASSERT_GE(used.size(), 20u);

  const std::string exposition = RenderAfterTraffic();
  EXPECT_EQ(Missing(used, exposition), std::vector<std::string>{})
      << "the dashboard queries metrics that RouterMetrics::Render does not export";

  for (const auto& family : kEngineTimingHistograms) {
    EXPECT_EQ(used.count(family + "_bucket"), 1u) << "no quantile panel for " << family;
  }
}

// Every panel but rows has at least one target with a non-empty expression.
TEST(GrafanaDashboard, EveryPanelHasAQuery) {
  const nlohmann::json dashboard = LoadDashboard();
  ASSERT_TRUE(dashboard.contains("panels"));
  int panels = 0;
  for (const auto& p : dashboard["panels"]) {
    if (p.value("type", "") == "row") continue;
    ++panels;
    ASSERT_TRUE(p.contains("targets")) << p.value("title", "?");
    ASSERT_FALSE(p["targets"].empty()) << p.value("title", "?");
    for (const auto& t : p["targets"]) {
      EXPECT_FALSE(t.value("expr", "").empty()) << p.value("title", "?");
    }
  }
  EXPECT_GE(panels, 15);
}

// The check itself can fail: a misspelt name, a histogram without _bucket and a counter without
// _total are reported; only the stats branch's histogram series are let through.
TEST(GrafanaDashboard, CheckCatchesTypos) {
  const nlohmann::json bad = {
      {"panels",
       {{{"targets",
          {{{"expr", "sum(rate(llmserve:generation_token_total[5m]))"}},
           {{"expr", "histogram_quantile(0.9, rate(llmserve:time_to_first_token_seconds[5m]))"}},
           {{"expr", "rate(llmserve:http_requests[5m])"}},
           {{"expr", "rate(llmserve:e2e_request_latency_seconds_count[5m])"}},
           {{"expr", "rate(llmserve:request_queue_time_seconds_bucket[5m])"}},
           {{"expr", "rate(llmserve:request_queue_time_second_bucket[5m])"}}}}}}}};
  std::vector<std::string> queries;
  CollectQueries(bad, &queries);
  EXPECT_EQ(Missing(MetricNames(queries), RenderAfterTraffic()),
            (std::vector<std::string>{"llmserve:generation_token_total", "llmserve:http_requests",
                                      "llmserve:request_queue_time_second_bucket",
                                      "llmserve:time_to_first_token_seconds"}));
}

}  // namespace
}  // namespace llm::router
