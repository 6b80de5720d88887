// End to end from one .gguf file: real `router` and `worker`, both given only
// golden/families/llama/llama-q8_0.gguf as model.path (no config.json, tokenizer.json or
// chat template beside it). Tokenize, chat tokenization (the file's chat template), and
// greedy completions whose ids are llama.cpp's on the same file.
#include <gtest/gtest.h>

#include "common/tokenizer.h"
#include "tests/integration/proc_stats.h"  // FindOnPath
#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

constexpr const char* kGguf = "golden/families/llama/llama-q8_0.gguf";
constexpr const char* kReference = "golden/families/llama/reference.json";

// POSTs a greedy completion of `p` (a reference prompt) to `model` and checks its text is that of
// llama.cpp's ids on the file in `format` (the reference's llamacpp_quantized key).
void ExpectLlamaCppsCompletion(int port, const std::string& model, const Tokenizer& tokenizer,
                               const json& p, const char* format) {
  const auto want = p["llamacpp_quantized"][format]["greedy_ids"].get<std::vector<int32_t>>();
  const json body = {{"model", model},
                     {"prompt", p["text"]},
                     {"max_tokens", want.size()},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const HttpResult r = Post(port, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  // The completion's text: what the ids add to the prompt's text (a SentencePiece tokenizer
  // strips the leading space only at the start of a sequence).
  auto all = p["ids"].get<std::vector<int32_t>>();
  const std::string prompt_text = tokenizer.Decode(all, true);
  all.insert(all.end(), want.begin(), want.end());
  EXPECT_EQ(r.Json()["choices"][0]["text"], tokenizer.Decode(all, true).substr(prompt_text.size()))
      << p["name"];
  EXPECT_EQ(r.Json()["usage"]["prompt_tokens"], p["ids"].size());
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], want.size());
}

class GgufE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SharedPath(kGguf))) return;
    // A float32 KV cache, as llama.cpp's reference runs had (auto would give this quantized
    // model a half cache).
    cluster_ =
        new Cluster({"--model.path", SharedPath(kGguf), "--engine.kv_cache_dtype", "float32"},
                    {"--model.path", SharedPath(kGguf)});
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!std::filesystem::exists(SharedPath(kGguf)) ||
        !std::filesystem::exists(SharedPath(kReference))) {
      GTEST_SKIP() << "missing shared test data: " << SharedPath(kGguf);
    }
    ASSERT_TRUE(cluster_->ok()) << cluster_->Logs();
  }
  static int port() { return cluster_->port(); }
  static inline Cluster* cluster_ = nullptr;
};

TEST_F(GgufE2E, ServesModelsTokenizeAndChatFromTheFile) {
  const HttpResult models = Http(port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.Json()["data"][0]["id"], "llama-q8_0");
  EXPECT_EQ(models.Json()["data"][0]["max_model_len"], 512);  // llama.context_length
  const HttpResult tok = Post(port(), "/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_EQ(tok.status, 200) << tok.body;
  EXPECT_EQ(tok.Json()["tokens"], json({1, 403, 407, 261, 378}));
  // tokenizer.chat_template: bos_token + the message contents.
  const HttpResult chat_tok = Post(
      port(), "/tokenize", {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}});
  ASSERT_EQ(chat_tok.status, 200) << chat_tok.body;
  EXPECT_EQ(chat_tok.Json()["tokens"], json({1, 403, 407, 261, 378}));
}

TEST_F(GgufE2E, GreedyCompletionsAreLlamaCppsIds) {
  std::ifstream in(SharedPath(kReference));
  const json ref = json::parse(in);
  auto tokenizer = Tokenizer::FromDir(SharedPath(kGguf));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  for (const json& p : ref["prompts"]) {
    ExpectLlamaCppsCompletion(port(), "llama-q8_0", **tokenizer, p, "Q8_0");
    const json chat = {{"model", "llama-q8_0"},
                       {"messages", {{{"role", "user"}, {"content", p["text"]}}}},
                       {"max_tokens", 4},
                       {"temperature", 0}};
    const HttpResult c = Post(port(), "/v1/chat/completions", chat);
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.Json()["usage"]["prompt_tokens"], p["ids"].size());
  }
}

// The F16 file served by two tensor-parallel ranks (mpirun -np 2) on the AVX2 kernel set
// (engine.matmul_isa avx2-fma): each rank repacks its F16 shards in groups of 4 rows
// (kernels/cpu/f16_packed.h; the row-parallel o/down shards are owned column slices), and the
// greedy completions are still llama.cpp's ids on the same file.
TEST(GgufF16E2E, RowsPackedForAvx2OnTwoRanksGiveLlamaCppsIds) {
  constexpr const char* kF16 = "golden/families/llama/llama-f16.gguf";
  if (!std::filesystem::exists(SharedPath(kF16)) ||
      !std::filesystem::exists(SharedPath(kReference))) {
    GTEST_SKIP() << "missing shared test data: " << SharedPath(kF16);
  }
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on the PATH (Debian package openmpi-bin)";
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !__builtin_cpu_supports("f16c")) {
    GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C kernel set";
  }
  Cluster cluster({"--model.path", SharedPath(kF16), "--engine.kv_cache_dtype", "float32",
                   "--engine.tensor_parallel_size", "2", "--engine.matmul_isa", "avx2-fma"},
                  {"--model.path", SharedPath(kF16)},
                  {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  std::ifstream in(SharedPath(kReference));
  const json ref = json::parse(in);
  auto tokenizer = Tokenizer::FromDir(SharedPath(kF16));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  for (const json& p : ref["prompts"]) {
    ExpectLlamaCppsCompletion(cluster.port(), "llama-f16", **tokenizer, p, "F16");
  }
  EXPECT_NE(cluster.Logs().find("matmul weights repacked or copied for the cpu backend"),
            std::string::npos)
      << cluster.Logs();
}

}  // namespace
}  // namespace llm::e2e
