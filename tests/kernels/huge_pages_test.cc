// The CPU backend's transparent huge pages (kernels/cpu/huge_pages.h, engine.huge_pages): large
// buffers start on a 2 MiB boundary with MADV_HUGEPAGE advice, matmul weights of 2 MiB or more
// that the backend would read in place are copied into them (same bytes, same results), and
// engine.huge_pages off keeps the old way. Whether the kernel then backs a range with huge pages
// depends on its free memory, so the tests check the advice (the "hg" flag of the mapping in
// /proc/self/smaps), not AnonHugePages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

// The VmFlags line of the mapping that holds p, or "" when none does.
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool Advised(const void* p) {
  return VmFlagsOf(p).find(" hg") != std::string::npos;
}

bool ThpUsableHere() {
  const std::string mode = TransparentHugePageMode();
  return mode == "always" || mode == "madvise";
}

// Restores the process-wide setting whatever a test does.
struct HugePagesSetting {
  explicit HugePagesSetting(bool on) { SetCpuHugePages(on); }
  ~HugePagesSetting() { SetCpuHugePages(true); }
};

TEST(HugePages, ModeIsTheBracketedWordOfTheSysfsFile) {
  const std::string mode = TransparentHugePageMode();
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) {
    EXPECT_EQ(mode, "");
    GTEST_SKIP() << "/sys/kernel/mm/transparent_hugepage/enabled is absent: a kernel without THP";
  }
  EXPECT_NE(line.find("[" + mode + "]"), std::string::npos) << line;
  EXPECT_TRUE(mode == "always" || mode == "madvise" || mode == "never") << mode;
}

TEST(HugePages, AllocationIsAlignedZeroAdvisedAndFreed) {
  size_t mapped = 0;
  const size_t bytes = (size_t{3} << 20) + 5;
  auto* p = static_cast<uint8_t*>(AllocateHugePageAligned(bytes, &mapped));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  EXPECT_GE(mapped, bytes);
  EXPECT_LT(mapped, bytes + 4096 * 16);  // small pages of rounding, not a huge page
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[bytes - 1], 0);
  std::memset(p, 0x5a, bytes);
  EXPECT_EQ(p[bytes - 1], 0x5a);
  EXPECT_TRUE(Advised(p)) << VmFlagsOf(p);
  FreeHugePageAligned(p, mapped);
  EXPECT_EQ(VmFlagsOf(p), "");  // unmapped

  EXPECT_EQ(AllocateHugePageAligned(0, &mapped), nullptr);
  EXPECT_EQ(mapped, 0u);
  EXPECT_EQ(AllocateHugePageAligned(SIZE_MAX - 100, &mapped), nullptr);
  EXPECT_EQ(AllocateHugePageAligned(size_t{1} << 62, &mapped), nullptr);  // more than exists
  FreeHugePageAligned(nullptr, 0);                                        // nothing to do
}

TEST(HugePages, CpuBackendBuffersFollowTheSetting) {
  if (!ThpUsableHere()) {
    GTEST_SKIP() << "transparent huge pages are '" << TransparentHugePageMode()
                 << "' here: the CPU backend keeps small pages";
  }
  Backend& cpu = CpuBackend();
  {
    HugePagesSetting on(true);
    EXPECT_TRUE(CpuHugePages());
    auto big = cpu.Allocate((size_t{4} << 20) + 64);
    ASSERT_TRUE(big.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big->data()) % kHugePageBytes, 0u);
    EXPECT_TRUE(Advised(big->data())) << VmFlagsOf(big->data());
    auto small = cpu.Allocate(size_t{1} << 20);  // under a huge page: the heap's
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small->data()) % 64, 0u);
  }
  HugePagesSetting off(false);
  EXPECT_FALSE(CpuHugePages());
  auto big = cpu.Allocate((size_t{4} << 20) + 64);
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE(Advised(big->data())) << VmFlagsOf(big->data());
}

// A Q4_K matrix of 2.25 MiB (2048 x 2048), as GGUF files hold them: with huge pages the backend
// copies it (same format, same bytes, the same matmul bits); off, or under 2 MiB, it is read in
// place.
TEST(HugePages, CpuBackendCopiesLargeInPlaceWeights) {
  if (!ThpUsableHere()) {
    GTEST_SKIP() << "transparent huge pages are '" << TransparentHugePageMode()
                 << "' here: no copy is made";
  }
  Backend& cpu = CpuBackend();
  const int n = 2048, k = 2048;
  const size_t bytes = RowBytes(DType::kQ4_K, k) * n;
  ASSERT_GE(bytes, kHugePageBytes);
  std::vector<uint8_t> q(bytes);
  FillRandomBlocks(DType::kQ4_K, 7, q.data(),
                   static_cast<int64_t>(bytes / RowBytes(DType::kQ4_K, 256)));
  std::vector<float> x(k), want(n), got(n);
  for (int i = 0; i < k; ++i) x[i] = static_cast<float>((i * 37) % 101 - 50) / 50.0f;
  const Weight original{q.data(), DType::kQ4_K, n, k};
  cpu.Matmul(x.data(), 1, original, nullptr, want.data());

  HugePagesSetting on(true);
  Weight w = original;
  auto copy = cpu.PrepareMatmulWeight(w);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  ASSERT_NE(copy->data(), nullptr);
  EXPECT_EQ(w.data, copy->data());
  EXPECT_EQ(w.format, DType::kQ4_K);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data) % kHugePageBytes, 0u);
  EXPECT_TRUE(Advised(w.data));
  EXPECT_EQ(std::memcmp(w.data, q.data(), bytes), 0);
  cpu.Matmul(x.data(), 1, w, nullptr, got.data());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * n), 0);

  Weight small{q.data(), DType::kQ4_K, 1024, k};  // 1.1 MiB: no huge page to gain
  auto none = cpu.PrepareMatmulWeight(small);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->data(), nullptr);
  EXPECT_EQ(small.data, q.data());
  // Pooled with the model's other weights in one arena (PrepareMatmulWeights in worker/model),
  // it shares huge pages, so it is copied too.
  EXPECT_EQ(cpu.PreparedWeightBytes(small, /*keep_layout=*/false, /*pooled=*/true),
            RowBytes(DType::kQ4_K, k) * 1024);

  // keep_layout (a tied embedding table, which Embedding reads too): an F16 table is copied as
  // F16, never repacked into the backend's row groups.
  std::vector<uint16_t> table(static_cast<size_t>(n) * k, 0x3c00);  // 8 MiB of F16 ones
  Weight tied{table.data(), DType::kF16, n, k};
  auto same = cpu.PrepareMatmulWeight(tied, /*keep_layout=*/true);
  ASSERT_TRUE(same.ok());
  ASSERT_NE(same->data(), nullptr);
  EXPECT_EQ(tied.format, DType::kF16);
  EXPECT_EQ(std::memcmp(tied.data, table.data(), 2 * table.size()), 0);
  Weight matmul_only{table.data(), DType::kF16, n, k};
  auto repacked = cpu.PrepareMatmulWeight(matmul_only);
  ASSERT_TRUE(repacked.ok());
  EXPECT_EQ(matmul_only.format, MatmulPackedFormat(DType::kF16));

  SetCpuHugePages(false);
  Weight off = original;
  auto kept = cpu.PrepareMatmulWeight(off);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->data(), nullptr);
  EXPECT_EQ(off.data, q.data());
  EXPECT_EQ(cpu.PreparedWeightBytes(small, /*keep_layout=*/false, /*pooled=*/true), 0u);
  // A layout of the backend's own is made with or without huge pages.
  Weight f16{table.data(), DType::kF16, n, k};
  EXPECT_EQ(cpu.PreparedWeightBytes(f16, /*keep_layout=*/false, /*pooled=*/false),
            2 * table.size());
  EXPECT_EQ(cpu.PreparedWeightBytes(f16, /*keep_layout=*/true, /*pooled=*/true), 0u);
}

}  // namespace
}  // namespace llm::kernels
