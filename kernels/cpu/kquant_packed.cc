#include "kernels/cpu/kquant_packed.h"

#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

// Bit b of a little-endian bit string.
bool Bit(const uint8_t* bits, int b) {
  return (bits[b / 8] >> (b % 8)) & 1;
}
void SetBit(uint8_t* bits, int b) {
  bits[b / 8] = static_cast<uint8_t>(bits[b / 8] | 1 << (b % 8));
}

}  // namespace

void PackQ3KBlocks(const void* src, int64_t count, void* dst) {
  const auto* in = static_cast<const BlockQ3_K*>(src);
  auto* out = static_cast<BlockQ3_K*>(dst);
  for (int64_t b = 0; b < count; ++b) {
    BlockQ3_K block = in[b];
    std::memset(block.hmask, 0, sizeof(block.hmask));
    // Element e = 32c + i: bit c of hmask[i] -> bit e of the packed bit string.
    for (int e = 0; e < 256; ++e) {
      if ((in[b].hmask[e % 32] >> (e / 32)) & 1) SetBit(block.hmask, e);
    }
    out[b] = block;
  }
}

void UnpackQ3KBlocks(const void* src, int64_t count, void* dst) {
  const auto* in = static_cast<const BlockQ3_K*>(src);
  auto* out = static_cast<BlockQ3_K*>(dst);
  for (int64_t b = 0; b < count; ++b) {
    BlockQ3_K block = in[b];
    std::memset(block.hmask, 0, sizeof(block.hmask));
    for (int e = 0; e < 256; ++e) {
      if (Bit(in[b].hmask, e))
        block.hmask[e % 32] = static_cast<uint8_t>(block.hmask[e % 32] | 1 << (e / 32));
    }
    out[b] = block;
  }
}

}  // namespace llm::kernels::internal
