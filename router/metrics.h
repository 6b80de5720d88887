// GET /metrics: Prometheus text format (version 0.0.4) with vLLM's metric names under the
// prefix "llmserve:". The router observes every request it answers (status by route, finish
// reasons, tokens, time to first token, time per output token, end-to-end latency) and the
// engine's timings of each finished choice (queue, prefill, decode, inference); the engine
// gauges and counters (running / waiting requests, KV cache usage, preemptions, prefix cache)
// are each coordinator's Admin.Stats at scrape time, labelled by upstream. A small writer of
// our own: Debian 12 has no packaged Prometheus client for C++ that fits.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "proto/llm.pb.h"

namespace llm::router {

// A Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // Writes the _bucket, _sum and _count lines of `name` with the given label text
  // ('model_name="m"'); not thread-safe (the registry's lock guards it).
  void Write(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the router learnt about one finished generation request (its HTTP status is counted
// by CountResponse when the response starts).
struct RequestRecord {
  bool ok = true;                           // answered without an error
  std::vector<std::string> finish_reasons;  // one per choice: stop, length, abort
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  double ttft_s = -1;  // time to the first token; < 0: none came
  double e2e_s = 0;
  double tpot_s = -1;  // mean time per output token after the first; < 0: fewer than 2
  std::string error;   // the error the client got ("" when ok)
};

// One coordinator's Admin.Stats at scrape time (ok false: it did not answer).
struct UpstreamStats {
  std::string address;
  bool ok = false;
  v1::StatsResponse stats;
};

class RouterMetrics {
 public:
  explicit RouterMetrics(std::string model_name);

  // A response (or the start of a streamed one) of `route` (a known route, else "other").
  void CountResponse(const std::string& route, int status);
  void ObserveRequest(const RequestRecord& r);
  // The engine's timings of one finished choice (the last GenerateResponse of its call).
  void ObserveEngineTimings(const v1::RequestTimings& t);

  // The exposition text; `open_connections` and `busy_connections` are the HTTP server's.
  std::string Render(const std::vector<UpstreamStats>& upstreams, int open_connections,
                     int busy_connections) const;

 private:
  const std::string model_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;  // (route, status) -> count
  std::map<std::string, uint64_t> finished_;                   // finish reason -> count
  uint64_t prompt_tokens_ = 0;
  uint64_t generation_tokens_ = 0;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  Histogram queue_;
  Histogram prefill_;
  Histogram decode_;
  Histogram inference_;
};

}  // namespace llm::router
