// CUDA kernels against the CPU references (label gpu: skips without a device or without CUDA).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/index_math.h"
#include "kernels/reference_ops.h"
#ifdef LLM_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif

namespace llm::kernels {
namespace {

TEST(CudaIndexMath, GridAndSlot) {
  EXPECT_EQ(cuda::GridFor(1, 256), 1);
  EXPECT_EQ(cuda::GridFor(256, 256), 1);
  EXPECT_EQ(cuda::GridFor(257, 256), 2);
  const int table[] = {7, 3, 9};
  EXPECT_EQ(cuda::SlotOf(table, 0, 16), 7 * 16);
  EXPECT_EQ(cuda::SlotOf(table, 17, 16), 3 * 16 + 1);
  EXPECT_EQ(cuda::SlotOf(table, 47, 16), 9 * 16 + 15);
}

#ifdef LLM_HAVE_CUDA
// Copies host data to a device buffer freed at scope exit.
struct DeviceArray {
  explicit DeviceArray(const std::vector<float>& host) : bytes(host.size() * 4) {
    ptr = static_cast<float*>(*cuda::Malloc(bytes));
    EXPECT_TRUE(cuda::CopyToDevice(ptr, host.data(), bytes).ok());
  }
  ~DeviceArray() { cuda::Free(ptr); }
  std::vector<float> Read() const {
    std::vector<float> out(bytes / 4);
    EXPECT_TRUE(cuda::CopyToHost(out.data(), ptr, bytes).ok());
    return out;
  }
  size_t bytes;
  float* ptr;
};

std::vector<float> Random(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

TEST_F(CudaOps, RmsNormMatchesReference) {
  const int rows = 5, dim = 1000;
  auto x = Random(rows * dim, 1), w = Random(dim, 2);
  std::vector<float> want(rows * dim);
  ref::RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
  DeviceArray dx(x), dw(w), dout(std::vector<float>(rows * dim));
  ASSERT_TRUE(cuda::RmsNorm(dx.ptr, dw.ptr, rows, dim, 1e-5f, dout.ptr).ok());
  auto got = dout.Read();
  for (int i = 0; i < rows * dim; ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i])));
}

TEST_F(CudaOps, MatmulMatchesReference) {
  const int m = 7, k = 333, n = 129;
  auto x = Random(m * k, 3), w = Random(n * k, 4), bias = Random(n, 5);
  std::vector<float> want(m * n);
  ref::Matmul(x.data(), m, k, w.data(), DType::kF32, n, bias.data(), want.data());
  DeviceArray dx(x), dw(w), db(bias), dy(std::vector<float>(m * n));
  ASSERT_TRUE(cuda::Matmul(dx.ptr, m, k, dw.ptr, DType::kF32, n, db.ptr, dy.ptr).ok());
  auto got = dy.Read();
  for (int i = 0; i < m * n; ++i) ASSERT_NEAR(got[i], want[i], 2e-3f * (1 + std::fabs(want[i])));
}
#else
TEST(CudaOps, Skipped) {
  GTEST_SKIP() << "built without CUDA (no nvcc at configure time)";
}
#endif

}  // namespace
}  // namespace llm::kernels
