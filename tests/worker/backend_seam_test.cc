// The kernel backend seam: the model must reach a device only through kernels::Backend.
// CheckedBackend plays a device whose memory is not host memory: it computes with the CPU
// kernels, but every pointer an op receives must lie inside a buffer it allocated (weights
// placed with PlaceWeights, activations, the KV cache, the batch's index arrays), and copies
// must go the right way. A model that read host memory directly, or skipped a copy, would be
// caught here before a CUDA backend exists. Results must be bitwise those of the CPU backend.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu_ops.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_executor.h"

namespace llm {
namespace {

class CheckedBackend final : public kernels::Backend {
 public:
  CheckedBackend() {
    caps_ = kernels::CpuBackend().caps();
    caps_.name = "checked";
    caps_.host_memory = false;
  }
  ~CheckedBackend() override { EXPECT_TRUE(live_.empty()) << live_.size() << " buffers leaked"; }

  kernels::BackendCaps& mutable_caps() { return caps_; }
  int violations() const { return violations_; }
  const std::string& first_violation() const { return first_; }

  const kernels::BackendCaps& caps() const override { return caps_; }
  StatusOr<kernels::Buffer> Allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) return ResourceExhausted("checked backend out of memory");
    live_[static_cast<const char*>(p)] = bytes;
    return kernels::Buffer(this, p, bytes);
  }
  void Zero(void* dst, size_t bytes) override {
    Check(dst, "Zero");
    std::memset(dst, 0, bytes);
  }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    Check(dst, "CopyToDevice dst");
    if (Inside(src)) Violation("CopyToDevice from device memory");
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    Check(src, "CopyToHost src");
    if (Inside(dst)) Violation("CopyToHost into device memory");
    std::memcpy(dst, src, bytes);
  }
  Status Synchronize() override { return Status::Ok(); }

  void Matmul(const float* x, int m, const kernels::Weight& w, const float* bias,
              float* y) override {
    Check(x, "Matmul x");
    Check(w.data, "Matmul weight");
    if (bias) Check(bias, "Matmul bias");
    Check(y, "Matmul y");
    cpu().Matmul(x, m, w, bias, y);
  }
  void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps,
               float* out) override {
    Check(x, "RmsNorm x");
    Check(weight, "RmsNorm weight");
    Check(out, "RmsNorm out");
    cpu().RmsNorm(x, weight, rows, dim, eps, out);
  }
  void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim,
                  float eps, float* out) override {
    Check(residual, "AddRmsNorm residual");
    Check(x, "AddRmsNorm x");
    Check(weight, "AddRmsNorm weight");
    Check(out, "AddRmsNorm out");
    cpu().AddRmsNorm(residual, x, weight, rows, dim, eps, out);
  }
  void Rope(float* x, const int32_t* positions, int tokens, int heads,
            const kernels::RopeLayout& layout, const float* inv_freq) override {
    Check(x, "Rope x");
    Check(positions, "Rope positions");
    Check(inv_freq, "Rope inv_freq");
    cpu().Rope(x, positions, tokens, heads, layout, inv_freq);
  }
  void SiluMul(const float* gate, const float* up, int64_t count, float* out) override {
    Check(gate, "SiluMul gate");
    Check(up, "SiluMul up");
    Check(out, "SiluMul out");
    cpu().SiluMul(gate, up, count, out);
  }
  void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) override {
    Check(gate, "GeluTanhMul gate");
    Check(up, "GeluTanhMul up");
    Check(out, "GeluTanhMul out");
    cpu().GeluTanhMul(gate, up, count, out);
  }
  void Scale(float* x, float s, int64_t count) override {
    Check(x, "Scale x");
    cpu().Scale(x, s, count);
  }
  void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count,
                      int cols, float* dst) override {
    Check(src, "ScatterAddRows src");
    Check(rows, "ScatterAddRows rows");
    Check(scale, "ScatterAddRows scale");
    Check(dst, "ScatterAddRows dst");
    cpu().ScatterAddRows(src, rows, scale, count, cols, dst);
  }
  void Add(float* x, const float* y, int64_t count) override {
    Check(x, "Add x");
    Check(y, "Add y");
    cpu().Add(x, y, count);
  }
  void AddBias(float* x, const float* bias, int rows, int cols) override {
    Check(x, "AddBias x");
    Check(bias, "AddBias bias");
    cpu().AddBias(x, bias, rows, cols);
  }
  void Embedding(const int32_t* ids, int tokens, const kernels::Weight& table, int first_id,
                 float* out) override {
    Check(ids, "Embedding ids");
    Check(table.data, "Embedding table");
    Check(out, "Embedding out");
    cpu().Embedding(ids, tokens, table, first_id, out);
  }
  void GatherRows(const float* src, const int32_t* rows, int count, int cols, float* dst) override {
    if (count > 0) {
      Check(src, "GatherRows src");
      Check(rows, "GatherRows rows");
      Check(dst, "GatherRows dst");
    }
    cpu().GatherRows(src, rows, count, cols, dst);
  }
  void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                       const int32_t* slot_mapping, int block_size, void* k_cache, void* v_cache,
                       DType cache_dtype) override {
    for (const void* p : {static_cast<const void*>(k), static_cast<const void*>(v),
                          static_cast<const void*>(slot_mapping), static_cast<const void*>(k_cache),
                          static_cast<const void*>(v_cache)}) {
      Check(p, "ReshapeAndCache");
    }
    cpu().ReshapeAndCache(k, v, tokens, kv_heads, head_dim, slot_mapping, block_size, k_cache,
                          v_cache, cache_dtype);
  }
  void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                      const kernels::AttentionBatch& batch, const kernels::AttentionParams& params,
                      float* out) override {
    for (const void* p :
         {static_cast<const void*>(q), static_cast<const void*>(k_cache),
          static_cast<const void*>(v_cache), static_cast<const void*>(batch.query_start),
          static_cast<const void*>(batch.context_len), static_cast<const void*>(batch.block_tables),
          static_cast<const void*>(out)}) {
      Check(p, "PagedAttention");
    }
    cpu().PagedAttention(q, k_cache, v_cache, batch, params, out);
  }

 protected:
  void Free(void* data) override {
    live_.erase(static_cast<const char*>(data));
    std::free(data);
  }

 private:
  static kernels::Backend& cpu() { return kernels::CpuBackend(); }
  bool Inside(const void* p) const {
    const char* c = static_cast<const char*>(p);
    auto it = live_.upper_bound(c);
    if (it == live_.begin()) return false;
    --it;
    return c >= it->first && c < it->first + std::max<size_t>(it->second, 1);
  }
  void Check(const void* p, const char* what) {
    if (!Inside(p)) Violation(std::string(what) + " points outside the backend's memory");
  }
  void Violation(const std::string& what) {
    if (violations_++ == 0) first_ = what;
  }
  kernels::BackendCaps caps_;
  std::map<const char*, size_t> live_;
  int violations_ = 0;
  std::string first_;
};

std::string FamilyDir(const std::string& family) {
  return std::string(LLM_SHARED_DIR) + "/golden/families/" + family + "/hf";
}

// Greedy generation of a few prompts with chunked prefill and several sequences per step.
std::vector<GenerateResult> Generate(const ModelWeights& w, kernels::Backend& backend) {
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.block_size = 4;
  cfg.scheduler.max_prefill_chunk = 5;
  auto engine = Engine::Create(w, cfg, nullptr, backend);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return {};
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 3; ++i) {
    GenerateRequest r;
    for (int t = 0; t < 7 + 3 * i; ++t) r.prompt.push_back((5 + 11 * t + i) % 50 + 3);
    r.max_tokens = 6;
    r.ignore_eos = true;
    r.sampling.logprobs = 3;
    requests.push_back(r);
  }
  auto out = GenerateAll(**engine, requests);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<GenerateResult>{};
}

class BackendSeam : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendSeam, DeviceBackendTouchesOnlyItsMemoryAndMatchesCpuBitwise) {
  const std::string dir = FamilyDir(GetParam());
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  auto host = LoadModelWeights(dir, LoadFormat::kSafetensors);
  auto device = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(host.ok() && device.ok()) << host.status().ToString();
  const std::vector<GenerateResult> want = Generate(**host, kernels::CpuBackend());
  {
    CheckedBackend backend;
    ASSERT_TRUE(PlaceWeights(**device, backend).ok());
    EXPECT_FALSE((*device)->placed.empty());
    const std::vector<GenerateResult> got = Generate(**device, backend);
    EXPECT_EQ(backend.violations(), 0) << backend.first_violation();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].tokens.size(), want[i].tokens.size());
      for (size_t t = 0; t < want[i].tokens.size(); ++t) {
        EXPECT_EQ(got[i].tokens[t].token, want[i].tokens[t].token) << "request " << i;
        EXPECT_EQ(got[i].tokens[t].logprob, want[i].tokens[t].logprob) << "request " << i;
      }
    }
    (*device)->placed.clear();  // the backend frees its buffers before it goes away
  }
}

// Llama (tied, GQA), Mistral (sliding window), Qwen2 (q/k/v biases), Qwen3 (q/k norms).
INSTANTIATE_TEST_SUITE_P(Families, BackendSeam,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
                                           "phi3", "mixtral", "qwen2moe"));

TEST(BackendSeamErrors, UnplacedWeightsLimitsAndFormatsAreClearErrors) {
  const std::string dir = FamilyDir("llama");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(w.ok());
  CheckedBackend backend;
  auto unplaced = RankExecutor::Create(**w, backend);
  ASSERT_FALSE(unplaced.ok());
  EXPECT_EQ(unplaced.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(unplaced.status().message().find("PlaceWeights"), std::string::npos);

  backend.mutable_caps().max_block_size = 8;
  EngineConfig cfg;
  cfg.num_blocks = 8;
  cfg.block_size = 16;
  ASSERT_TRUE(PlaceWeights(**w, backend).ok());
  auto engine = Engine::Create(**w, cfg, nullptr, backend);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("engine.block_size"), std::string::npos)
      << engine.status().ToString();
  EXPECT_NE(engine.status().message().find("checked"), std::string::npos);

  // engine.kv_cache_dtype float16 on a backend whose cache holds float32 only (CUDA's today):
  // refused at allocation, naming the key and what the backend has; float32 still works.
  backend.mutable_caps().max_block_size = 16;
  backend.mutable_caps().kv_cache_dtypes = {DType::kF32};
  cfg.kv_cache_dtype = "float16";
  auto half_kv = Engine::Create(**w, cfg, nullptr, backend);
  ASSERT_FALSE(half_kv.ok());
  EXPECT_EQ(half_kv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(half_kv.status().message().find("engine.kv_cache_dtype"), std::string::npos)
      << half_kv.status().ToString();
  EXPECT_NE(half_kv.status().message().find("only F32"), std::string::npos)
      << half_kv.status().ToString();
  cfg.kv_cache_dtype = "float32";
  EXPECT_TRUE(Engine::Create(**w, cfg, nullptr, backend).ok());

  backend.mutable_caps().max_head_dim = (*w)->config.head_dim - 2;
  auto exec = RankExecutor::Create(**w, backend);
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("head_dim"), std::string::npos)
      << exec.status().ToString();
  (*w)->placed.clear();

  auto f32 = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(f32.ok());
  CheckedBackend half_only;
  half_only.mutable_caps().weight_formats = {DType::kBF16};
  const Status s = PlaceWeights(**f32, half_only);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("F32"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("checked"), std::string::npos) << s.ToString();
}

// Rank 0 of two ranks whose collectives never run (TransformerModel::Create does none).
class TwoRankComm final : public Communicator {
 public:
  explicit TwoRankComm(bool device_memory) : device_memory_(device_memory) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  bool device_memory() const override { return device_memory_; }
  void AllReduceSum(float*, size_t) override { ADD_FAILURE() << "AllReduceSum"; }
  void Gather(const float*, size_t, float*, int) override { ADD_FAILURE() << "Gather"; }
  void Broadcast(std::vector<uint8_t>&, int) override { ADD_FAILURE() << "Broadcast"; }
  void Send(const float*, size_t, int) override { ADD_FAILURE() << "Send"; }
  void Recv(float*, size_t, int) override { ADD_FAILURE() << "Recv"; }
  int StartRecv(float*, size_t, int) override {
    ADD_FAILURE() << "StartRecv";
    return 0;
  }
  void WaitRecv(int) override { ADD_FAILURE() << "WaitRecv"; }

 private:
  bool device_memory_;
};

TEST(BackendSeamErrors, TensorParallelOnADeviceNeedsADeviceCommunicator) {
  const std::string dir = FamilyDir("llama");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors, 0, TensorParallel{0, 2});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  CheckedBackend backend;
  ASSERT_TRUE(PlaceWeights(**w, backend).ok());
  TwoRankComm host(/*device_memory=*/false);
  auto refused = RankExecutor::Create(**w, backend, &host);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("host memory"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("device memory"), std::string::npos)
      << refused.status().ToString();

  TwoRankComm device(/*device_memory=*/true);
  auto accepted = RankExecutor::Create(**w, backend, &device);
  EXPECT_TRUE(accepted.ok()) << accepted.status().ToString();

  // The host-memory CPU backend keeps using the host communicator.
  auto cpu_weights = LoadModelWeights(dir, LoadFormat::kSafetensors, 0, TensorParallel{0, 2});
  ASSERT_TRUE(cpu_weights.ok());
  auto cpu = RankExecutor::Create(**cpu_weights, kernels::CpuBackend(), &host);
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  (*w)->placed.clear();
}

}  // namespace
}  // namespace llm
