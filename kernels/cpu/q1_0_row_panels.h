// Q1_0 weight rows in panels of 16 (DType::kQ1_0RowPanels), made once at load by the CPU backend
// (Backend::PrepareMatmulWeightInto) where the kernel set has the table GEMV below (AVX-512 with
// VBMI and VNNI: Intel Ice Lake and later, AMD Zen 4 and later), and the tables that GEMV reads.
//
// Why: in the 16-sub-block groups of kQ1_0Packed (legacy_packed.h) a dot step turns 64 sign bits
// into 64 bytes (a mask load, a masked move) and multiplies them with one vpdpbusd: 3
// instructions per 64 weights, and on Zen 4 the GEMV stayed at ~20 GB/s, a third of the memory
// bandwidth. Here 4 sign bits (a "quad": 4 consecutive weights) index a table of the 16 signed
// sums +-x0 +-x1 +-x2 +-x3 of the activations they meet, so one vpermb (64 lookups from a 64-byte
// table) does the work of 256 weights. A quad's sums reach +-508 and a byte holds +-127, so each
// activation is split as x = 16 xh + xl (xl = x & 15 in 0..15, xh = x >> 4 in -8..7): one table
// of the xl sums (|sum| <= 60) and one of the xh sums (<= 32), exact in a byte each, added as
// vpdpbusd(1, lo) + vpdpbusd(16, hi). A lookup's 64 table entries are 4 quads of one sub-block
// (16 each), so a 64-byte vector of indices is 16 rows times 4 quads: the rows must sit side by
// side, hence panels. The integer sum of a sub-block is exactly that of the scalar reference (sum
// of (u - 1) x, u = 0 or 2), and each row's 16 float chains get the same fma in the same order,
// so the bits are the scalar set's (tested). Measured (5 Dec 2026, Zen 4, kernel_bench gemv, k =
// 2048, 2 threads): 28.7-36.1 GB/s in cache and 27.5-29.1 from DRAM against kQ1_0Packed's
// 18.2-21.0 and 20.0-21.6; TinyLlama-shaped Q1_0 decode b1 1.32-1.45x (README, "Q1_0").
//
// Panel q holds rows 16q .. 16q + r - 1 (r = 16, or rows % 16 for the last panel) and starts
// where row 16q would (byte 16q * RowBytes(kQ1_0, cols)). Per block b of 128 weights it holds 18r
// bytes: four runs of 4r bytes, run u for sub-block 4b + u (weights 32u .. 32u + 31 of the
// block), byte 4i + j of a run holding row i's quad j (weights 4j .. 4j + 3 of the sub-block, bit
// t for weight 4j + t, set where the weight is +d) in its low nibble and quad j + 4 in its high
// one; then the r rows' fp16 d. So panel rows take exactly the bytes of Q1_0 rows, and any range
// of rows starting at a multiple of 16 is laid out as a matrix of its own.
#pragma once

#include <cstdint>

#include "kernels/cpu/q8_0.h"  // BlockQ8_0

namespace llm::kernels::internal {

constexpr int kQ1_0PanelRows = 16;

// Lays out `rows` Q1_0 rows of `cols` weights (cols a multiple of 128) as panels; Unpack is its
// inverse. src and dst must not overlap.
void PackQ1_0RowPanels(const uint8_t* src, int64_t rows, int cols, uint8_t* dst);
void UnpackQ1_0RowPanels(const uint8_t* src, int64_t rows, int cols, uint8_t* dst);

// The tables of one activation row of nb Q8_0 blocks: per 32-weight sub-block s, four 64-byte
// tables (Q1_0SubTables), then the nb scales as floats. Entry 16j + n of table 2h + p is the sum
// over t = 0..3 of (bit t of n ? +1 : -1) times part p of activation 32s + 4(4h + j) + t, part 0
// being x & 15 and part 1 x >> 4 (arithmetic): h = 0 serves quads 0..3 (the low nibbles of a run),
// h = 1 quads 4..7 (the high ones).
struct alignas(64) Q1_0SubTables {
  int8_t t[4][64];
};
// Bytes of one row's tables and scales, a multiple of 64.
constexpr int64_t Q1_0LutRowBytes(int nb) {
  const int64_t scale_bytes = (static_cast<int64_t>(nb) * 4 + 63) / 64 * 64;
  return static_cast<int64_t>(nb) * static_cast<int64_t>(sizeof(Q1_0SubTables)) + scale_bytes;
}
// The GEMV reads tables for at most this many activation rows; more rows take the panel GEMM
// (Q1_0PanelGemmAvx512): on Zen 4 (k = n = 4096, 2 threads) the tables per row took 0.176-0.181
// ms at m = 2 against the GEMM's 0.161-0.164 (then on kQ1_0Packed), and 0.096-0.111 against
// 0.103-0.108 at m = 1.
constexpr int kQ1_0LutMaxRows = 1;

// AVX-512 with VNNI and VBMI only (matmul_q1_0_lut_avx512.cc): x's tables (Q1_0LutRowBytes(nb)
// bytes at out; nb = k / 32 blocks), and the matmul of m rows of tables (xt, rows
// Q1_0LutRowBytes apart) on panel rows [n0, n1) (n0 a multiple of 16) of w.
void MakeQ1_0TablesAvx512(const BlockQ8_0* x, int nb, uint8_t* out);
void Q1_0TablePanelAvx512(const void* xt, int m, int k, const void* w, int n0, int n1,
                          const float* bias, float* y, int ldy);
// And with BITALG (vpshufbitqmb), for more input rows: m rows of PackedX groups (MakePackedX,
// legacy_packed.h) on panel rows [n0, n1).
void Q1_0PanelGemmAvx512(const void* xq, int m, int k, const void* w, int n0, int n1,
                         const float* bias, float* y, int ldy);

}  // namespace llm::kernels::internal
