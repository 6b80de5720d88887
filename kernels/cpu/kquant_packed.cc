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

// ggml's 12 bytes of scales hold scale g's low 4 bits in byte g % 8 (low nibble for g < 8, high
// for g >= 8) and its high 2 bits at bits 2 (g / 4) of byte 8 + g % 4; the packed ones hold the
// 16 6-bit values one after another (scale g at bits 6g .. 6g + 5, little-endian: scales 0..7
// in bytes 0..5, 8..15 in bytes 6..11). Both biased by 32, as stored.
void MoveScales(uint8_t* scales, bool to_fields) {
  uint64_t fields[2] = {0, 0};  // scales 0..7, 8..15: 48 bits each
  if (!to_fields) {
    std::memcpy(&fields[0], scales, 6);
    std::memcpy(&fields[1], scales + 6, 6);
  }
  uint8_t ggml[12] = {};
  for (int g = 0; g < 16; ++g) {
    if (to_fields) {
      const uint64_t v = ((scales[g % 8] >> (4 * (g / 8))) & 0xF) |
                         ((scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4;
      fields[g / 8] |= v << (6 * (g % 8));
    } else {
      const int v = static_cast<int>((fields[g / 8] >> (6 * (g % 8))) & 0x3F);
      ggml[g % 8] = static_cast<uint8_t>(ggml[g % 8] | (v & 0xF) << (4 * (g / 8)));
      ggml[8 + g % 4] = static_cast<uint8_t>(ggml[8 + g % 4] | (v >> 4) << (2 * (g / 4)));
    }
  }
  if (to_fields) {
    std::memcpy(scales, &fields[0], 6);
    std::memcpy(scales + 6, &fields[1], 6);
  } else {
    std::memcpy(scales, ggml, 12);
  }
}

void Move(const void* src, int64_t count, void* dst, bool to_packed) {
  MoveHighBits(src, count, dst, to_packed);
  auto* out = static_cast<BlockQ3_K*>(dst);
  for (int64_t b = 0; b < count; ++b) MoveScales(out[b].scales, to_packed);
}

}  // namespace

void PackQ3KBlocks(const void* src, int64_t count, void* dst) {
  Move(src, count, dst, true);
}

void UnpackQ3KBlocks(const void* src, int64_t count, void* dst) {
  Move(src, count, dst, false);
}

}  // namespace llm::kernels::internal
