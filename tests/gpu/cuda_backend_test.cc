// The CUDA backend (kernels/cuda_backend.h) against the CPU references, op by op, through the
// kernels::Backend interface the model uses. Label gpu: the cases that need a device skip with a
// message when there is none (or the build has no CUDA); the error paths run everywhere.
//
// Tolerances (relative to 1 + |reference|): F32 ops 1e-5 (float sums in another order than the
// reference's double ones: norms, attention), Matmul 1e-4 for F32 weights (no TF32: k-long
// float sums) and 5e-4 for F16/BF16 weights against a reference whose activations are rounded
// to the weight's type, as the backend rounds them for the tensor cores (the products are then
// exact in float; only the order of the float32 sums differs). On an H200, the unrounded
// reference was 0.0198 away for BF16 and 0.0028 for F16 at k = 333.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu_ops.h"
#include "kernels/cuda_backend.h"
#include "kernels/reference_ops.h"
#include "tests/kernels/random_floats.h"

namespace llm::kernels {
namespace {

using testing::RandomFloats;

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(CudaBackendErrors, AnswersWithoutADevice) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present: the no-device path";
  StatusOr<Backend*> b = CudaBackend(0);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find(CudaCompiled() ? "no CUDA device" : "no CUDA backend"),
            std::string::npos)
      << b.status().ToString();
}

TEST(CudaBackendErrors, CpuBackendIsNotACudaBackend) {
  EXPECT_EQ(CudaStreamOf(CpuBackend()), nullptr);
  StatusOr<DeviceMemoryInfo> info = CudaMemoryInfo(CpuBackend());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(info.status().message().find("cpu"), std::string::npos);
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaCompiled()) GTEST_SKIP() << "this build has no CUDA backend (no nvcc at configure)";
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
    StatusOr<Backend*> b = CudaBackend(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = *b;
  }
  void TearDown() override {
    if (gpu_) {
      EXPECT_TRUE(gpu_->Synchronize().ok());
    }
  }

  // Device copies of host arrays, kept alive for the test.
  template <typename T>
  T* Up(const std::vector<T>& host) {
    buffers_.push_back(gpu_->Allocate(std::max<size_t>(1, host.size()) * sizeof(T)).value());
    gpu_->CopyToDevice(buffers_.back().data(), host.data(), host.size() * sizeof(T));
    return buffers_.back().as<T>();
  }
  template <typename T>
  std::vector<T> Down(const T* device, size_t n) {
    std::vector<T> host(n);
    gpu_->CopyToHost(host.data(), device, n * sizeof(T));
    return host;
  }

  Backend* gpu_ = nullptr;
  std::vector<Buffer> buffers_;
};

TEST_F(CudaBackendTest, CapsAndMemory) {
  EXPECT_FALSE(gpu_->caps().host_memory);
  EXPECT_TRUE(gpu_->caps().SupportsWeightFormat(DType::kBF16));
  EXPECT_FALSE(gpu_->caps().SupportsWeightFormat(DType::kQ8_0));
  EXPECT_NE(CudaStreamOf(*gpu_), nullptr);
  StatusOr<DeviceMemoryInfo> info = CudaMemoryInfo(*gpu_);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->free_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
  // Asking for more than the device has is an error, not a crash, and not sticky.
  StatusOr<Buffer> huge = gpu_->Allocate(info->total_bytes * 2);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(gpu_->Synchronize().ok());
  // One GPU per process.
  EXPECT_EQ(CudaBackend(0).value(), gpu_);
  if (CudaDeviceCount() > 1) {
    EXPECT_FALSE(CudaBackend(1).ok());
  }
}

TEST_F(CudaBackendTest, NormsMatchReference) {
  const int rows = 5, dim = 4096 + 3;
  auto x = RandomFloats(rows * dim, 1, -3, 3), w = RandomFloats(dim, 2),
       r = RandomFloats(rows * dim, 3);
  std::vector<float> want(x.size());
  ref::RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
  float* dx = Up(x);
  float* dout = Up(std::vector<float>(x.size()));
  gpu_->RmsNorm(dx, Up(w), rows, dim, 1e-5f, dout);
  ExpectNear(Down(dout, x.size()), want, 1e-5f, "RmsNorm");
  // AddRmsNorm: residual += x, out = norm(residual).
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = r[i] + x[i];
  ref::RmsNorm(sum.data(), w.data(), rows, dim, 1e-6f, want.data());
  float* dr = Up(r);
  gpu_->AddRmsNorm(dr, dx, Up(w), rows, dim, 1e-6f, dout);
  ExpectNear(Down(dr, x.size()), sum, 0.0f, "AddRmsNorm residual");
  ExpectNear(Down(dout, x.size()), want, 1e-5f, "AddRmsNorm");
}

TEST_F(CudaBackendTest, MatmulPerWeightFormat) {
  for (int m : {1, 7, 64}) {
    const int k = 333, n = 129;
    auto x = RandomFloats(m * k, 3), wf = RandomFloats(n * k, 4), bias = RandomFloats(n, 5);
    for (DType f : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<uint16_t> half(wf.size());
      for (size_t i = 0; i < wf.size(); ++i) {
        half[i] = f == DType::kF16 ? F32ToF16(wf[i]) : F32ToBf16(wf[i]);
      }
      const void* host_w = f == DType::kF32 ? static_cast<const void*>(wf.data()) : half.data();
      // The activations as the backend feeds them to the tensor cores.
      std::vector<float> xr(x);
      if (f == DType::kF16) {
        for (float& v : xr) v = F16ToF32(F32ToF16(v));
      } else if (f == DType::kBF16) {
        for (float& v : xr) v = Bf16ToF32(F32ToBf16(v));
      }
      std::vector<float> want(m * n);
      ref::Matmul(xr.data(), m, k, host_w, f, n, bias.data(), want.data());
      const void* dw = f == DType::kF32 ? static_cast<const void*>(Up(wf)) : Up(half);
      float* dy = Up(std::vector<float>(m * n));
      gpu_->Matmul(Up(x), m, Weight{dw, f, n, k}, Up(bias), dy);
      const float tol = f == DType::kF32 ? 1e-4f : 5e-4f;
      ExpectNear(Down(dy, m * n), want, tol,
                 std::string("Matmul ") + DTypeName(f) + " m=" + std::to_string(m));
    }
  }
}

TEST_F(CudaBackendTest, UnsupportedWeightFormatIsAnErrorAtSynchronize) {
  std::vector<float> x(32, 1.0f), y(1);
  std::vector<uint8_t> block(34, 0);
  gpu_->Matmul(Up(x), 1, Weight{Up(block), DType::kQ8_0, 1, 32}, nullptr, Up(y));
  const Status s = gpu_->Synchronize();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  // Reported once: the device is fine, and the next step starts clean.
  EXPECT_TRUE(gpu_->Synchronize().ok());
  gpu_->Matmul(Up(x), 1, Weight{Up(x), DType::kF32, 1, 32}, nullptr, Up(y));
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchReference) {
  const int64_t n = 100003;
  auto g = RandomFloats(n, 6, -6, 6), u = RandomFloats(n, 7);
  std::vector<float> want(n);
  float* dg = Up(g);
  float* du = Up(u);
  float* dout = Up(std::vector<float>(n));
  ref::SiluMul(g.data(), u.data(), n, want.data());
  gpu_->SiluMul(dg, du, n, dout);
  ExpectNear(Down(dout, n), want, 1e-5f, "SiluMul");
  ref::GeluTanhMul(g.data(), u.data(), n, want.data());
  gpu_->GeluTanhMul(dg, du, n, dout);
  ExpectNear(Down(dout, n), want, 1e-5f, "GeluTanhMul");
  for (int64_t i = 0; i < n; ++i) want[i] = g[i] * 0.5f + u[i];
  gpu_->Scale(dg, 0.5f, n);
  gpu_->Add(dg, du, n);
  ExpectNear(Down(dg, n), want, 0.0f, "Scale + Add");
  const int rows = 3, cols = 1000;
  auto x = RandomFloats(rows * cols, 8), bias = RandomFloats(cols, 9);
  std::vector<float> wb = x;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) wb[r * cols + c] += bias[c];
  }
  float* dx = Up(x);
  gpu_->AddBias(dx, Up(bias), rows, cols);
  ExpectNear(Down(dx, x.size()), wb, 0.0f, "AddBias");
  // Gather rows 2, 0; scatter them back scaled into rows 1, 2.
  const std::vector<int32_t> gather = {2, 0}, scatter = {1, 2};
  const std::vector<float> scale = {0.5f, -2.0f};
  float* dgathered = Up(std::vector<float>(2 * cols));
  gpu_->GatherRows(dx, Up(gather), 2, cols, dgathered);
  gpu_->ScatterAddRows(dgathered, Up(scatter), Up(scale), 2, cols, dx);
  std::vector<float> want_rows = wb;
  for (int c = 0; c < cols; ++c) {
    want_rows[1 * cols + c] += 0.5f * wb[2 * cols + c];
    want_rows[2 * cols + c] += -2.0f * wb[0 * cols + c];
  }
  ExpectNear(Down(dx, x.size()), want_rows, 1e-6f, "GatherRows + ScatterAddRows");
}

TEST_F(CudaBackendTest, RopeEmbeddingAndCacheWrite) {
  for (bool interleaved : {false, true}) {
    const int tokens = 4, heads = 3, head_dim = 128, rotary_dim = 64;
    auto x = RandomFloats(tokens * heads * head_dim, 10),
         inv = RandomFloats(rotary_dim / 2, 11, 0.0f, 1.0f);
    const std::vector<int32_t> pos = {0, 5, 4095, 131071};
    std::vector<float> want = x;
    const RopeLayout layout{head_dim, rotary_dim, interleaved};
    ref::Rope(want.data(), pos.data(), tokens, heads, layout, inv.data());
    float* dx = Up(x);
    gpu_->Rope(dx, Up(pos), tokens, heads, layout, Up(inv));
    // Large angles: cos/sin of float arguments in two libms.
    ExpectNear(Down(dx, x.size()), want, 1e-4f, "Rope");
  }
  const int rows = 50, cols = 96, first = 100;
  auto table = RandomFloats(rows * cols, 12);
  std::vector<uint16_t> bf(table.size());
  for (size_t i = 0; i < table.size(); ++i) bf[i] = F32ToBf16(table[i]);
  const std::vector<int32_t> ids = {100, 149, 99, 150, 120};
  std::vector<float> want(ids.size() * cols);
  ref::Embedding(ids.data(), 5, bf.data(), DType::kBF16, rows, cols, first, want.data());
  float* dout = Up(std::vector<float>(want.size()));
  gpu_->Embedding(Up(ids), 5, Weight{Up(bf), DType::kBF16, rows, cols}, first, dout);
  ExpectNear(Down(dout, want.size()), want, 0.0f, "Embedding BF16");

  const int tokens = 3, kv_heads = 2, head_dim = 64, block_size = 16, blocks = 4;
  auto k = RandomFloats(tokens * kv_heads * head_dim, 13), v = RandomFloats(k.size(), 14);
  const std::vector<int32_t> slots = {17, -1, 63};
  const size_t cache = static_cast<size_t>(blocks) * block_size * kv_heads * head_dim;
  std::vector<float> kw(cache, 0.0f), vw(cache, 0.0f);
  ref::ReshapeAndCache(k.data(), v.data(), tokens, kv_heads, head_dim, slots.data(), block_size,
                       kw.data(), vw.data());
  float* dk = Up(std::vector<float>(cache, 0.0f));
  float* dv = Up(std::vector<float>(cache, 0.0f));
  gpu_->ReshapeAndCache(Up(k), Up(v), tokens, kv_heads, head_dim, Up(slots), block_size, dk, dv,
                        DType::kF32);
  ExpectNear(Down(dk, cache), kw, 0.0f, "ReshapeAndCache K");
  ExpectNear(Down(dv, cache), vw, 0.0f, "ReshapeAndCache V");
}

// Decode rows with long contexts (split-K) and prefill chunks (one partition) in one batch,
// GQA, sliding window, soft-cap; and decode rows whose block tables are padded far past their
// contexts, as a recorded decode graph pads them to max_model_len (the split follows the keys
// each row sees).
TEST_F(CudaBackendTest, PagedAttentionMatchesReference) {
  struct Case {
    int q_heads, kv_heads, head_dim, window;
    float softcap;
    std::vector<std::pair<int, int>> seqs;  // (context_len, q_len)
    int table_blocks = 0;                   // blocks per table row, when more than needed
  };
  const std::vector<std::pair<int, int>> sixteen_decodes(16, {200, 1});
  const std::vector<Case> cases = {
      {32, 8, 128, 0, 0.0f, {{3000, 1}}},                     // one decode row: split-K
      {8, 2, 64, 0, 0.0f, {{1, 1}, {700, 1}, {2049, 1}}},     // decode batch
      {8, 2, 128, 0, 0.0f, {{300, 300}, {900, 64}, {5, 1}}},  // prefill, a chunk, decode
      {4, 1, 256, 128, 0.0f, {{1500, 2}, {40, 40}}},          // MQA, window, head_dim 256
      {4, 4, 96, 0, 30.0f, {{600, 3}}},                       // soft-cap, head_dim 96
      {32, 8, 128, 0, 0.0f, sixteen_decodes, 512},            // tables padded to 8192 keys
      {32, 8, 128, 0, 0.0f, {{37, 1}, {5, 1}}, 512},
  };
  uint32_t seed = 20;
  for (const Case& c : cases) {
    AttentionParams p;
    p.q_heads = c.q_heads;
    p.kv_heads = c.kv_heads;
    p.head_dim = c.head_dim;
    p.block_size = 16;
    p.sliding_window = c.window;
    p.softcap = c.softcap;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    int max_ctx = 1, rows = 0;
    for (auto [ctx, q_len] : c.seqs) {
      max_ctx = std::max(max_ctx, ctx);
      rows += q_len;
    }
    const int seqs = static_cast<int>(c.seqs.size());
    const int used_blocks = (max_ctx + 15) / 16, num_blocks = seqs * used_blocks + 1;
    const int max_blocks = std::max(used_blocks, c.table_blocks);
    const size_t cache = static_cast<size_t>(num_blocks) * 16 * p.kv_heads * p.head_dim;
    auto kc = RandomFloats(cache, ++seed), vc = RandomFloats(cache, ++seed);
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(++seed));
    // Each row: its own blocks, then (padding) the spare block num_blocks - 1.
    std::vector<int32_t> qs{0}, ctx, tables(static_cast<size_t>(seqs) * max_blocks, perm.back());
    for (int s = 0; s < seqs; ++s) {
      std::copy(perm.begin() + s * used_blocks, perm.begin() + (s + 1) * used_blocks,
                tables.begin() + static_cast<ptrdiff_t>(s) * max_blocks);
    }
    for (auto [context, q_len] : c.seqs) {
      qs.push_back(qs.back() + q_len);
      ctx.push_back(context);
    }
    auto q = RandomFloats(static_cast<size_t>(rows) * p.q_heads * p.head_dim, ++seed, -2, 2);
    AttentionBatch host{seqs, qs.data(), ctx.data(), tables.data(), max_blocks, rows};
    std::vector<float> want(q.size());
    ref::PagedAttention(q.data(), kc.data(), vc.data(), host, p, want.data());
    AttentionBatch dev{seqs, Up(qs), Up(ctx), Up(tables), max_blocks, rows};
    float* dout = Up(std::vector<float>(q.size()));
    gpu_->PagedAttention(Up(q), Up(kc), Up(vc), dev, p, dout);
    ExpectNear(Down(dout, q.size()), want, 1e-5f,
               "PagedAttention heads " + std::to_string(c.q_heads) + "/" +
                   std::to_string(c.kv_heads) + " head_dim " + std::to_string(c.head_dim));
  }
}

}  // namespace
}  // namespace llm::kernels
