// F16 and BF16 weight rows in panels of 16 (DType::kF16RowPanels, kBF16RowPanels), made once at
// load by the CPU backend (Backend::PrepareMatmulWeightInto) for the AVX-512 and AVX2 kernel
// sets (matmul_row_panels.h, matmul_row_panels_avx2.h). The layout is the same for both formats
// (16-bit weights, moved as they are); F16 is said below.
//
// Why: the groups of 4 (f16_packed.h) put 16 consecutive weights of one row in a vector, so each
// output is 16 lane sums over k, reduced at the end; with several input rows every tile must
// widen its weights again or go through a widened copy (matmul_blocked.h), and F16 batch 16
// reached ~45% of the FMA peak. Here the vector is one weight column of 16 rows (32 bytes of
// F16): an output is one FMA chain over k in order, in its row's lane, and one widened vector
// serves every input row of a tile through a broadcast of that row's x[p] (a load, no shuffle).
// Measured on the Xeon with AMX (3 Dec 2026, .dev harness, m = 16, k = 2048, n = 5632 from
// DRAM, 2 threads, alternating in one process): 166-177 GFLOP/s against 117-128 for the
// k-blocked panels of the groups of 4; at m = 1, with four panels read at once, 19.3-20.6
// against 18.8-20.4 GB/s (one panel at a time, one stream: 13.6-15.3).
//
// Panel q holds rows 16q .. 16q + r - 1 (r = 16, or rows % 16 for the last panel) and starts
// where row 16q would (element 16q * cols); element p * r + i of a panel is row i's weight p.
// So panel rows take exactly the bytes of F16 rows, and any range of rows starting at a
// multiple of 16 is laid out as a matrix of its own.
#pragma once

#include <cstdint>

namespace llm::kernels::internal {

constexpr int kF16PanelRows = 16;
// The input rows of a matmul on panels, for m > 1: tiles of kRowPanelTokens rows, x[i][p] of
// tile t's row i at element (t * cols + p) * kRowPanelTokens + i, zero for the rows past m, so a
// tile's rows at one weight column are one cache line (m = 1 reads the row as it is).
constexpr int kRowPanelTokens = 16;
constexpr int64_t RowPanelTokensSize(int m, int cols) {
  return static_cast<int64_t>((m + kRowPanelTokens - 1) / kRowPanelTokens) * cols * kRowPanelTokens;
}
void MakeRowPanelTokens(const float* x, int m, int cols, float* out);

// Lays out `rows` F16 rows of `cols` weights (row-major) as panels; Unpack is its inverse. src
// and dst must not overlap.
void PackF16RowPanels(const uint16_t* src, int64_t rows, int cols, uint16_t* dst);
void UnpackF16RowPanels(const uint16_t* src, int64_t rows, int cols, uint16_t* dst);

}  // namespace llm::kernels::internal
