// model.quantization end to end: real `router` and `worker`, the worker started with
// --model.quantization on stories260K (F32 safetensors). The worker logs its quantization
// summary, and greedy completions of the golden prompts are served: with q8_0 exactly the F32
// model's text; with q4_k (stories260K's rows of 64 take the Q5_0 fallback) the length of the
// part equal to the F32 text is printed.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

constexpr const char* kGolden = "golden/stories260K_greedy.jsonl";

// Greedy completion text of every golden prompt, and the F32 model's.
std::vector<std::pair<std::string, std::string>> Completions(int port) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream golden(SharedPath(kGolden));
  for (std::string line; std::getline(golden, line);) {
    const json g = json::parse(line);
    const json body = GoldenRequest(g);
    const HttpResult r = Post(port, "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) break;
    out.emplace_back(r.Json()["choices"][0]["text"].get<std::string>(),
                     g["greedy_text"].get<std::string>());
  }
  return out;
}

TEST(QuantizationE2E, WorkerQuantizesAtLoadAndServes) {
  if (!std::filesystem::exists(SharedPath(kGolden))) GTEST_SKIP() << "missing " << kGolden;
  for (const char* q : {"q8_0", "q4_k"}) {
    // The reference ran with float K and V; auto would give quantized weights a half cache.
    Cluster cluster({"--model.quantization", q, "--engine.kv_cache_dtype", "float32"});
    ASSERT_TRUE(cluster.ok()) << cluster.Logs();
    const auto done = Completions(cluster.port());
    ASSERT_FALSE(done.empty());
    for (const auto& [got, want] : done) {
      size_t same = 0;
      while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
      std::printf(
          "[ served with model.quantization %s ] %zu of %zu characters equal the F32 "
          "greedy text\n",
          q, same, want.size());
      if (std::string(q) == "q8_0") {
        EXPECT_EQ(got, want);
      }
      EXPECT_GE(same, 16u) << q;
    }
    const std::string logs = cluster.worker().Log(Cluster::kLogTail);
    EXPECT_NE(logs.find(std::string("matrices to ") + (q[1] == '8' ? "Q8_0" : "Q4_K")),
              std::string::npos)
        << logs;
  }
}

}  // namespace
}  // namespace llm::e2e
