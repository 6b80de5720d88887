// llm-bench (tools/) on the real stories260K model: --decode-context sets the prompt the decode
// sequences start from (the decode line reports it, in the format tools/bench-vs-llama-cpp.sh
// parses), and bad values are errors naming the flag or the model's context length; the read
// bandwidth line that tools/bench-vs-llama-cpp.sh parses, and the share of it that decode streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

struct BenchRun {
  int exit_code = -1;
  std::string log;
};

// llm-bench on `model` (stories260K when empty) with a 16 MiB KV cache, or with the cache sized
// by its rule (--kv-cache-mib 0) when `sized_cache`.
BenchRun RunLlmBench(const std::vector<std::string>& extra, std::string model = "",
                     bool sized_cache = false) {
  std::vector<std::string> args = {LLM_BENCH_BIN,
                                   "--model",
                                   model.empty() ? SharedPath(Cluster::kModel) : model,
                                   "--threads",
                                   "1",
                                   "--prompt-len",
                                   "8",
                                   "--decode-tokens",
                                   "4",
                                   "--kv-cache-mib",
                                   sized_cache ? "0" : "16"};
  if (std::find(extra.begin(), extra.end(), "--batches") == extra.end()) {
    args.insert(args.end(), {"--batches", "1"});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  ChildProcess bench(args, "llm_bench");
  BenchRun run;
  if (!bench.WaitExit(120.0)) {
    run.log = "did not finish in 120 s\n" + bench.Log(4000);
    return run;
  }
  const int status = *bench.exit_status();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.log = bench.Log(8000);
  return run;
}

TEST(LlmBench, DecodeContextSetsTheDecodePrompt) {
  LLM_E2E_REQUIRE_SHARED();
  const BenchRun run = RunLlmBench({"--decode-context", "300"});
  ASSERT_EQ(run.exit_code, 0) << run.log;
  EXPECT_NE(run.log.find("decode   batch   1          : "), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("tokens per CPU-second, context 300; "), std::string::npos) << run.log;
  // The step's split: forward and sampling are parts of the step, the forward pass most of it.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      run.log, m, std::regex(R"(a step ([0-9.]+) ms: forward ([0-9.]+), sampling ([0-9.]+)\n)")))
      << run.log;
  const double step = std::stod(m[1]), forward = std::stod(m[2]), sampling = std::stod(m[3]);
  EXPECT_GT(forward, 0.0) << run.log;
  EXPECT_LE(forward + sampling, step + 0.02) << run.log;  // printed to 0.01 ms
  EXPECT_GT(forward, sampling) << run.log;
}

// Eight sequences of 300 tokens are prefilled in chunks (2400 tokens, 2048 a step), so the first
// ones decode beside the last one's chunk and finish first: only the steps that decode all eight
// are timed, so the tokens a timed step gives (tokens/s times the step) are the batch.
TEST(LlmBench, BatchAtDepthTimesTheStepsOfTheWholeBatch) {
  LLM_E2E_REQUIRE_SHARED();
  const BenchRun run =
      RunLlmBench({"--decode-context", "300", "--batches", "8", "--share-rounds", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      run.log, m,
      std::regex(R"(decode   batch   8          : +([0-9.]+) tokens/s[^\n]*a step ([0-9.]+) ms)")))
      << run.log;
  const double per_step = std::stod(m[1]) * std::stod(m[2]) / 1e3;
  EXPECT_NEAR(per_step, 8.0, 0.25) << run.log;  // printed to 0.1 tokens/s and 0.01 ms
  EXPECT_NE(run.log.find(", KV cache float32 (auto) 16 MiB, "), std::string::npos) << run.log;
}

// --kv-cache-mib 0 (the default): 512 MiB, or what the widest batch needs to hold every sequence
// at full length. Random weights of a config whose cache takes 256 KiB a token (8 layers x
// 4096 K and V floats): batch 48 of 16 + 4 + 1 tokens takes 3 blocks of 16 tokens a sequence
// (one spare), 144 x 4 MiB = 576 MiB, printed rounded up; batch 2 fits in 512.
TEST(LlmBench, KvCacheHoldsTheWidestBatch) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "llm_bench_wide_kv";
  std::filesystem::create_directories(dir);
  {
    std::ofstream config(dir / "config.json");
    config << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8,
      "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
      "vocab_size": 512, "max_position_embeddings": 512, "hidden_act": "silu",
      "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": true,
      "torch_dtype": "float32"})";
  }
  for (const auto& [batch, mib] : {std::pair{"48", "577"}, std::pair{"2", "512"}}) {
    const BenchRun run = RunLlmBench(
        {"--load-format", "dummy", "--batches", batch, "--share-rounds", "0"}, dir.string(), true);
    ASSERT_EQ(run.exit_code, 0) << run.log;
    EXPECT_NE(run.log.find(std::string(", KV cache float32 (auto) ") + mib + " MiB, "),
              std::string::npos)
        << run.log;
    EXPECT_NE(run.log.find(std::string("decode   batch  ") + (batch[1] ? "" : " ") + batch + " "),
              std::string::npos)
        << run.log;
  }
  std::filesystem::remove_all(dir);
}

// The read loop's line (its third field is what tools/bench-vs-llama-cpp.sh prints as "read bw")
// names both kinds of pass, and its share is batch-1 decode's GB/s of weights over it.
// The FMA peak's line follows on x86 with AVX2 or AVX-512; at batch 2 of this F32 model it gives
// the share batch 2's matmuls compute: their GFLOP/s over the peak.
TEST(LlmBench, ReadBandwidthLineAndDecodeShare) {
  LLM_E2E_REQUIRE_SHARED();
  const BenchRun run = RunLlmBench({});
  ASSERT_EQ(run.exit_code, 0) << run.log;
  std::smatch decode, read;
  ASSERT_TRUE(std::regex_search(
      run.log, decode,
      std::regex(R"(decode   batch   1 .*\(([0-9.]+) GB/s of weights, matmuls [0-9]+ GFLOP/s\))")))
      << run.log;
  ASSERT_TRUE(std::regex_search(
      run.log, read,
      std::regex(R"(\nread bandwidth ([0-9.]+) GB/s \(1 threads, best of 3 passes over 1 GiB: )"
                 R"(plain, prefetched, 4 streams\): decode batch 1 streams ([0-9]+)% of it\n)")))
      << run.log;
  const double decode_gbs = std::stod(decode[1]), bandwidth = std::stod(read[1]);
  ASSERT_GT(bandwidth, 0.0) << run.log;
  // both figures are printed rounded to 0.1 GB/s, the share to 1%
  const double lo = 100 * (decode_gbs - 0.05) / (bandwidth + 0.05) - 0.5;
  const double hi = 100 * (decode_gbs + 0.05) / (bandwidth - 0.05) + 0.5;
  const double share = std::stod(read[2]);
  EXPECT_GE(share, lo) << run.log;
  EXPECT_LE(share, hi) << run.log;

  const BenchRun batched = RunLlmBench({"--batches", "1,2"});
  ASSERT_EQ(batched.exit_code, 0) << batched.log;
  std::smatch b2, peak;
  if (!std::regex_search(batched.log, peak,
                         std::regex(R"(\nFMA peak ([0-9]+) GFLOP/s \(F32, 1 threads\)(.*)\n)"))) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    EXPECT_FALSE(__builtin_cpu_supports("avx2")) << "no FMA peak line\n" << batched.log;
#endif
    return;
  }
  ASSERT_TRUE(std::regex_search(batched.log, b2,
                                std::regex(R"(decode   batch   2 .*, matmuls ([0-9]+) GFLOP/s\))")))
      << batched.log;
  const double peak_gflops = std::stod(peak[1]), b2_gflops = std::stod(b2[1]);
  ASSERT_GT(peak_gflops, 0.0) << batched.log;
  std::smatch pct;
  const std::string tail = peak[2];
  ASSERT_TRUE(std::regex_search(
      tail, pct, std::regex(R"(^: decode batch 2's matmuls compute ([0-9]+)% of it$)")))
      << batched.log;
  // both printed to 1 GFLOP/s, the share to 1%
  EXPECT_GE(std::stod(pct[1]), 100 * (b2_gflops - 0.5) / (peak_gflops + 0.5) - 0.5) << batched.log;
  EXPECT_LE(std::stod(pct[1]), 100 * (b2_gflops + 0.5) / (peak_gflops - 0.5) + 0.5) << batched.log;
}

TEST(LlmBench, BadDecodeContextIsAnError) {
  LLM_E2E_REQUIRE_SHARED();
  for (const char* bad : {"0", "-5", "x", "99999999999"}) {
    const BenchRun run = RunLlmBench({"--decode-context", bad});
    EXPECT_EQ(run.exit_code, 2) << bad << "\n" << run.log;
    EXPECT_NE(run.log.find("--decode-context"), std::string::npos) << bad << "\n" << run.log;
  }
  // Valid for the flag, too long for stories260K's 512-token context.
  const BenchRun run = RunLlmBench({"--decode-context", "600"});
  EXPECT_EQ(run.exit_code, 1) << run.log;
  EXPECT_NE(run.log.find("maximum context length of 512"), std::string::npos) << run.log;
}

}  // namespace
}  // namespace llm::e2e
