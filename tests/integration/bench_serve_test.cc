// llm-bench-serve (tools/) against the real router + worker serving stories260K: every request
// is counted, the token totals are the server's usage (exactly max_tokens each with
// ignore_eos), the result JSON carries vLLM's field names, and failures are reported as such
// (exit status 3, one error per failed request), never as throughput.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

struct BenchRun {
  int exit_code = -1;
  json result;
  std::string log;
};

BenchRun RunBench(std::vector<std::string> args) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("bench_serve_" + std::to_string(getpid()) + ".json"))
                              .string();
  std::filesystem::remove(out);
  args.insert(args.begin(), LLM_BENCH_SERVE_BIN);
  args.insert(args.end(), {"--result-file", out, "--no-progress", "--timeout-s", "60"});
  ChildProcess bench(args, "bench_serve");
  BenchRun run;
  if (!bench.WaitExit(120.0)) {
    run.log = "did not finish in 120 s\n" + bench.Log(4000);
    return run;
  }
  const int status = *bench.exit_status();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.log = bench.Log(4000);
  std::ifstream in(out);
  if (in) run.result = json::parse(in, nullptr, false);
  std::filesystem::remove(out);
  return run;
}

TEST(BenchServe, CountsEveryRequestAndTheServersTokens) {
  if (!std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing ../shared/" << Cluster::kModel;
  }
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  for (const char* endpoint : {"/v1/completions", "/v1/chat/completions"}) {
    const BenchRun run =
        RunBench({"--port", std::to_string(cluster.port()), "--endpoint", endpoint, "--num-prompts",
                  "8", "--max-concurrency", "3", "--random-input-len", "20", "--random-output-len",
                  "7", "--ignore-eos", "--num-warmups", "1"});
    ASSERT_EQ(run.exit_code, 0) << endpoint << "\n" << run.log;
    const json& r = run.result;
    ASSERT_TRUE(r.is_object()) << run.log;
    EXPECT_EQ(r["model_id"], "stories260K");  // from GET /v1/models
    EXPECT_EQ(r["completed"], 8);
    EXPECT_EQ(r["failed"], 0);
    EXPECT_EQ(r["total_output_tokens"], 8 * 7) << endpoint;
    EXPECT_EQ(r["output_lens"], json(std::vector<int>(8, 7)));
    EXPECT_GT(r["total_input_tokens"].get<int64_t>(), 8 * 10);  // from usage.prompt_tokens
    EXPECT_EQ(r["ttfts"].size(), 8u);
    EXPECT_EQ(r["itls"].size(), 8u);
    for (const char* key :
         {"duration", "request_throughput", "output_throughput", "total_token_throughput",
          "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
          "p90_itl_ms", "mean_e2el_ms", "p50_e2el_ms"}) {
      ASSERT_TRUE(r.contains(key)) << key;
      EXPECT_GE(r[key].get<double>(), 0.0) << key;
    }
    EXPECT_GT(r["mean_e2el_ms"].get<double>(), 0.0);
    EXPECT_LE(r["mean_ttft_ms"].get<double>(), r["mean_e2el_ms"].get<double>());
  }
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0));
}

TEST(BenchServe, FailuresAreCountedAndExitThree) {
  if (!std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing ../shared/" << Cluster::kModel;
  }
  Cluster cluster;
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  // A model the server does not serve: every request gets a 404 error body.
  const BenchRun wrong = RunBench({"--port", std::to_string(cluster.port()), "--model", "nope",
                                   "--num-prompts", "3", "--random-output-len", "4"});
  EXPECT_EQ(wrong.exit_code, 3) << wrong.log;
  ASSERT_TRUE(wrong.result.is_object()) << wrong.log;
  EXPECT_EQ(wrong.result["completed"], 0);
  EXPECT_EQ(wrong.result["failed"], 3);
  EXPECT_EQ(wrong.result["total_output_tokens"], 0);
  EXPECT_NE(wrong.result["errors"][0].get<std::string>().find("HTTP 404"), std::string::npos)
      << wrong.result["errors"][0];
  // Nothing listening: the model lookup fails with a message, exit 1.
  const BenchRun down = RunBench({"--port", std::to_string(FreePort()), "--num-prompts", "2"});
  EXPECT_EQ(down.exit_code, 1) << down.log;
  EXPECT_NE(down.log.find("/v1/models"), std::string::npos) << down.log;
}

}  // namespace
}  // namespace llm::e2e
