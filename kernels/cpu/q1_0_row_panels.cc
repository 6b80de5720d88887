#include "kernels/cpu/q1_0_row_panels.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

// Quad q (weights 4q .. 4q + 3) of sub-block u of a block: nibble q % 2 of byte 4u + q / 2.
uint8_t Quad(const BlockQ1_0& b, int u, int q) {
  return static_cast<uint8_t>((b.qs[4 * u + q / 2] >> (4 * (q % 2))) & 0x0F);
}
void SetQuad(BlockQ1_0& b, int u, int q, uint8_t v) {
  b.qs[4 * u + q / 2] |= static_cast<uint8_t>(v << (4 * (q % 2)));
}

// One panel of r rows (ggml rows at `in`, `row` bytes apart) <-> its layout at `out`.
void PackPanel(const uint8_t* in, int r, int nb, uint8_t* out) {
  const size_t row = static_cast<size_t>(nb) * sizeof(BlockQ1_0);
  for (int b = 0; b < nb; ++b) {
    uint8_t* p = out + static_cast<size_t>(b) * 18 * r;
    for (int i = 0; i < r; ++i) {
      BlockQ1_0 blk;
      std::memcpy(&blk, in + i * row + b * sizeof(BlockQ1_0), sizeof(blk));
      for (int u = 0; u < 4; ++u) {
        for (int j = 0; j < 4; ++j) {
          p[4 * r * u + 4 * i + j] =
              static_cast<uint8_t>(Quad(blk, u, j) | Quad(blk, u, j + 4) << 4);
        }
      }
      std::memcpy(p + 16 * r + 2 * i, &blk.d, 2);
    }
  }
}
void UnpackPanel(const uint8_t* in, int r, int nb, uint8_t* out) {
  const size_t row = static_cast<size_t>(nb) * sizeof(BlockQ1_0);
  for (int b = 0; b < nb; ++b) {
    const uint8_t* p = in + static_cast<size_t>(b) * 18 * r;
    for (int i = 0; i < r; ++i) {
      BlockQ1_0 blk{};
      for (int u = 0; u < 4; ++u) {
        for (int j = 0; j < 4; ++j) {
          const uint8_t byte = p[4 * r * u + 4 * i + j];
          SetQuad(blk, u, j, byte & 0x0F);
          SetQuad(blk, u, j + 4, byte >> 4);
        }
      }
      std::memcpy(&blk.d, p + 16 * r + 2 * i, 2);
      std::memcpy(out + i * row + b * sizeof(BlockQ1_0), &blk, sizeof(blk));
    }
  }
}

// Each panel of `rows` rows (Q1_0 rows of `cols` weights) through fn(in, r, nb, out).
template <class PanelFn>
void ForEachPanel(const uint8_t* src, int64_t rows, int cols, uint8_t* dst, PanelFn fn) {
  const int nb = cols / 128;
  const size_t row = static_cast<size_t>(nb) * sizeof(BlockQ1_0);
  for (int64_t r0 = 0; r0 < rows; r0 += kQ1_0PanelRows) {
    fn(src + r0 * row, static_cast<int>(std::min<int64_t>(kQ1_0PanelRows, rows - r0)), nb,
       dst + r0 * row);
  }
}

}  // namespace

void PackQ1_0RowPanels(const uint8_t* src, int64_t rows, int cols, uint8_t* dst) {
  ForEachPanel(src, rows, cols, dst, PackPanel);
}

void UnpackQ1_0RowPanels(const uint8_t* src, int64_t rows, int cols, uint8_t* dst) {
  ForEachPanel(src, rows, cols, dst, UnpackPanel);
}

}  // namespace llm::kernels::internal
