// llm-bench-serve: a serving benchmark client for any OpenAI-compatible endpoint (this router,
// llama-server, vLLM), in the spirit of `vllm bench serve`: streaming completions (or chat)
// requests with fixed or random lengths or prompts from a file, sent at once under a
// concurrency cap or as a Poisson process; reports request and token throughput, TTFT, TPOT,
// ITL and end-to-end latency (mean, median, std, percentiles), errors, and writes the result
// as JSON with vLLM's field names.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cli.h"
#include "tools/serve_bench_client.h"

namespace {

using llm::bench::Clock;
using llm::bench::Endpoint;
using llm::bench::StreamOutcome;
using nlohmann::json;

struct Options {
  Endpoint endpoint;
  std::string model;  // "": the first of GET /v1/models
  int num_prompts = 100;
  std::string dataset_path;  // one prompt per line, or JSON lines {"prompt", "output_len"}
  int input_len = 128;       // words of a random prompt
  int output_len = 64;       // max_tokens
  double range_ratio = 0;    // lengths uniform in [len * (1 - r), len * (1 + r)]
  double request_rate = std::numeric_limits<double>::infinity();
  int max_concurrency = 0;  // 0: num_prompts
  int num_warmups = 0;
  bool ignore_eos = false;
  uint32_t seed = 0;
  int timeout_s = 600;
  std::vector<double> percentiles{50, 90, 99};
  std::string result_file;
  bool progress = true;
};

struct Prompt {
  std::string text;
  int output_len = 0;
};

// Common English words: a random prompt of N words is about N tokens for a BPE vocabulary.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",     "in",   "is",   "you",   "that",   "it",    "he",
    "was",   "for",   "on",    "are",    "as",   "with", "his",   "they",   "at",    "be",
    "this",  "have",  "from",  "or",     "one",  "had",  "by",    "word",   "but",   "not",
    "what",  "all",   "were",  "we",     "when", "your", "can",   "said",   "there", "use",
    "an",    "each",  "which", "she",    "do",   "how",  "their", "if",     "will",  "up",
    "other", "about", "out",   "many",   "then", "them", "these", "so",     "some",  "her",
    "would", "make",  "like",  "him",    "into", "time", "has",   "look",   "two",   "more",
    "write", "go",    "see",   "number", "no",   "way",  "could", "people", "my",    "than",
    "first", "water", "been",  "call",   "who",  "oil",  "its",   "now",    "find",  "long",
    "down",  "day",   "did",   "get",    "come", "made", "may",   "part",   "cat",   "dog"};

int Around(std::mt19937& rng, int len, double ratio) {
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1 - ratio))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1 + ratio))));
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

llm::StatusOr<std::vector<Prompt>> MakePrompts(const Options& o, int count, std::mt19937& rng) {
  std::vector<Prompt> file;
  if (!o.dataset_path.empty()) {
    std::ifstream in(o.dataset_path);
    if (!in) return llm::NotFound("--dataset-path: cannot open '" + o.dataset_path + "'");
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      Prompt p{line, o.output_len};
      if (line.front() == '{') {
        const json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("prompt") || !j["prompt"].is_string()) {
          return llm::InvalidArgument("--dataset-path: a JSON line without a string 'prompt'");
        }
        p.text = j["prompt"].get<std::string>();
        if (j.contains("output_len") && j["output_len"].is_number_integer()) {
          p.output_len = std::clamp(j["output_len"].get<int>(), 1, 1 << 20);
        }
      }
      file.push_back(std::move(p));
    }
    if (file.empty()) return llm::InvalidArgument("--dataset-path: no prompts");
  }
  std::vector<Prompt> out;
  for (int i = 0; i < count; ++i) {
    if (!file.empty()) {
      out.push_back(file[static_cast<size_t>(i) % file.size()]);
      continue;
    }
    Prompt p;
    const int words = Around(rng, o.input_len, o.range_ratio);
    for (int w = 0; w < words; ++w) {
      if (w) p.text += ' ';
      p.text += kWords[rng() % std::size(kWords)];
    }
    p.output_len = Around(rng, o.output_len, o.range_ratio);
    out.push_back(std::move(p));
  }
  return out;
}

std::string RequestBody(const Options& o, const Prompt& p) {
  json body = {{"model", o.model},
               {"max_tokens", p.output_len},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  if (o.endpoint.path.find("chat") != std::string::npos) {
    body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
  } else {
    body["prompt"] = p.text;
  }
  return body.dump();
}

// Sends every prompt at its arrival time (all at once for an infinite rate), with at most
// `concurrency` in flight; returns the outcomes in prompt order.
std::vector<StreamOutcome> RunAll(const Options& o, const std::vector<Prompt>& prompts, double rate,
                                  int concurrency, bool show_progress) {
  std::vector<StreamOutcome> outcomes(prompts.size());
  std::vector<Clock::time_point> arrival(prompts.size());
  std::mt19937 rng(o.seed + 1);
  std::exponential_distribution<double> gap(std::isinf(rate) ? 1.0 : rate);
  Clock::time_point t = Clock::now();
  for (auto& a : arrival) {
    a = t;
    if (!std::isinf(rate)) {
      t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
    }
  }
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::atomic<size_t> failed{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < prompts.size();) {
      std::this_thread::sleep_until(arrival[i]);
      outcomes[i] = llm::bench::RunStreamingRequest(o.endpoint, RequestBody(o, prompts[i]),
                                                    std::chrono::seconds(o.timeout_s));
      if (!outcomes[i].ok) failed.fetch_add(1);
      done.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min(prompts.size(), static_cast<size_t>(std::max(1, concurrency)));
  for (size_t i = 0; i < n; ++i) threads.emplace_back(worker);
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::thread bar([&] {
    if (!show_progress) return;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      const size_t d = done.load();
      const int width = 40;
      const int fill = prompts.empty() ? width : static_cast<int>(width * d / prompts.size());
      std::fprintf(stderr, "\r[%s%s] %zu/%zu requests, %zu failed", std::string(fill, '#').c_str(),
                   std::string(width - fill, '.').c_str(), d, prompts.size(), failed.load());
      if (finished) break;
      cv.wait_for(lock, std::chrono::milliseconds(500));
    }
    std::fprintf(stderr, "\n");
  });
  for (auto& th : threads) th.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
  }
  cv.notify_all();
  bar.join();
  return outcomes;
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks (NumPy's default, which vLLM uses).
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

std::string PercentileName(double p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

// mean/median/std/pXX of one metric, in ms, under vLLM's names (mean_ttft_ms, ...).
void AddStats(json& r, const std::string& name, const std::vector<double>& ms,
              const std::vector<double>& percentiles) {
  double mean = 0, var = 0;
  for (double x : ms) mean += x;
  mean = ms.empty() ? 0 : mean / static_cast<double>(ms.size());
  for (double x : ms) var += (x - mean) * (x - mean);
  r["mean_" + name + "_ms"] = mean;
  r["median_" + name + "_ms"] = Percentile(ms, 50);
  r["std_" + name + "_ms"] = ms.empty() ? 0 : std::sqrt(var / static_cast<double>(ms.size()));
  for (double p : percentiles) r["p" + PercentileName(p) + "_" + name + "_ms"] = Percentile(ms, p);
}

json Summarize(const Options& o, const std::vector<StreamOutcome>& outs, double duration_s) {
  json r;
  int64_t completed = 0, total_in = 0, total_out = 0;
  std::vector<double> ttft, tpot, itl, e2el;
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(),
       itls = json::array(), errors = json::array();
  for (const StreamOutcome& s : outs) {
    errors.push_back(s.ok ? "" : s.error);
    const int64_t out_tokens =
        s.completion_tokens >= 0 ? s.completion_tokens : static_cast<int64_t>(s.texts.size());
    input_lens.push_back(s.ok ? std::max<int64_t>(0, s.prompt_tokens) : 0);
    output_lens.push_back(s.ok ? out_tokens : 0);
    if (!s.ok) {
      ttfts.push_back(0);
      itls.push_back(json::array());
      continue;
    }
    ++completed;
    total_in += std::max<int64_t>(0, s.prompt_tokens);
    total_out += out_tokens;
    const double e2e = Ms(s.end - s.start);
    e2el.push_back(e2e);
    json gaps = json::array();
    if (!s.texts.empty()) {
      const double first = Ms(s.texts.front() - s.start);
      ttft.push_back(first);
      ttfts.push_back(first / 1000);
      for (size_t k = 1; k < s.texts.size(); ++k) {
        const double g = Ms(s.texts[k] - s.texts[k - 1]);
        itl.push_back(g);
        gaps.push_back(g / 1000);
      }
      if (out_tokens > 1) tpot.push_back((e2e - first) / static_cast<double>(out_tokens - 1));
    } else {
      ttfts.push_back(0);
    }
    itls.push_back(std::move(gaps));
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y%m%d-%H%M%S", std::localtime(&now));
  r["date"] = date;
  r["backend"] = "openai";
  r["endpoint"] = o.endpoint.path;
  r["model_id"] = o.model;
  r["num_prompts"] = outs.size();
  r["request_rate"] = std::isinf(o.request_rate) ? json("inf") : json(o.request_rate);
  r["max_concurrency"] = o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr);
  r["duration"] = duration_s;
  r["completed"] = completed;
  r["failed"] = static_cast<int64_t>(outs.size()) - completed;
  r["total_input_tokens"] = total_in;
  r["total_output_tokens"] = total_out;
  r["request_throughput"] = completed / duration_s;
  r["output_throughput"] = static_cast<double>(total_out) / duration_s;
  r["total_token_throughput"] = static_cast<double>(total_in + total_out) / duration_s;
  AddStats(r, "ttft", ttft, o.percentiles);
  AddStats(r, "tpot", tpot, o.percentiles);
  AddStats(r, "itl", itl, o.percentiles);
  AddStats(r, "e2el", e2el, o.percentiles);
  r["input_lens"] = std::move(input_lens);
  r["output_lens"] = std::move(output_lens);
  r["ttfts"] = std::move(ttfts);
  r["itls"] = std::move(itls);
  r["errors"] = std::move(errors);
  return r;
}

void PrintReport(const json& r, const std::vector<double>& percentiles) {
  auto line = [](const char* label, const json& v) {
    if (v.is_number_integer()) {
      std::printf("%-40s%-12lld\n", label, static_cast<long long>(v.get<int64_t>()));
    } else {
      std::printf("%-40s%-12.2f\n", label, v.get<double>());
    }
  };
  std::printf("%s\n", std::string(50, '=').c_str());
  std::printf("%-50s\n", " Serving Benchmark Result ");
  line("Successful requests:", r["completed"]);
  line("Failed requests:", r["failed"]);
  line("Benchmark duration (s):", r["duration"]);
  line("Total input tokens:", r["total_input_tokens"]);
  line("Total generated tokens:", r["total_output_tokens"]);
  line("Request throughput (req/s):", r["request_throughput"]);
  line("Output token throughput (tok/s):", r["output_throughput"]);
  line("Total Token throughput (tok/s):", r["total_token_throughput"]);
  const std::pair<const char*, const char*> metrics[] = {
      {"ttft", "Time to First Token"},
      {"tpot", "Time per Output Token (excl. 1st token)"},
      {"itl", "Inter-token Latency"},
      {"e2el", "End-to-end Latency"}};
  for (const auto& [key, title] : metrics) {
    std::printf("%s %s %s\n", std::string(4, '-').c_str(), title, std::string(4, '-').c_str());
    std::string upper = key;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const std::string mean = "Mean " + upper + " (ms):", median = "Median " + upper + " (ms):";
    line(mean.c_str(), r["mean_" + std::string(key) + "_ms"]);
    line(median.c_str(), r["median_" + std::string(key) + "_ms"]);
    for (double p : percentiles) {
      const std::string label = "P" + PercentileName(p) + " " + upper + " (ms):";
      line(label.c_str(), r["p" + PercentileName(p) + "_" + key + "_ms"]);
    }
  }
  std::printf("%s\n", std::string(50, '=').c_str());
}

void AddFlags(CLI::App& app, Options* o) {
  app.add_option("--host", o->endpoint.host, "server host")->capture_default_str();
  app.add_option("--port", o->endpoint.port, "server port")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.add_option("--endpoint", o->endpoint.path, "/v1/completions or /v1/chat/completions")
      ->check(CLI::IsMember({"/v1/completions", "/v1/chat/completions"}))
      ->capture_default_str();
  app.add_option("--model", o->model, "model name (default: the first of GET /v1/models)");
  app.add_option("--api-key", o->endpoint.api_key, "Bearer key (default: $OPENAI_API_KEY)");
  app.add_option("--num-prompts", o->num_prompts, "requests measured")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--dataset-path", o->dataset_path,
                 "prompts, one per line, or JSON lines {\"prompt\": ..., \"output_len\": N}; "
                 "default: random prompts of --random-input-len words")
      ->check(CLI::ExistingFile);
  app.add_option("--random-input-len", o->input_len, "words per random prompt")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--random-output-len", o->output_len, "max_tokens of each request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--random-range-ratio", o->range_ratio,
                 "lengths uniform in [len * (1 - r), len * (1 + r)]")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--request-rate", o->request_rate,
                 "requests per second, Poisson arrivals; inf: all at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-concurrency", o->max_concurrency,
                 "requests in flight at most (0: --num-prompts)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--num-warmups", o->num_warmups, "requests sent (and not measured) first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_flag("--ignore-eos", o->ignore_eos,
               "ask for exactly max_tokens tokens (the 'ignore_eos' extension of vLLM, "
               "llama-server and this router)");
  app.add_option("--seed", o->seed, "seed of the prompts and arrivals")->capture_default_str();
  app.add_option("--timeout-s", o->timeout_s, "deadline of each request")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--metric-percentiles", o->percentiles, "percentiles reported")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--result-file", o->result_file, "write the result JSON here");
  app.add_flag("!--no-progress", o->progress, "no progress bar on stderr");
}

int Run(Options& o) {
  if (o.endpoint.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY")) o.endpoint.api_key = env;
  }
  const auto timeout = std::chrono::seconds(o.timeout_s);
  if (o.model.empty()) {
    std::string error;
    o.model = llm::bench::FirstModelId(o.endpoint, timeout, &error);
    if (o.model.empty()) {
      std::fprintf(stderr, "llm-bench-serve: %s\n", error.c_str());
      return 1;
    }
  }
  std::mt19937 rng(o.seed);
  auto warm = MakePrompts(o, o.num_warmups, rng);
  auto prompts = MakePrompts(o, o.num_prompts, rng);
  if (!prompts.ok() || !warm.ok()) {
    std::fprintf(stderr, "llm-bench-serve: %s\n", prompts.status().ToString().c_str());
    return 1;
  }
  const int concurrency = o.max_concurrency > 0 ? o.max_concurrency : o.num_prompts;
  std::fprintf(stderr,
               "llm-bench-serve: %s on http://%s:%d%s, %d prompts, rate %g, "
               "concurrency %d\n",
               o.model.c_str(), o.endpoint.host.c_str(), o.endpoint.port, o.endpoint.path.c_str(),
               o.num_prompts, o.request_rate, concurrency);
  if (!warm->empty()) {
    const auto w = RunAll(o, *warm, std::numeric_limits<double>::infinity(), concurrency, false);
    const auto bad = std::count_if(w.begin(), w.end(), [](const auto& s) { return !s.ok; });
    std::fprintf(stderr, "warm-up: %zu requests, %ld failed\n", w.size(), static_cast<long>(bad));
  }
  const auto t0 = Clock::now();
  const auto outs = RunAll(o, *prompts, o.request_rate, concurrency, o.progress);
  const double duration = std::chrono::duration<double>(Clock::now() - t0).count();
  const json result = Summarize(o, outs, duration);
  PrintReport(result, o.percentiles);
  for (const auto& s : outs) {
    if (!s.ok) {
      std::fprintf(stderr, "first error: %s\n", s.error.c_str());
      break;
    }
  }
  if (!o.result_file.empty()) {
    std::ofstream out(o.result_file);
    out << result.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "llm-bench-serve: cannot write '%s'\n", o.result_file.c_str());
      return 1;
    }
  }
  return result["completed"].get<int64_t>() == static_cast<int64_t>(outs.size()) ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app(
      "Serving benchmark for an OpenAI-compatible endpoint (this router, llama-server, vLLM):\n"
      "streaming requests; output tok/s, req/s, TTFT, TPOT, ITL, E2E latency, errors. Exit\n"
      "status 3 when some request failed.",
      "llm-bench-serve");
  AddFlags(app, &o);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  return Run(o);
}
