// F16 / BF16 rows in panels of 16: see f16_row_panels.h.
#include "kernels/cpu/f16_row_panels.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace llm::kernels::internal {
namespace {

// Columns a block: a panel's block (16 rows x 64 columns x 2 bytes, 2 KiB) stays in L1 while
// each row's run of the block is read or written in order (row by row over all columns, the
// panel side would be a 32-byte stride through the whole panel).
constexpr int kCopyBlockCols = 64;

template <bool kToPanels>
void CopyRows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  for (int64_t q = 0; q < rows; q += kF16PanelRows) {
    const int r = static_cast<int>(std::min<int64_t>(kF16PanelRows, rows - q));
    const int64_t base = q * cols;
    for (int p0 = 0; p0 < cols; p0 += kCopyBlockCols) {
      const int p1 = std::min(cols, p0 + kCopyBlockCols);
      for (int i = 0; i < r; ++i) {
        const int64_t plain = base + static_cast<int64_t>(i) * cols;
        const int64_t panel = base + i;
        for (int p = p0; p < p1; ++p) {
          if constexpr (kToPanels) {
            dst[panel + static_cast<int64_t>(p) * r] = src[plain + p];
          } else {
            dst[plain + p] = src[panel + static_cast<int64_t>(p) * r];
          }
        }
      }
    }
  }
}

#if defined(__SSE2__)
// 8 rows x 8 columns of 16-bit values (row i at in[i]) transposed in registers: out[p] holds
// column p's 8 values, row 0 first.
inline void Transpose8x8(const __m128i in[8], __m128i out[8]) {
  __m128i a[8], b[8];
  for (int i = 0; i < 4; ++i) {
    a[2 * i] = _mm_unpacklo_epi16(in[2 * i], in[2 * i + 1]);      // columns 0-3 of rows 2i, 2i+1
    a[2 * i + 1] = _mm_unpackhi_epi16(in[2 * i], in[2 * i + 1]);  // columns 4-7
  }
  for (int h = 0; h < 2; ++h) {                         // h: columns 0-3 (a even) or 4-7 (a odd)
    b[4 * h + 0] = _mm_unpacklo_epi32(a[h], a[2 + h]);  // columns 4h, 4h+1 of rows 0-3
    b[4 * h + 1] = _mm_unpackhi_epi32(a[h], a[2 + h]);  // columns 4h+2, 4h+3 of rows 0-3
    b[4 * h + 2] = _mm_unpacklo_epi32(a[4 + h], a[6 + h]);  // the same of rows 4-7
    b[4 * h + 3] = _mm_unpackhi_epi32(a[4 + h], a[6 + h]);
  }
  for (int h = 0; h < 2; ++h) {
    out[4 * h + 0] = _mm_unpacklo_epi64(b[4 * h], b[4 * h + 2]);
    out[4 * h + 1] = _mm_unpackhi_epi64(b[4 * h], b[4 * h + 2]);
    out[4 * h + 2] = _mm_unpacklo_epi64(b[4 * h + 1], b[4 * h + 3]);
    out[4 * h + 3] = _mm_unpackhi_epi64(b[4 * h + 1], b[4 * h + 3]);
  }
}

// A full panel's columns [0, cols8) (a multiple of 8), 8 at a time: each 16-row column one
// 32-byte run of the panel.
void PackFullPanelColumns(const uint16_t* src, int cols, int cols8, uint16_t* panel) {
  for (int p = 0; p < cols8; p += 8) {
    for (int half = 0; half < 2; ++half) {  // rows 0-7, then 8-15
      __m128i in[8], out[8];
      for (int i = 0; i < 8; ++i) {
        in[i] = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(src + static_cast<int64_t>(8 * half + i) * cols + p));
      }
      Transpose8x8(in, out);
      for (int c = 0; c < 8; ++c) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(
                             panel + static_cast<int64_t>(p + c) * kF16PanelRows + 8 * half),
                         out[c]);
      }
    }
  }
}
#endif

}  // namespace

void PackF16RowPanels(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
#if defined(__SSE2__)
  // Full panels by 8 x 8 transposes in registers (the partial last panel and the columns past the
  // last multiple of 8 one value at a time). TinyLlama F16's 1973 MiB of matmul weights (AMD Zen
  // 4, 2 threads, 4 Dec 2026, three alternating pairs): 0.35-0.42 s against 0.53-1.18 s (once
  // 3.43) value by value, as fast as the groups of 4 (0.33-0.54 s).
  const int cols8 = cols - cols % 8;
  const int64_t full = rows - rows % kF16PanelRows;
  for (int64_t q = 0; q < full; q += kF16PanelRows) {
    const uint16_t* s = src + q * cols;
    uint16_t* d = dst + q * cols;
    PackFullPanelColumns(s, cols, cols8, d);
    for (int p = cols8; p < cols; ++p) {
      for (int i = 0; i < kF16PanelRows; ++i) {
        d[static_cast<int64_t>(p) * kF16PanelRows + i] = s[static_cast<int64_t>(i) * cols + p];
      }
    }
  }
  if (full < rows) CopyRows<true>(src + full * cols, rows - full, cols, dst + full * cols);
#else
  CopyRows<true>(src, rows, cols, dst);
#endif
}

void MakeRowPanelTokens(const float* x, int m, int cols, float* out) {
  const int tiles = (m + kRowPanelTokens - 1) / kRowPanelTokens;
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * cols >= (1 << 16))
  for (int t = 0; t < tiles; ++t) {
    float* tile = out + static_cast<int64_t>(t) * cols * kRowPanelTokens;
    for (int p0 = 0; p0 < cols; p0 += kCopyBlockCols) {  // a 4 KiB block of the tile at a time
      const int p1 = std::min(cols, p0 + kCopyBlockCols);
      for (int i = 0; i < kRowPanelTokens; ++i) {
        const int row = t * kRowPanelTokens + i;
        float* column = tile + i;  // row i's x[p] at column[p * kRowPanelTokens]
        if (row < m) {
          const float* xi = x + static_cast<int64_t>(row) * cols;
          for (int p = p0; p < p1; ++p) column[static_cast<int64_t>(p) * kRowPanelTokens] = xi[p];
        } else {
          for (int p = p0; p < p1; ++p) column[static_cast<int64_t>(p) * kRowPanelTokens] = 0.0f;
        }
      }
    }
  }
}

void UnpackF16RowPanels(const uint16_t* src, int64_t rows, int cols, uint16_t* dst) {
  CopyRows<false>(src, rows, cols, dst);
}

}  // namespace llm::kernels::internal
