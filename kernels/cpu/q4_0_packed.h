// Q4_0 and Q4_1 repacked for the SIMD kernels (DType::kQ4_0Packed, kQ4_1Packed), made once at
// load by the CPU backend (Backend::PrepareMatmulWeight), and the activation layout those kernels
// read.
//
// Why: Q4_0's and Q4_1's order (quant_blocks.h) gives each block one integer lane and one of 16
// float chains, so 16 blocks side by side fill a 512-bit register: a vpdpbusd adds 4 products of
// every block at once, 8 of them finish the 16 blocks' integer sums, and one conversion, one scale
// product and one fma serve 16 blocks. On ggml's layout each block's 18 bytes would have to be
// gathered into the lanes at every step; repacked once, it is one load per 64 bytes.
//
// A row's blocks come in groups of 16 (the last group has the T = nb % 16 left, if any); group g
// starts where block 16 g would (byte 288 g for Q4_0, 320 g for Q4_1), and a group of T blocks
// holds:
//  - four runs of 4T bytes: byte 4b + t of run r is byte 4r + t of block b's qs, i.e. element
//    4r + t of block b in its low nibble and element 16 + 4r + t in its high nibble, so the low
//    nibbles of a run are "quad" r (elements 4r .. 4r + 3) of every block, the high ones quad r +
//    4;
//  - then the T fp16 scales d, and for Q4_1 the T fp16 mins m.
// So a packed row has exactly the format's RowBytes, and a matmul on it gives its bits (tested).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/q8_0.h"  // BlockQ8_0

namespace llm::kernels::internal {

constexpr int kPackGroupBlocks = 16;
constexpr int kPackGroupMaxBytes = 320;  // a whole Q4_1 group

// Repacks `rows` rows of `cols` weights of `t` (kQ4_0 or kQ4_1; cols a multiple of 32) from
// ggml's layout; src and dst must not overlap. Unpack is its inverse.
void PackQ4Rows(DType t, const void* src, int64_t rows, int cols, void* dst);
void UnpackQ4Rows(DType t, const void* src, int64_t rows, int cols, void* dst);
// A group of T blocks of `t` (packed layout) in the layout of a whole group, the blocks from T on
// zero: what the kernels read for the last group of a row.
void WidenQ4Group(DType t, const uint8_t* group, int count, uint8_t out[kPackGroupMaxBytes]);

// One activation row's Q8_0 blocks of a group, in the kernels' layout: quad r of block b (its
// quants 4r .. 4r + 3) at bytes 4b .. 4b + 3 of q[r], Q4_0's dot product start value -(8 * S_b),
// S_b as a float (Q4_1's min term), and the scales d_b. Blocks past the row's end are zero.
struct alignas(64) PackedQ4_0XGroup {
  int8_t q[8][64];
  int32_t start[16];
  float s[16];
  float d[16];
};
// Groups per row of nb blocks: ceil(nb / 16).
inline int PackedQ4_0Groups(int nb) {
  return (nb + kPackGroupBlocks - 1) / kPackGroupBlocks;
}
// x (nb Q8_0 blocks) -> PackedQ4_0Groups(nb) groups.
void MakePackedQ4_0X(const BlockQ8_0* x, int nb, PackedQ4_0XGroup* out);

}  // namespace llm::kernels::internal
