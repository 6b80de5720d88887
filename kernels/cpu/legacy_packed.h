// The 32-block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 (and IQ4_XS, Q1_0 and NVFP4
// per 32-weight sub-block, below) repacked for the SIMD kernels (DType::kQ4_0Packed ...
// kQ8_0Packed, kIQ4_NLPacked, kIQ4_XSPacked, kMXFP4Packed, kQ1_0Packed, kNVFP4Packed), made once at
// load by the CPU backend (Backend::PrepareMatmulWeight), and the activation layout those kernels
// read.
//
// Why: these formats' order (quant_blocks.h) gives each block one integer lane and one of 16
// float chains, so 16 blocks side by side fill a 512-bit register: a vpdpbusd adds 4 products of
// every block at once, 8 of them finish the 16 blocks' integer sums, and one conversion, one scale
// product and one fma serve 16 blocks. On ggml's layout each block's 18-34 bytes would have to be
// gathered into the lanes at every step; repacked once, it is one load per 64 bytes.
//
// A row's blocks come in groups of 16 (the last group has the T = nb % 16 left, if any); group g
// starts where block 16 g would (byte 16 g * BlockBytes), and a group of T blocks holds:
//  - four runs of 4T bytes: byte 4b + t of run r is byte 4r + t of block b's qs, i.e. element
//    4r + t of block b in its low nibble and element 16 + 4r + t in its high nibble, so the low
//    nibbles of a run are "quad" r (elements 4r .. 4r + 3) of every block, the high ones quad r +
//    4; Q8_0 has eight runs of 4T bytes, run r quad r of every block (one int8 per element);
//  - Q5_0 / Q5_1: the fifth bits, 4T bytes read as one little-endian bit stream of 8 masks of 4T
//    bits: bit 4b + t of mask 2r + h is the fifth bit of the element in the low (h = 0) or high
//    (h = 1) nibble of byte 4b + t of run r. In a whole group each mask is one 64-bit word, which
//    an AVX-512 byte mask takes as it is;
//  - then the T fp16 scales d (MXFP4: the T exponent bytes e), and for Q4_1 / Q5_1 the T fp16
//    mins m.
// So a packed row has exactly the format's RowBytes, and a matmul on it gives its bits (tested).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/q8_0.h"  // BlockQ8_0

namespace llm::kernels::internal {

constexpr int kPackGroupBlocks = 16;
constexpr int kPackGroupMaxBytes = 544;  // a whole Q8_0 group

// The block formats with a packed layout: the 32-block formats, and Q3_K (its high bits in bit
// planes, kquant_packed.h).
constexpr DType kPackedLayouts[11][2] = {
    {DType::kQ4_0, DType::kQ4_0Packed},     {DType::kQ4_1, DType::kQ4_1Packed},
    {DType::kQ5_0, DType::kQ5_0Packed},     {DType::kQ5_1, DType::kQ5_1Packed},
    {DType::kQ8_0, DType::kQ8_0Packed},     {DType::kQ3_K, DType::kQ3_KPacked},
    {DType::kIQ4_NL, DType::kIQ4_NLPacked}, {DType::kIQ4_XS, DType::kIQ4_XSPacked},
    {DType::kMXFP4, DType::kMXFP4Packed},   {DType::kQ1_0, DType::kQ1_0Packed},
    {DType::kNVFP4, DType::kNVFP4Packed}};
// The packed layout of a block format, or t itself; and back. (`static`, as the helpers
// below: the ISA translation units call them, and each must keep its own copy, see
// matmul_internal.h.)
static constexpr DType PackedLayoutOf(DType t) {
  for (const auto& l : kPackedLayouts) {
    if (l[0] == t) return l[1];
  }
  return t;
}
static constexpr DType FileFormatOf(DType t) {
  for (const auto& l : kPackedLayouts) {
    if (l[1] == t) return l[0];
  }
  return t;
}

// IQ4_XS is packed per 32-weight sub-block (17 bytes of a 136-byte super-block), 16 to a group
// (two super-blocks; the last group of a row with an odd count has T = 8): its four runs as
// Q4_0's, then the group's super-block scales d (fp16, T / 8 of them) and the T sub-block scales
// ls (biased by 32) as consecutive 6-bit fields (ls of sub-block b at bits 6b .. 6b + 5), so
// the 16 scales of a whole group are 12 bytes after its 4 bytes of d: 16 T + T bytes in all, as
// in ggml's layout.
constexpr int kIQ4XSSubBytes = 17;

// Q1_0 is packed per 32-weight sub-block too, 16 to a group (four blocks; a row's last group has T
// = 4, 8 or 12): its sign bits as 8 masks of 4T bits, bit 4b + t of mask r the sign bit of
// element 4r + t of sub-block b (so a whole group's mask r is the 64-bit byte mask of quad r of
// all 16 sub-blocks), then the T / 4 fp16 d: 4.5 T bytes, as in ggml's layout.

// NVFP4 is packed per 32-weight sub-block (two of a 64-weight block: its 16-weight sub-blocks 2s
// and 2s + 1 as one), 16 to a group (eight blocks; the last group of a row has an even T): Q4_0's
// four runs (element 4r + t of sub-block b in the low nibble of byte 4b + t of run r, element 16
// + 4r + t in the high one), then the T scale bytes of the first halves and the T of the second:
// 18 T bytes, as in ggml's layout.
//
// Repacks `rows` rows of `cols` weights of `t` (kQ4_0 ... kQ5_1, kQ8_0, kIQ4_NL, kMXFP4: cols a
// multiple of 32; kIQ4_XS: of 256; kQ1_0: of 128; kNVFP4: of 64) from ggml's layout; src and dst
// must not overlap. Unpack is its inverse.
void PackLegacyRows(DType t, const void* src, int64_t rows, int cols, void* dst);
void UnpackLegacyRows(DType t, const void* src, int64_t rows, int cols, void* dst);
// A group of T blocks of `t` (packed layout) in the layout of a whole group, the blocks from T on
// zero: what the kernels read for the last group of a row.
void WidenLegacyGroup(DType t, const uint8_t* group, int count, uint8_t out[kPackGroupMaxBytes]);

// One activation row's Q8_0 blocks of a group, in the kernels' layout: quad r of block b (its
// quants 4r .. 4r + 3) at bytes 4b .. 4b + 3 of q[r], Q4_0's dot product start value -(8 * S_b)
// (Q5_0 doubles it, Q8_0 on VNNI takes 16 times it), S_b as a float (the min term of Q4_1 /
// Q5_1), and the scales d_b. Blocks past the row's end are zero.
struct alignas(64) PackedXGroup {
  int8_t q[8][64];
  int32_t start[16];
  int32_t half_start[16];  // -8 times the sum of a block's first 16 quants (NVFP4's halves)
  float s[16];
  float d[16];
};
// Groups per row of nb blocks: ceil(nb / 16).
static constexpr int PackedXGroups(int nb) {
  return (nb + kPackGroupBlocks - 1) / kPackGroupBlocks;
}
// x (nb Q8_0 blocks) -> PackedXGroups(nb) groups.
void MakePackedX(const BlockQ8_0* x, int nb, PackedXGroup* out);

}  // namespace llm::kernels::internal
