#include "kernels/cpu/kquant_packed.h"

#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

// The transpose of an 8 x 8 bit matrix held as byte r = row r, bit c of it = column c (Hacker's
// Delight 7-3): bit c of byte r goes to bit r of byte c. Its own inverse.
uint64_t TransposeBits8x8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// ggml's hmask is 32 rows (element i of every chunk) of 8 bits (chunk c); the bit planes are its
// transpose, 8 rows (chunk c, 4 bytes each, at plane PlaneOf(c)) of 32 bits (element i). Group g
// of 8 elements (bytes 8g .. 8g + 7 of ggml's) is the 8 x 8 block whose transpose is byte g of
// every plane. `to_planes` picks the direction; every other byte of the block is copied.
void MoveHighBits(const void* src, int64_t count, void* dst, bool to_planes) {
  const auto* in = static_cast<const BlockQ3_K*>(src);
  auto* out = static_cast<BlockQ3_K*>(dst);
  for (int64_t b = 0; b < count; ++b) {
    BlockQ3_K block = in[b];
    for (int g = 0; g < 4; ++g) {
      uint8_t rows[8];
      for (int r = 0; r < 8; ++r)
        rows[r] = to_planes ? in[b].hmask[8 * g + r] : in[b].hmask[4 * Q3KPlaneOf(r) + g];
      uint64_t x;
      std::memcpy(&x, rows, 8);
      x = TransposeBits8x8(x);
      std::memcpy(rows, &x, 8);
      for (int r = 0; r < 8; ++r)
        (to_planes ? block.hmask[4 * Q3KPlaneOf(r) + g] : block.hmask[8 * g + r]) = rows[r];
    }
    out[b] = block;
  }
}

}  // namespace

void PackQ3KBlocks(const void* src, int64_t count, void* dst) {
  MoveHighBits(src, count, dst, /*to_planes=*/true);
}

void UnpackQ3KBlocks(const void* src, int64_t count, void* dst) {
  MoveHighBits(src, count, dst, /*to_planes=*/false);
}

}  // namespace llm::kernels::internal
