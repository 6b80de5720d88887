// F16 / BF16 rows in panels of 16: see f16_row_panels.h.
#include "kernels/cpu/f16_row_panels.h"

#include <algorithm>

namespace llm::kernels::internal {
namespace {

template <bool kToPanels>
void CopyRows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  for (int64_t q = 0; q < rows; q += kF16PanelRows) {
    const int r = static_cast<int>(std::min<int64_t>(kF16PanelRows, rows - q));
    const int64_t base = q * cols;
    for (int i = 0; i < r; ++i) {
      for (int p = 0; p < cols; ++p) {
        const int64_t plain = base + static_cast<int64_t>(i) * cols + p;
        const int64_t panel = base + static_cast<int64_t>(p) * r + i;
        if constexpr (kToPanels) {
          dst[panel] = src[plain];
        } else {
          dst[plain] = src[panel];
        }
      }
    }
  }
}

}  // namespace

void PackF16RowPanels(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  CopyRows<true>(src, rows, cols, dst);
}

void MakeRowPanelTokens(const float* x, int m, int cols, float* out) {
  const int tiles = (m + kRowPanelTokens - 1) / kRowPanelTokens;
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * cols >= (1 << 16))
  for (int t = 0; t < tiles; ++t) {
    float* tile = out + static_cast<int64_t>(t) * cols * kRowPanelTokens;
    for (int i = 0; i < kRowPanelTokens; ++i) {
      const int row = t * kRowPanelTokens + i;
      const float* xi = x + static_cast<int64_t>(row) * cols;
      float* column = tile + i;  // row i's x[p] at column[p * kRowPanelTokens]
      if (row < m) {
        for (int p = 0; p < cols; ++p) column[static_cast<int64_t>(p) * kRowPanelTokens] = xi[p];
      } else {
        for (int p = 0; p < cols; ++p) column[static_cast<int64_t>(p) * kRowPanelTokens] = 0.0f;
      }
    }
  }
}

void UnpackF16RowPanels(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  CopyRows<false>(src, rows, cols, dst);
}

}  // namespace llm::kernels::internal
