// Model folders: what loads, and a clear error naming the file and tensor for every mistake.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/common/llama3_rope.h"
#include "tests/worker/tiny_model.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;

// Loads `dir` and expects an error whose message contains every string in `parts`.
void ExpectLoadError(const std::string& dir, StatusCode code, std::vector<std::string> parts) {
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_FALSE(w.ok()) << dir << " loaded but should not";
  EXPECT_EQ(w.status().code(), code) << w.status().ToString();
  for (const auto& p : parts) {
    EXPECT_NE(w.status().message().find(p), std::string::npos)
        << "error '" << w.status().message() << "' does not mention '" << p << "'";
  }
}

TEST(ModelLoading, TinyModelLoadsAndRuns) {
  auto tensors = TinyTensors();
  auto dir = MakeModelDir("ok", TinyConfig(), &tensors);
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->config.eos_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ((*w)->config.bos_token_ids, (std::vector<int32_t>{1}));
  EngineConfig cfg;
  cfg.num_blocks = 8;
  auto engine = Engine::Create(**w, cfg);
  ASSERT_TRUE(engine.ok());
  GenerateRequest r;
  r.prompt = {1, 5, 6, 7};
  r.max_tokens = 5;
  r.ignore_eos = true;
  auto out = GenerateAll(**engine, {r});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tokens.size(), 5u);
}

// With several eos ids (Llama-3 style), any of them ends the request and the engine says so.
TEST(ModelLoading, AnyEosIdEndsTheRequestAsEos) {
  auto tensors = TinyTensors();
  auto first_token = [&](const std::string& config, FinishReason* finish) {
    auto w = LoadModelWeights(MakeModelDir("eos", config, &tensors), LoadFormat::kSafetensors);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    EngineConfig cfg;
    cfg.num_blocks = 8;
    auto engine = Engine::Create(**w, cfg);
    GenerateRequest r;
    r.prompt = {1, 5, 6, 7};
    r.max_tokens = 4;
    auto out = GenerateAll(**engine, {r});
    EXPECT_TRUE(out.ok());
    *finish = (*out)[0].finish;
    return (*out)[0].tokens;
  };
  FinishReason finish;
  const auto free_run = first_token(TinyConfig(), &finish);
  ASSERT_FALSE(free_run.empty());
  const int32_t t0 = free_run[0].token;
  if (t0 == 2 || t0 == 3) GTEST_SKIP() << "the tiny model's first token is already an eos id";
  std::string cfg = TinyConfig();
  cfg.replace(cfg.find("[2, 3]"), 6, "[2, " + std::to_string(t0) + "]");
  const auto stopped = first_token(cfg, &finish);
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].token, t0);
  EXPECT_EQ(finish, FinishReason::kEos);
  EXPECT_STREQ(FinishReasonName(finish), "stop");
}

TEST(ModelLoading, MissingFolderAndConfig) {
  ExpectLoadError("/nonexistent/model", StatusCode::kNotFound, {"config.json"});
}

TEST(ModelLoading, UnknownArchitecture) {
  std::string cfg = TinyConfig();
  cfg.replace(cfg.find("LlamaForCausalLM"), 16, "GPTBigCodeForCausalLM");
  ExpectLoadError(MakeModelDir("arch", cfg, nullptr), StatusCode::kUnimplemented,
                  {"GPTBigCodeForCausalLM", "config.json", "LlamaForCausalLM"});
}

TEST(ModelLoading, MissingConfigKeyIsNamed) {
  std::string cfg = TinyConfig();
  cfg.replace(cfg.find("\"hidden_size\": 8,"), 17, "");
  ExpectLoadError(MakeModelDir("key", cfg, nullptr), StatusCode::kInvalidArgument,
                  {"hidden_size", "config.json"});
}

TEST(ModelLoading, MissingWeightsFile) {
  ExpectLoadError(MakeModelDir("noweights", TinyConfig(), nullptr), StatusCode::kNotFound,
                  {"model.safetensors"});
}

TEST(ModelLoading, MissingTensorIsNamed) {
  auto tensors = TinyTensors();
  tensors.erase("model.layers.0.mlp.up_proj.weight");
  ExpectLoadError(MakeModelDir("missing", TinyConfig(), &tensors), StatusCode::kNotFound,
                  {"model.layers.0.mlp.up_proj.weight"});
}

TEST(ModelLoading, ExtraTensorIsNamed) {
  auto tensors = TinyTensors();
  tensors["model.layers.0.mlp.surprise.weight"] = FakeTensor{"F32", {2}, {1, 2}};
  ExpectLoadError(MakeModelDir("extra", TinyConfig(), &tensors), StatusCode::kInvalidArgument,
                  {"model.layers.0.mlp.surprise.weight"});
}

TEST(ModelLoading, WrongShapeIsNamed) {
  auto tensors = TinyTensors();
  tensors["model.layers.0.self_attn.k_proj.weight"] =
      FakeTensor{"F32", {8, 8}, std::vector<float>(64)};
  ExpectLoadError(
      MakeModelDir("shape", TinyConfig(), &tensors), StatusCode::kInvalidArgument,
      {"model.layers.0.self_attn.k_proj.weight", "[8, 8]", "[4, 8]", "model.safetensors"});
}

TEST(ModelLoading, UnsupportedDtypeIsNamed) {
  auto tensors = TinyTensors();
  tensors["model.norm.weight"].dtype = "I16";
  ExpectLoadError(MakeModelDir("dtype", TinyConfig(), &tensors), StatusCode::kUnimplemented,
                  {"model.norm.weight", "I16"});
}

TEST(ModelLoading, TruncatedFileIsReported) {
  auto tensors = TinyTensors();
  auto dir = MakeModelDir("trunc", TinyConfig(), &tensors);
  const auto file = fs::path(dir) / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  ExpectLoadError(dir, StatusCode::kDataLoss, {"model.safetensors", "outside the data section"});
  fs::resize_file(file, 5);
  ExpectLoadError(dir, StatusCode::kDataLoss, {"model.safetensors", "too short"});
}

// A hostile or broken config.json: wrong types and absurd sizes are errors naming the key,
// never an exception or an allocation of terabytes.
TEST(ModelLoading, WrongTypesAndAbsurdSizesInConfigAreNamed) {
  auto tensors = TinyTensors();
  struct Case {
    std::string key_value;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {R"("hidden_act": 1)", {"hidden_act", "string"}},
      {R"("torch_dtype": 16)", {"torch_dtype", "string"}},
      {R"("rope_scaling": {"rope_type": 3, "factor": 2})", {"rope_type", "string"}},
      {R"("num_hidden_layers": 100000000)", {"num_hidden_layers", "4096"}},
      {R"("vocab_size": 2147483647)", {"vocab_size"}},
      {R"("eos_token_id": 99999999999)", {"eos_token_id"}},
      {R"("sliding_window": "wide")", {"sliding_window"}},
      {R"("num_attention_heads": 4096, "head_dim": 65536)", {"num_attention_heads", "head_dim"}},
  };
  for (const Case& c : cases) {
    std::string cfg = TinyConfig();
    cfg.insert(cfg.rfind('}'), ", " + c.key_value);
    ExpectLoadError(MakeModelDir("types", cfg, &tensors), StatusCode::kInvalidArgument, c.parts);
  }
}

TEST(ModelLoading, DummyWeightsTooLargeForMemoryAreAnError) {
  std::string cfg = TinyConfig();
  for (const char* key : {"\"hidden_size\": 8", "\"intermediate_size\": 16"}) {
    const std::string k(key);
    cfg.replace(cfg.find(k), k.size(), k.substr(0, k.find(':')) + ": 1048576");
  }
  cfg.replace(cfg.find("\"num_hidden_layers\": 1"), 22, "\"num_hidden_layers\": 4000");
  auto w = LoadModelWeights(MakeModelDir("huge", cfg, nullptr), LoadFormat::kDummy);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kResourceExhausted) << w.status().ToString();
}

// A shape whose element count wraps 64 bits must not pass for the tensor's byte range.
TEST(ModelLoading, SafetensorsShapeOverflowIsDataLoss) {
  auto tensors = TinyTensors();
  auto dir = MakeModelDir("overflow", TinyConfig(), &tensors);
  const std::string header =
      R"({"model.norm.weight":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})";
  std::ofstream out(fs::path(dir) / "model.safetensors", std::ios::binary | std::ios::trunc);
  const uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << std::string(64, '\0');
  out.close();
  ExpectLoadError(dir, StatusCode::kDataLoss, {"model.norm.weight", "more elements"});
}

TEST(ModelLoading, ShardedWithIndex) {
  auto tensors = TinyTensors();
  auto dir = MakeModelDir("sharded", TinyConfig(), nullptr);
  std::map<std::string, FakeTensor> a, b;
  nlohmann::json map;
  int i = 0;
  for (auto& [name, t] : tensors) {
    const bool first = i++ % 2 == 0;
    (first ? a : b)[name] = t;
    map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  WriteSafetensors(dir + "/model-00001-of-00002.safetensors", a);
  WriteSafetensors(dir + "/model-00002-of-00002.safetensors", b);
  std::ofstream(dir + "/model.safetensors.index.json")
      << nlohmann::json{{"weight_map", map}}.dump();
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  // An index that names a tensor its shard lacks.
  map["model.extra.weight"] = "model-00002-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json")
      << nlohmann::json{{"weight_map", map}}.dump();
  ExpectLoadError(dir, StatusCode::kDataLoss, {"model.extra.weight", "model-00002-of-00002"});
}

// F16 and BF16 weights load and give logits close to the F32 ones.
TEST(ModelLoading, HalfPrecisionWeights) {
  auto tensors = TinyTensors();
  auto f32 =
      LoadModelWeights(MakeModelDir("f32", TinyConfig(), &tensors), LoadFormat::kSafetensors);
  ASSERT_TRUE(f32.ok());
  for (const char* dt : {"F16", "BF16"}) {
    auto half = tensors;
    for (auto& [n, t] : half) t.dtype = dt;
    auto w = LoadModelWeights(MakeModelDir(dt, TinyConfig(), &half), LoadFormat::kSafetensors);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ((*w)->layers[0].q.format, std::string(dt) == "F16" ? DType::kF16 : DType::kBF16);
    auto m32 = RankExecutor::Create(**f32);
    auto m16 = RankExecutor::Create(**w);
    ASSERT_TRUE(m32.ok() && m16.ok());
    ASSERT_TRUE((*m32)->AllocateCache(2, 16).ok());
    ASSERT_TRUE((*m16)->AllocateCache(2, 16).ok());
    ForwardBatch b;
    b.Clear();
    b.token_ids = {1, 4, 9};
    b.positions = {0, 1, 2};
    b.slot_mapping = {0, 1, 2};
    b.query_start = {0, 3};
    b.context_len = {3};
    b.block_tables = {0};
    b.max_blocks_per_seq = 1;
    b.logit_rows = {2};
    (*m32)->batch() = b;
    (*m16)->batch() = b;
    const float* l32 = *(*m32)->Execute();
    std::vector<float> ref(l32, l32 + 16);
    const float* l16 = *(*m16)->Execute();
    for (int v = 0; v < 16; ++v) EXPECT_NEAR(l16[v], ref[v], 0.1) << dt << " logit " << v;
  }
}

TEST(ModelLoading, DummyWeightsNeedOnlyConfig) {
  auto dir = MakeModelDir("dummy", TinyConfig(), nullptr);
  auto a = LoadModelWeights(dir, LoadFormat::kDummy, 42);
  auto b = LoadModelWeights(dir, LoadFormat::kDummy, 42);
  auto c = LoadModelWeights(dir, LoadFormat::kDummy, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const float* wa = static_cast<const float*>((*a)->layers[0].q.data);
  const float* wb = static_cast<const float*>((*b)->layers[0].q.data);
  const float* wc = static_cast<const float*>((*c)->layers[0].q.data);
  EXPECT_TRUE(std::equal(wa, wa + 64, wb)) << "same seed, different weights";
  EXPECT_FALSE(std::equal(wa, wa + 64, wc)) << "different seeds, same weights";
  EXPECT_EQ((*a)->matrix_bytes, (16 * 8 * 2 + 8 * 8 * 2 + 4 * 8 * 2 + 16 * 8 * 3) * 4u);
}

// Llama 3.1 rope_scaling, against values computed independently with transformers' formula.
TEST(ModelConfig, Llama3RopeScaling) {
  auto cfg = ParseModelConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 128256, "rope_theta": 500000.0,
      "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "eos_token_id": [128001, 128008, 128009]})",
                              "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto inv = RopeInvFreq(*cfg);
  ExpectLlama31InvFreq(inv);
  EXPECT_EQ(cfg->eos_token_ids.size(), 3u);
}

TEST(ModelConfig, UnsupportedRopeScalingIsNamed) {
  auto cfg = ParseModelConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
      "vocab_size": 100, "rope_scaling": {"type": "yarn", "factor": 4.0}})",
                              "cfg.json");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("rope_scaling"), std::string::npos);
  EXPECT_NE(cfg.status().message().find("yarn"), std::string::npos);
}

}  // namespace
}  // namespace llm::testing

namespace llm::testing {
namespace {

TEST(ModelLoading, LoadFormatIsParsedOrNamed) {
  EXPECT_EQ(*ParseLoadFormat("safetensors", "x"), LoadFormat::kSafetensors);
  EXPECT_EQ(*ParseLoadFormat("dummy", "x"), LoadFormat::kDummy);
  EXPECT_EQ(*ParseLoadFormat("gguf", "x"), LoadFormat::kGguf);
  auto bad = ParseLoadFormat("pickle", "--load-format");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--load-format"), std::string::npos);
  EXPECT_NE(bad.status().message().find("pickle"), std::string::npos);
}

}  // namespace
}  // namespace llm::testing
