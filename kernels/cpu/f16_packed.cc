// F16 rows interleaved in groups of 4: see f16_packed.h.
#include "kernels/cpu/f16_packed.h"

#include <algorithm>
#include <cstring>

namespace llm::kernels::internal {
namespace {

// Copies one group of r rows from row-major to packed (kToPacked) or back.
template <bool kToPacked>
void CopyGroup(const uint16_t* src, uint16_t* dst, int r, int k) {
  const int k8 = k - k % kF16PackChunk;
  auto copy = [&](int64_t plain, int64_t packed, int count) {
    std::memcpy(dst + (kToPacked ? packed : plain), src + (kToPacked ? plain : packed),
                sizeof(uint16_t) * count);
  };
  for (int i = 0; i < r; ++i) {
    const int64_t row = static_cast<int64_t>(i) * k;
    for (int p = 0; p < k8; p += kF16PackChunk) {
      copy(row + p, F16PackedChunk(r, i, p), kF16PackChunk);
    }
    if (k8 < k) copy(row + k8, F16PackedTail(r, i, k), k - k8);
  }
}

template <bool kToPacked>
void CopyRows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  for (int64_t g = 0; g < rows; g += kF16PackRows) {
    const int r = static_cast<int>(std::min<int64_t>(kF16PackRows, rows - g));
    CopyGroup<kToPacked>(src + g * cols, dst + g * cols, r, cols);
  }
}

}  // namespace

void PackF16Rows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  CopyRows<true>(src, rows, cols, dst);
}

void UnpackF16Rows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  CopyRows<false>(src, rows, cols, dst);
}

}  // namespace llm::kernels::internal
