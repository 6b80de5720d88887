// F16 and BF16 weight rows interleaved in groups of 4 (DType::kF16Packed, kBF16Packed), made
// once at load by the CPU backend (Backend::PrepareMatmulWeight) for the AVX2 and AVX-512 kernel
// sets. The layout is the same for both formats (16-bit weights, moved as they are); F16 is said
// below.
//
// Why: those sets compute each output with one FMA chain (8 lanes on AVX2, 16 on AVX-512; batch
// invariance, see matmul_internal.h). A GEMV on one row at a time is bound by the chain's latency
// (AVX2: ~29 GB/s at 2 threads in cache, about DRAM speed, with nothing to spare; AVX-512 ~60),
// and four rows at once from the plain layout are four streams 4 KiB apart, which read DRAM
// slower than one. Interleaved, the 8-weight chunks of four rows are one 64-byte line: one
// sequential stream feeds four independent chains (AVX-512 joins two chunks of a row into its
// 16 lanes), and every output keeps its own chain, so the bits are those of F16.
//
// Rows come in groups of 4 (the last group has the r = rows % 4 left, if any); group g starts
// where row 4g would (element 4g * cols). With k8 = cols rounded down to a multiple of 8 and
// t = cols - k8, a group of r rows holds, for each chunk c < k8 / 8, the 8 weights c*8 .. c*8+7
// of each of its rows in turn (element c*8r + 8i + j is row i's weight c*8 + j), then the t tail
// weights of each row in turn (element k8*r + i*t + j is row i's weight k8 + j). So packed rows
// take exactly the bytes of F16 rows, and any range of rows starting at a multiple of 4 is packed
// as if it were a matrix of its own.
#pragma once

#include <cstdint>

namespace llm::kernels::internal {

constexpr int kF16PackRows = 4;   // rows per group
constexpr int kF16PackChunk = 8;  // weights of a row per chunk (one ymm of f32)

// Where row i (of a group of r rows) has its chunk starting at weight p (p < k8), and its tail,
// relative to the group's first element. (`static`: the ISA translation units keep their own.)
static inline int64_t F16PackedChunk(int r, int i, int64_t p) {
  return p * r + static_cast<int64_t>(kF16PackChunk) * i;
}
static inline int64_t F16PackedTail(int r, int i, int k) {
  const int k8 = k - k % kF16PackChunk;
  return static_cast<int64_t>(k8) * r + static_cast<int64_t>(i) * (k - k8);
}

// Packs `rows` F16 (or BF16) rows of `cols` weights (row-major) into the layout above; Unpack is
// its inverse. src and dst must not overlap.
void PackF16Rows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst);
void UnpackF16Rows(const uint16_t* src, int64_t rows, int cols, uint16_t* dst);

}  // namespace llm::kernels::internal
