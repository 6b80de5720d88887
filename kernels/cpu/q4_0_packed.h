// Q4_0 repacked for the AVX-512 kernels (DType::kQ4_0Packed), made once at load by the CPU
// backend (Backend::PrepareMatmulWeight), and the activation layout those kernels read.
//
// Why: on ggml's layout a Q4_0 GEMV decodes every 18-byte block with word permutations (its
// nibbles, its fp16 scale), and at 2 threads that work, not memory, bounded a decode step
// (~14-16 GB/s per core in cache, llama.cpp's repacked Q4_0 streams ~30 GB/s). Repacked, a row's
// blocks come in groups of 16 (kPackGroupBlocks), 288 bytes each, the same size as 16 blocks:
//  - bytes 0..255: four runs of 64 bytes; run r holds the quants of pairs 2r and 2r + 1 (pair p =
//    blocks 2p, 2p + 1 of the group), byte t of the run the element t of pair 2r in its low
//    nibble and of pair 2r + 1 in its high nibble (element t of a pair: t < 32 its first block's
//    element t, else its second block's element t - 32), so one load, a mask and a shift give two
//    pairs' 64 quants in the order of the activations;
//  - bytes 256..287: the 16 fp16 scales d of the group's blocks, converted by one instruction.
// The blocks after the last whole group (nb % 16) stay as ggml's BlockQ4_0. A row keeps Q4_0's
// RowBytes, and the kernels compute every output with Q4_0's integers and float operations
// (quant_blocks.h), so a packed matmul gives the bits of the unpacked one (tested).
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul_internal.h"  // LegacyBlockPair
#include "kernels/cpu/q8_0.h"             // BlockQ8_0

namespace llm::kernels::internal {

constexpr int kPackGroupBlocks = 16;
constexpr int kPackGroupBytes = 288;

// Repacks `rows` rows of `cols` Q4_0 weights (cols a multiple of 32) from ggml's layout; src and
// dst must not overlap. Unpack is its inverse.
void PackQ4_0Rows(const void* src, int64_t rows, int cols, void* dst);
void UnpackQ4_0Rows(const void* src, int64_t rows, int cols, void* dst);

// One activation row's 16 Q8_0 blocks of a group, in the layout of the AVX-512 packed kernel:
// pair p's 64 quants, the dot product's start value -(8 * S_l) (Q4_0's offset times the lane
// sums of quant_blocks.h; lanes 0..7 block 2p, 8..15 block 2p + 1), the pair's scales as lanes,
// and the 16 scales in block order.
struct alignas(64) PackedQ4_0XGroup {
  int8_t qs[8][64];
  int32_t start[8][16];
  float dx[8][16];
  float d16[16];
};
// Bytes of one activation row of nb blocks: its groups, then the tail's LegacyBlockPairs, rounded
// up to a whole LegacyBlockPair so a tile can step the tails of its rows in pairs.
int64_t PackedQ4_0XRowBytes(int nb);
// x (nb Q8_0 blocks) -> one row of PackedQ4_0XRowBytes(nb) bytes.
void MakePackedQ4_0X(const BlockQ8_0* x, int nb, void* out);

}  // namespace llm::kernels::internal
