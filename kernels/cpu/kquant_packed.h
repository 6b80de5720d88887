// Q3_K blocks with their high bits in bit planes and their scales as plain 6-bit fields
// (DType::kQ3_KPacked), made once at load by the CPU backend (Backend::PrepareMatmulWeightInto)
// for its AVX-512 kernels.
//
// ggml's hmask (quant_blocks.h) keeps the high bit of element 32c + i (chunk c = 0..7, i = 0..31)
// as bit c of byte i, so 64 weights' bits are spread over 32 bytes and the AVX-512 GEMV spent a
// vptestmb per 64 weights (four per block) to gather them into a byte mask. Packed, the 32 bytes
// of hmask are 8 little-endian 32-bit words, chunk c's 32 bits in element order at word
// Q3KPlaneOf(c) (chunks 0 4 1 5 2 6 3 7): the 64-bit word j (chunks j, j + 4) is the byte mask of
// the 64 weights of the GEMV's register j (matmul_kquant_gemv512.h: chunk j in the low half, j + 4
// in the high one) as it is.
// The 12 bytes of scales hold the 16 biased 6-bit scales one after another (scale g at bits
// 6g .. 6g + 5), where ggml splits each into a nibble and 2 high bits in other bytes: one byte
// shuffle, one word shift and a mask unpack them (Q3_KPackedF::Header, matmul_quant_x86.h).
// qs and d are unchanged, so a packed row has Q3_K's RowBytes and a matmul on it gives Q3_K's
// bits (tested).
#pragma once

#include <cstdint>

namespace llm::kernels::internal {

// The 32-bit word of the packed hmask that holds chunk c's high bits.
constexpr int Q3KPlaneOf(int c) {
  return 2 * (c & 3) + (c >> 2);
}

// `count` Q3_K blocks from ggml's layout to the packed one; src and dst must not overlap.
// Unpack is its inverse.
void PackQ3KBlocks(const void* src, int64_t count, void* dst);
void UnpackQ3KBlocks(const void* src, int64_t count, void* dst);

}  // namespace llm::kernels::internal
