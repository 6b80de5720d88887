#include "router/metrics.h"

#include <algorithm>
#include <cstdio>

namespace llm::router {
namespace {

// vLLM's buckets (seconds). kE2eBuckets is vLLM's request_latency_buckets, which it also uses
// for the queue, prefill, decode and inference times.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTpotBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kE2eBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                         5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                         60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// A label value with \, " and newlines escaped (text format 0.0.4).
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Header(std::string* out, const std::string& name, const char* type, const char* help) {
  out->append("# HELP ").append(name).append(" ").append(help).append("\n");
  out->append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void Sample(std::string* out, const std::string& name, const std::string& labels, double v) {
  out->append(name).append("{").append(labels).append("} ").append(Num(v)).append("\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                       bounds_.begin());  // first bound >= v ("le")
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Write(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    Sample(out, name + "_bucket", labels + ",le=\"" + le + "\"", static_cast<double>(cumulative));
  }
  Sample(out, name + "_sum", labels, sum_);
  Sample(out, name + "_count", labels, static_cast<double>(count_));
}

RouterMetrics::RouterMetrics(std::string model_name)
    : model_(std::move(model_name)),
      ttft_(kTtftBuckets),
      tpot_(kTpotBuckets),
      e2e_(kE2eBuckets),
      queue_(kE2eBuckets),
      prefill_(kE2eBuckets),
      decode_(kE2eBuckets),
      inference_(kE2eBuckets) {}

void RouterMetrics::CountResponse(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{route, status}];
}

void RouterMetrics::ObserveRequest(const RequestRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : r.finish_reasons) ++finished_[f];
  prompt_tokens_ += static_cast<uint64_t>(std::max<int64_t>(0, r.prompt_tokens));
  generation_tokens_ += static_cast<uint64_t>(std::max<int64_t>(0, r.generation_tokens));
  if (r.ttft_s >= 0) ttft_.Observe(r.ttft_s);
  if (r.tpot_s >= 0) tpot_.Observe(r.tpot_s);
  if (r.ok) e2e_.Observe(r.e2e_s);
}

void RouterMetrics::ObserveEngineTimings(const v1::RequestTimings& t) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.Observe(std::max(0.0, t.queue_s()));
  prefill_.Observe(std::max(0.0, t.prefill_s()));
  decode_.Observe(std::max(0.0, t.decode_s()));
  inference_.Observe(std::max(0.0, t.inference_s()));
}

std::string RouterMetrics::Render(const std::vector<UpstreamStats>& upstreams, int open_connections,
                                  int busy_connections) const {
  const std::string model = "model_name=\"" + Escape(model_) + "\"";
  std::string out;
  // Engine numbers, per coordinator.
  struct Gauge {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const v1::StatsResponse&);
  };
  static const Gauge kEngine[] = {
      {"llmserve:num_requests_running", "gauge", "Requests in the engine's running batch.",
       [](const v1::StatsResponse& s) { return double(s.running_sequences()); }},
      {"llmserve:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
       [](const v1::StatsResponse& s) { return double(s.waiting_sequences()); }},
      {"llmserve:kv_cache_usage_perc", "gauge", "KV cache usage (1 = all blocks in use).",
       [](const v1::StatsResponse& s) {
         return s.kv_blocks_total() > 0
                    ? 1.0 - double(s.kv_blocks_free()) / double(s.kv_blocks_total())
                    : 0.0;
       }},
      {"llmserve:num_preemptions_total", "counter", "Sequences preempted (KV cache full).",
       [](const v1::StatsResponse& s) { return double(s.preemptions_total()); }},
      {"llmserve:prefix_cache_queries_total", "counter",
       "Tokens of sequences looked up in the prefix cache.",
       [](const v1::StatsResponse& s) { return double(s.prefix_cache_queried_tokens_total()); }},
      {"llmserve:prefix_cache_hits_total", "counter", "Prompt tokens taken from the prefix cache.",
       [](const v1::StatsResponse& s) { return double(s.prefix_cache_hit_tokens_total()); }},
      {"llmserve:engine_prefill_tokens_total", "counter",
       "Prompt tokens the engine computed (recomputes included).",
       [](const v1::StatsResponse& s) { return double(s.prefill_tokens_computed_total()); }},
  };
  for (const Gauge& g : kEngine) {
    Header(&out, g.name, g.type, g.help);
    for (const auto& u : upstreams) {
      if (u.ok)
        Sample(&out, g.name, model + ",upstream=\"" + Escape(u.address) + "\"", g.get(u.stats));
    }
  }
  // vLLM's cache_config_info: the cache's shape as labels, value 1.
  Header(&out, "llmserve:cache_config_info", "gauge",
         "KV cache configuration of each engine (block_size, cache_dtype, num_blocks).");
  for (const auto& u : upstreams) {
    if (!u.ok) continue;
    Sample(&out, "llmserve:cache_config_info",
           model + ",upstream=\"" + Escape(u.address) + "\",block_size=\"" +
               std::to_string(u.stats.kv_block_size()) + "\",cache_dtype=\"" +
               Escape(u.stats.kv_cache_dtype()) + "\",num_blocks=\"" +
               std::to_string(u.stats.kv_blocks_total()) + "\"",
           1);
  }
  Header(&out, "llmserve:upstream_up", "gauge", "1 when the coordinator answered Admin.Stats.");
  for (const auto& u : upstreams) {
    Sample(&out, "llmserve:upstream_up", model + ",upstream=\"" + Escape(u.address) + "\"",
           u.ok ? 1 : 0);
  }
  Header(&out, "llmserve:http_connections_open", "gauge", "Open HTTP connections.");
  Sample(&out, "llmserve:http_connections_open", model, open_connections);
  Header(&out, "llmserve:http_connections_busy", "gauge",
         "HTTP connections with an exchange in progress or response bytes unsent.");
  Sample(&out, "llmserve:http_connections_busy", model, busy_connections);

  std::lock_guard<std::mutex> lock(mu_);
  Header(&out, "llmserve:http_requests_total", "counter",
         "HTTP responses by route and status (429: rate limited).");
  for (const auto& [key, n] : responses_) {
    Sample(&out, "llmserve:http_requests_total",
           model + ",route=\"" + Escape(key.first) + "\",status=\"" + std::to_string(key.second) +
               "\"",
           static_cast<double>(n));
  }
  Header(&out, "llmserve:request_success_total", "counter",
         "Choices finished, by finish reason (stop, length, abort).");
  for (const auto& [reason, n] : finished_) {
    Sample(&out, "llmserve:request_success_total",
           model + ",finished_reason=\"" + Escape(reason) + "\"", static_cast<double>(n));
  }
  Header(&out, "llmserve:prompt_tokens_total", "counter", "Prompt tokens of answered requests.");
  Sample(&out, "llmserve:prompt_tokens_total", model, static_cast<double>(prompt_tokens_));
  Header(&out, "llmserve:generation_tokens_total", "counter", "Tokens generated.");
  Sample(&out, "llmserve:generation_tokens_total", model, static_cast<double>(generation_tokens_));
  Header(&out, "llmserve:time_to_first_token_seconds", "histogram",
         "Time from the request to its first token, seen by the router.");
  ttft_.Write("llmserve:time_to_first_token_seconds", model, &out);
  Header(&out, "llmserve:time_per_output_token_seconds", "histogram",
         "Mean time per output token after the first, per request.");
  tpot_.Write("llmserve:time_per_output_token_seconds", model, &out);
  Header(&out, "llmserve:e2e_request_latency_seconds", "histogram",
         "Time from the request to its last token (successful requests).");
  e2e_.Write("llmserve:e2e_request_latency_seconds", model, &out);
  // The engine's own timings (vLLM's request latency buckets), one observation per finished
  // choice.
  struct Phase {
    const char* name;
    const char* help;
    const Histogram* h;
  };
  const Phase phases[] = {
      {"llmserve:request_queue_time_seconds",
       "Time a request waited in the engine's queue before it was first scheduled.", &queue_},
      {"llmserve:request_prefill_time_seconds",
       "Time from a request's first scheduling to its first token.", &prefill_},
      {"llmserve:request_decode_time_seconds", "Time from a request's first token to its last.",
       &decode_},
      {"llmserve:request_inference_time_seconds",
       "Time from a request's first scheduling to its last token (prefill + decode).", &inference_},
  };
  for (const Phase& p : phases) {
    Header(&out, p.name, "histogram", p.help);
    p.h->Write(p.name, model, &out);
  }
  return out;
}

}  // namespace llm::router
