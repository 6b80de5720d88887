// cluster.yaml: defaults, overrides, and errors that name the key.
#include "common/cluster_config.h"

#include <gtest/gtest.h>

namespace llm {
namespace {

TEST(ClusterConfig, ParsesSectionsAndDefaults) {
  auto c = ParseClusterConfig(R"(
model:
  path: /models/stories260K/
  load_format: dummy
engine:
  block_size: 32
  kv_cache_memory_fraction: 0.5
router:
  port: 8080
  upstreams: [a:1, b:2]
)",
                              "cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.path, "/models/stories260K/");
  EXPECT_EQ(c->model.served_model_name, "stories260K");
  EXPECT_EQ(c->model.load_format, LoadFormat::kDummy);
  EXPECT_EQ(c->engine.block_size, 32);
  EXPECT_DOUBLE_EQ(c->engine.kv_cache_memory_fraction, 0.5);
  EXPECT_EQ(c->router.http.port, 8080);
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(c->engine.scheduler.max_num_seqs, 256);  // default
}

TEST(ClusterConfig, OverridesWinAndUpstreamDefaultsToCoordinator) {
  auto c = ParseClusterConfig("engine: {block_size: 32}\ncoordinator: {port: 6000}", "x.yaml",
                              {{"engine.block_size", "8"}, {"model.path", "/m/llama"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.block_size, 8);
  EXPECT_EQ(c->model.served_model_name, "llama");
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"127.0.0.1:6000"}));
}

void ExpectError(const std::string& yaml, const std::string& mention,
                 std::vector<std::pair<std::string, std::string>> overrides = {}) {
  auto c = ParseClusterConfig(yaml, "cluster.yaml", overrides);
  ASSERT_FALSE(c.ok()) << "accepted: " << yaml;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(mention), std::string::npos) << c.status().message();
}

TEST(ClusterConfig, ErrorsNameTheKey) {
  ExpectError("engine: {block_sise: 16}", "engine.block_sise");
  ExpectError("engine: {block_size: 0}", "engine.block_size");
  ExpectError("engine: {block_size: sixteen}", "engine.block_size");
  ExpectError("engine: {kv_cache_memory_fraction: 2}", "engine.kv_cache_memory_fraction");
  ExpectError("model: {load_format: pickle}", "model.load_format");
  ExpectError("model: {quantization: q3_m}", "model.quantization");
  ExpectError("router: {port: 70000}", "router.port");
  ExpectError("router: 5", "router");
  ExpectError("engine: [1, 2", "not valid YAML");
  ExpectError("", "--engine.nope", {{"engine.nope", "1"}});
  ExpectError("", "engine.max_num_seqs", {{"engine.max_num_seqs", "-3"}});
}

TEST(ClusterConfig, DeviceKeys) {
  auto d = ParseClusterConfig("", "x.yaml");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->engine.device, "cpu");
  EXPECT_DOUBLE_EQ(d->engine.gpu_memory_utilization, 0.9);
  EXPECT_EQ(d->engine.cuda_graph_max_batch, 64);

  auto c = ParseClusterConfig(
      "engine: {device: cuda, gpu_memory_utilization: 0.5, cuda_graph_max_batch: 0}", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.device, "cuda");
  EXPECT_DOUBLE_EQ(c->engine.gpu_memory_utilization, 0.5);
  EXPECT_EQ(c->engine.cuda_graph_max_batch, 0);

  // The command line wins, as for every key.
  c = ParseClusterConfig("engine: {device: cpu}", "x.yaml",
                         {{"engine.device", "cuda"},
                          {"engine.gpu_memory_utilization", "1"},
                          {"engine.cuda_graph_max_batch", "128"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.device, "cuda");
  EXPECT_DOUBLE_EQ(c->engine.gpu_memory_utilization, 1.0);
  EXPECT_EQ(c->engine.cuda_graph_max_batch, 128);

  ExpectError("engine: {device: gpu}", "engine.device");
  ExpectError("engine: {device: [cuda]}", "engine.device");
  ExpectError("engine: {gpu_memory_utilization: 0}", "engine.gpu_memory_utilization");
  ExpectError("engine: {gpu_memory_utilization: 1.01}", "engine.gpu_memory_utilization");
  ExpectError("engine: {gpu_memory_utilization: -0.5}", "engine.gpu_memory_utilization");
  ExpectError("engine: {gpu_memory_utilization: lots}", "engine.gpu_memory_utilization");
  ExpectError("engine: {cuda_graph_max_batch: -1}", "engine.cuda_graph_max_batch");
  ExpectError("engine: {cuda_graph_max_batch: 1025}", "engine.cuda_graph_max_batch");
  ExpectError("", "engine.device", {{"engine.device", "tpu"}});
}

// engine.kv_cache_dtype: vLLM's name; float32 keeps float, float16 halves; auto (the default)
// is resolved against the model at start-up (tests/worker/kv_cache_dtype_test.cc), so its
// explicit mapping here is float32.
TEST(ClusterConfig, KvCacheDtype) {
  auto d = ParseClusterConfig("", "x.yaml");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->engine.kv_cache_dtype, "auto");
  EXPECT_EQ(d->engine.kv_cache_element_type(), DType::kF32);
  auto c = ParseClusterConfig("engine: {kv_cache_dtype: float16}", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.kv_cache_element_type(), DType::kF16);
  c = ParseClusterConfig("engine: {kv_cache_dtype: float16}", "x.yaml",
                         {{"engine.kv_cache_dtype", "float32"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.kv_cache_element_type(), DType::kF32);
  for (const char* bad : {"fp8", "half", "Float16", "float16 ", "bfloat16", ""}) {
    ExpectError("", "engine.kv_cache_dtype", {{"engine.kv_cache_dtype", bad}});
  }
  ExpectError("engine: {kv_cache_dtype: [float16]}", "engine.kv_cache_dtype");
}

// engine.huge_pages: auto (the default) or off; engine.matmul_isa takes every path's name.
TEST(ClusterConfig, HugePagesAndMatmulIsa) {
  auto d = ParseClusterConfig("", "x.yaml");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->engine.huge_pages, "auto");
  auto c = ParseClusterConfig("engine: {huge_pages: off}", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.huge_pages, "off");
  for (const char* bad : {"on", "true", "madvise", "", "[off]"}) {
    ExpectError("", "engine.huge_pages", {{"engine.huge_pages", bad}});
  }
  ExpectError("engine: {huge_pages: [auto]}", "engine.huge_pages");
  for (const char* isa : {"auto", "avx512-amx", "avx512-vnni", "avx512", "avx2-fma", "scalar"}) {
    auto i = ParseClusterConfig("", "x.yaml", {{"engine.matmul_isa", isa}});
    ASSERT_TRUE(i.ok()) << isa << ": " << i.status().ToString();
    EXPECT_EQ(i->engine.matmul_isa, isa);
  }
  ExpectError("", "engine.matmul_isa", {{"engine.matmul_isa", "avx512vnni"}});
}

TEST(ClusterConfig, ModelQuantization) {
  auto c =
      ParseClusterConfig("model: {quantization: q8_0}", "x.yaml", {{"model.quantization", "q4_k"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.quantization, "q4_k");
  DType t;
  ASSERT_TRUE(ParseQuantFormat(c->model.quantization, &t));
  EXPECT_EQ(t, DType::kQ4_K);
  for (const auto& [name, want] : {std::pair{"iq4_nl", DType::kIQ4_NL},
                                   {"IQ4_XS", DType::kIQ4_XS},
                                   {"mxfp4", DType::kMXFP4},
                                   {"Q1_0", DType::kQ1_0},
                                   {"nvfp4", DType::kNVFP4}}) {
    ASSERT_TRUE(ParseQuantFormat(name, &t)) << name;
    EXPECT_EQ(t, want) << name;
  }
  auto iq = ParseClusterConfig("model: {quantization: iq4_xs}", "x.yaml");
  ASSERT_TRUE(iq.ok()) << iq.status().ToString();
  auto bad = ParseClusterConfig("model: {quantization: iq3_xs}", "x.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.quantization"), std::string::npos)
      << bad.status().ToString();
  auto d = ParseClusterConfig("", "x.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->model.quantization, "none");
  EXPECT_FALSE(ParseQuantFormat(d->model.quantization, &t));
}

TEST(ClusterConfig, HelpListsEveryKey) {
  const std::string help = ClusterConfigHelp();
  for (const char* k : {"model.path", "model.quantization", "engine.block_size", "router.upstreams",
                        "coordinator.port"}) {
    EXPECT_NE(help.find(k), std::string::npos) << k;
  }
}

TEST(ClusterConfig, HuggingFaceCacheSnapshotIsServedUnderTheRepoName) {
  for (const char* path : {"/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B/"
                           "snapshots/0e9e39f249a16976918f6564b8830bc894c89659",
                           "/hub/models--meta-llama--Llama-3.1-8B/snapshots/abc/"}) {
    auto c = ParseClusterConfig("", "x.yaml", {{"model.path", path}});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->model.served_model_name, "meta-llama/Llama-3.1-8B") << path;
  }
  auto plain = ParseClusterConfig("", "x.yaml", {{"model.path", "/m/snapshots/abc"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->model.served_model_name, "abc");
  auto gguf = ParseClusterConfig("", "x.yaml", {{"model.path", "/models/llama-q8_0.gguf"}});
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ(gguf->model.served_model_name, "llama-q8_0");
}

// The engine takes the engine section itself (EngineConfig derives from EngineSection), so the
// scheduler's defaults are the schema's: they once drifted (max_prefill_chunk 512 vs 0).
TEST(ClusterConfig, EngineSectionIsWhatTheEngineGets) {
  auto c = ParseClusterConfig(
      "engine: {max_prefill_chunk: 64, max_num_seqs: 3, max_prefill_tokens_while_decoding: 48}",
      "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.scheduler.max_prefill_chunk, 64);
  EXPECT_EQ(c->engine.scheduler.max_num_seqs, 3);
  EXPECT_EQ(c->engine.scheduler.max_prefill_tokens_while_decoding, 48);
  auto d = ParseClusterConfig("", "empty.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->engine.scheduler.max_prefill_chunk, SchedulerConfig{}.max_prefill_chunk);
  // Auto: a bound on a CPU (a step's time grows with its tokens), none on CUDA (as vLLM).
  EXPECT_EQ(SchedulerConfig{}.max_prefill_tokens_while_decoding, -1);
  EXPECT_EQ(d->engine.scheduler.max_prefill_tokens_while_decoding, kCpuPrefillTokensWhileDecoding);
  auto gpu = ParseClusterConfig("engine: {device: cuda}", "x.yaml");
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(gpu->engine.scheduler.max_prefill_tokens_while_decoding, 0);
  auto off = ParseClusterConfig("engine: {max_prefill_tokens_while_decoding: 0}", "x.yaml");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->engine.scheduler.max_prefill_tokens_while_decoding, 0);
  auto bad = ParseClusterConfig("engine: {max_prefill_tokens_while_decoding: -2}", "x.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("engine.max_prefill_tokens_while_decoding"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(ClusterConfigHelp().find("--engine.max_prefill_chunk (int [0, 1048576], default '" +
                                     std::to_string(SchedulerConfig{}.max_prefill_chunk) + "')"),
            std::string::npos);
}

}  // namespace
}  // namespace llm
