// Decode graphs (CUDA graphs) without a GPU: the padding of decode batches to recorded sizes,
// and the model's graph path end to end on RecordingBackend, a device-memory backend that
// computes with the CPU kernels and, between BeginCapture and EndCapture, records each op as a
// closure instead of running it; ReplayGraph runs the closures again. So a model that copied or
// allocated while recording, decided something on the host inside a graph, or replayed a graph
// after a buffer it points into was freed, is caught here; and since the CPU kernels are batch
// invariant, graph steps (padded) must give bitwise the tokens and logprobs of plain steps.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "worker/engine/engine.h"
#include "worker/model/graph_batch.h"
#include "worker/model/model_weights.h"

namespace llm {
namespace {

TEST(GraphBatch, SizesArePowersOfTwoThenMultiplesOfEight) {
  const int want[] = {0, 1, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16, 24};
  for (int s = 0; s < 18; ++s) EXPECT_EQ(GraphBatchSize(s, 64), want[s]) << s;
  EXPECT_EQ(GraphBatchSize(64, 64), 64);
  EXPECT_EQ(GraphBatchSize(57, 64), 64);
  EXPECT_EQ(GraphBatchSize(65, 64), 0);
  EXPECT_EQ(GraphBatchSize(3, 2), 0);  // 4 > max
  EXPECT_EQ(GraphBatchSize(1, 0), 0);
}

ForwardBatch Decode(int seqs, int max_blocks) {
  ForwardBatch b;
  b.max_blocks_per_seq = max_blocks;
  b.query_start.push_back(0);
  for (int s = 0; s < seqs; ++s) {
    b.token_ids.push_back(10 + s);
    b.positions.push_back(5 + s);
    b.slot_mapping.push_back(100 + s);
    b.query_start.push_back(s + 1);
    b.context_len.push_back(6 + s);
    b.logit_rows.push_back(s);
    for (int i = 0; i < max_blocks; ++i) b.block_tables.push_back(s * 10 + i);
  }
  return b;
}

TEST(GraphBatch, OnlyPureDecodeStepsAreGraphable) {
  EXPECT_TRUE(IsGraphableDecode(Decode(3, 2), 4));
  EXPECT_FALSE(IsGraphableDecode(Decode(3, 5), 4));  // a table wider than recorded
  EXPECT_FALSE(IsGraphableDecode(Decode(0, 1), 4));
  ForwardBatch prefill = Decode(2, 2);
  prefill.token_ids.push_back(1);  // sequence 1 gets two rows
  prefill.positions.push_back(7);
  prefill.slot_mapping.push_back(102);
  prefill.query_start[2] = 3;
  EXPECT_FALSE(IsGraphableDecode(prefill, 4));
  ForwardBatch scoring = Decode(2, 2);
  scoring.logit_rows = {1};  // not every row's logits
  EXPECT_FALSE(IsGraphableDecode(scoring, 4));
}

TEST(GraphBatch, PaddingSequencesWriteNothingAndFollowTheRealOnes) {
  ForwardBatch padded;
  PadDecodeBatch(Decode(3, 2), 4, 5, &padded);
  EXPECT_EQ(padded.token_ids, (std::vector<int32_t>{10, 11, 12, 0}));
  EXPECT_EQ(padded.positions, (std::vector<int32_t>{5, 6, 7, 0}));
  EXPECT_EQ(padded.slot_mapping, (std::vector<int32_t>{100, 101, 102, -1}));
  EXPECT_EQ(padded.query_start, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(padded.context_len, (std::vector<int32_t>{6, 7, 8, 1}));
  EXPECT_EQ(padded.logit_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(padded.max_blocks_per_seq, 5);
  EXPECT_EQ(padded.block_tables,
            (std::vector<int32_t>{0, 1, 0, 0, 0, 10, 11, 0, 0, 0, 20, 21, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(IsGraphableDecode(padded, 5));
}

// A device-memory backend with graphs, computing with the CPU kernels.
class RecordingBackend final : public kernels::Backend {
 public:
  RecordingBackend() {
    caps_ = kernels::CpuBackend().caps();
    caps_.name = "recording";
    caps_.host_memory = false;
  }

  int recorded() const { return recorded_; }
  int replayed() const { return replayed_; }
  int violations() const { return violations_; }
  const std::string& first_violation() const { return first_; }

  const kernels::BackendCaps& caps() const override { return caps_; }
  StatusOr<kernels::Buffer> Allocate(size_t bytes) override {
    if (capturing_) Violation("Allocate while recording");
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) return ResourceExhausted("recording backend out of memory");
    return kernels::Buffer(this, p, bytes);
  }
  void Zero(void* dst, size_t bytes) override {
    Run([=] { std::memset(dst, 0, bytes); });
  }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (capturing_) Violation("CopyToDevice while recording");
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (capturing_) Violation("CopyToHost while recording");
    std::memcpy(dst, src, bytes);
  }
  Status Synchronize() override {
    if (capturing_) Violation("Synchronize while recording");
    return Status::Ok();
  }
  void Matmul(const float* x, int m, const kernels::Weight& w, const float* bias,
              float* y) override {
    Run([=] { cpu().Matmul(x, m, w, bias, y); });
  }
  void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps,
               float* out) override {
    Run([=] { cpu().RmsNorm(x, weight, rows, dim, eps, out); });
  }
  void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim,
                  float eps, float* out) override {
    Run([=] { cpu().AddRmsNorm(residual, x, weight, rows, dim, eps, out); });
  }
  void Rope(float* x, const int32_t* positions, int tokens, int heads,
            const kernels::RopeLayout& layout, const float* inv_freq) override {
    Run([=] { cpu().Rope(x, positions, tokens, heads, layout, inv_freq); });
  }
  void SiluMul(const float* gate, const float* up, int64_t count, float* out) override {
    Run([=] { cpu().SiluMul(gate, up, count, out); });
  }
  void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) override {
    Run([=] { cpu().GeluTanhMul(gate, up, count, out); });
  }
  void Scale(float* x, float s, int64_t count) override {
    Run([=] { cpu().Scale(x, s, count); });
  }
  void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count,
                      int cols, float* dst) override {
    Run([=] { cpu().ScatterAddRows(src, rows, scale, count, cols, dst); });
  }
  void Add(float* x, const float* y, int64_t count) override {
    Run([=] { cpu().Add(x, y, count); });
  }
  void AddBias(float* x, const float* bias, int rows, int cols) override {
    Run([=] { cpu().AddBias(x, bias, rows, cols); });
  }
  void Embedding(const int32_t* ids, int tokens, const kernels::Weight& table, int first_id,
                 float* out) override {
    Run([=] { cpu().Embedding(ids, tokens, table, first_id, out); });
  }
  void GatherRows(const float* src, const int32_t* rows, int count, int cols, float* dst) override {
    Run([=] { cpu().GatherRows(src, rows, count, cols, dst); });
  }
  void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                       const int32_t* slot_mapping, int block_size, void* k_cache, void* v_cache,
                       DType cache_dtype) override {
    Run([=] {
      cpu().ReshapeAndCache(k, v, tokens, kv_heads, head_dim, slot_mapping, block_size, k_cache,
                            v_cache, cache_dtype);
    });
  }
  void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                      const kernels::AttentionBatch& batch, const kernels::AttentionParams& params,
                      float* out) override {
    // The batch's index arrays are device memory: a graph reads their values at replay.
    Run([=] { cpu().PagedAttention(q, k_cache, v_cache, batch, params, out); });
  }

  bool SupportsGraphs() const override { return true; }
  Status BeginCapture() override {
    if (capturing_) Violation("BeginCapture while recording");
    capturing_ = true;
    graphs_.emplace_back();
    return Status::Ok();
  }
  StatusOr<int> EndCapture() override {
    if (!capturing_) Violation("EndCapture without BeginCapture");
    capturing_ = false;
    ++recorded_;
    frees_at_record_.push_back(frees_);
    return static_cast<int>(graphs_.size()) - 1;
  }
  Status ReplayGraph(int id) override {
    if (id < 0 || id >= static_cast<int>(graphs_.size())) return InvalidArgument("no such graph");
    // Any buffer freed since the recording may be one the graph points into.
    if (frees_at_record_[id] != frees_) {
      Violation("replay of a graph recorded before a Free");
      return Internal("stale graph");  // its closures would read freed memory
    }
    for (const auto& op : graphs_[id]) op();
    ++replayed_;
    return Status::Ok();
  }
  void DropGraphs() override {
    graphs_.clear();
    frees_at_record_.clear();
  }

 protected:
  void Free(void* data) override {
    ++frees_;
    std::free(data);
  }

 private:
  static kernels::Backend& cpu() { return kernels::CpuBackend(); }
  void Run(std::function<void()> op) {
    if (capturing_) {
      graphs_.back().push_back(std::move(op));
    } else {
      op();
    }
  }
  void Violation(const std::string& what) {
    if (violations_++ == 0) first_ = what;
  }

  kernels::BackendCaps caps_;
  bool capturing_ = false;
  std::vector<std::vector<std::function<void()>>> graphs_;
  std::vector<int> frees_at_record_;
  int frees_ = 0, recorded_ = 0, replayed_ = 0, violations_ = 0;
  std::string first_;
};

// Greedy generation of `prompts` prompts of growing lengths, 12 new tokens each.
std::vector<GenerateResult> Generate(const ModelWeights& w, kernels::Backend& backend,
                                     int graph_max_batch, int prompts, int first_len) {
  EngineConfig cfg;
  cfg.num_blocks = 128;
  cfg.block_size = 4;
  cfg.max_model_len = 64;
  cfg.cuda_graph_max_batch = graph_max_batch;
  // Three at a time: later (longer) prompts prefill after decode graphs exist and grow the
  // workspace they point into.
  cfg.scheduler.max_num_seqs = 3;
  auto engine = Engine::Create(w, cfg, nullptr, backend);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return {};
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < prompts; ++i) {
    GenerateRequest r;
    for (int t = 0; t < first_len + 3 * i; ++t) r.prompt.push_back((5 + 11 * t + i) % 50 + 3);
    r.max_tokens = 12;
    r.ignore_eos = true;
    r.sampling.logprobs = 2;
    requests.push_back(r);
  }
  auto out = GenerateAll(**engine, requests);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<GenerateResult>{};
}

void ExpectSame(const std::vector<GenerateResult>& got, const std::vector<GenerateResult>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].tokens.size(), want[i].tokens.size()) << "request " << i;
    for (size_t t = 0; t < want[i].tokens.size(); ++t) {
      EXPECT_EQ(got[i].tokens[t].token, want[i].tokens[t].token) << "request " << i << " " << t;
      EXPECT_EQ(got[i].tokens[t].logprob, want[i].tokens[t].logprob) << "request " << i;
    }
  }
}

class DecodeGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeGraphs, ReplayedStepsMatchPlainStepsBitwise) {
  const std::string dir = std::string(LLM_SHARED_DIR) + "/golden/families/" + GetParam() + "/hf";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  auto host = LoadModelWeights(dir, LoadFormat::kSafetensors);
  auto device = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(host.ok() && device.ok()) << host.status().ToString();
  RecordingBackend backend;
  ASSERT_TRUE(PlaceWeights(**device, backend).ok());
  // 3 sequences decode padded to 4, 2 to 2, 1 alone; prompts 4 and 5 prefill after the first
  // three decoded, with more tokens, so the graphs must be recorded again.
  for (auto [prompts, first_len] :
       {std::pair{3, 5}, std::pair{5, 3}, std::pair{1, 9}, std::pair{6, 20}}) {
    SCOPED_TRACE(std::to_string(prompts) + " prompts");
    const int recorded = backend.recorded(), replayed = backend.replayed();
    ExpectSame(Generate(**device, backend, 8, prompts, first_len),
               Generate(**host, kernels::CpuBackend(), 0, prompts, first_len));
    EXPECT_GT(backend.recorded(), recorded);
    EXPECT_GT(backend.replayed(), replayed);
  }
  EXPECT_EQ(backend.violations(), 0) << backend.first_violation();
  (*device)->placed.clear();  // the backend frees its buffers before it goes away
}

// Llama (tied, GQA), Mistral (sliding window), Qwen2 (biases), Gemma 2 (soft-caps, sandwich
// norms).
INSTANTIATE_TEST_SUITE_P(Families, DecodeGraphs,
                         ::testing::Values("llama", "mistral", "qwen2", "gemma2"));

TEST(DecodeGraphsOff, ForMixtureOfExpertsAndBackendsWithoutGraphs) {
  const std::string dir = std::string(LLM_SHARED_DIR) + "/golden/families/mixtral/hf";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  auto w = LoadModelWeights(dir, LoadFormat::kSafetensors);
  ASSERT_TRUE(w.ok());
  auto cpu = RankExecutor::Create(**w, kernels::CpuBackend());
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE((*cpu)->EnableGraphs(8, 16));
  EXPECT_NE((*cpu)->model().graphs_off_reason().find("no graphs"), std::string::npos);
  RecordingBackend backend;
  ASSERT_TRUE(PlaceWeights(**w, backend).ok());
  auto moe = RankExecutor::Create(**w, backend);
  ASSERT_TRUE(moe.ok());
  EXPECT_FALSE((*moe)->EnableGraphs(8, 16));
  EXPECT_NE((*moe)->model().graphs_off_reason().find("experts"), std::string::npos);
  moe->reset();
  (*w)->placed.clear();
}

}  // namespace
}  // namespace llm
