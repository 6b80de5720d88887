#include "kernels/cpu/kquant_packed.h"

#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

// Bit e of ggml's hmask (bit e / 32 of byte e % 32) and of the bit planes (bit e % 8 of byte
// e / 8, a little-endian bit string).
bool GgmlBit(const uint8_t* hmask, int e) {
  return (hmask[e % 32] >> (e / 32)) & 1;
}
void SetGgmlBit(uint8_t* hmask, int e) {
  hmask[e % 32] = static_cast<uint8_t>(hmask[e % 32] | 1 << (e / 32));
}
bool PlaneBit(const uint8_t* hmask, int e) {
  return (hmask[e / 8] >> (e % 8)) & 1;
}
void SetPlaneBit(uint8_t* hmask, int e) {
  hmask[e / 8] = static_cast<uint8_t>(hmask[e / 8] | 1 << (e % 8));
}

// Every block copied, its 256 high bits moved from one layout to the other.
template <bool (*kGet)(const uint8_t*, int), void (*kSet)(uint8_t*, int)>
void MoveHighBits(const void* src, int64_t count, void* dst) {
  const auto* in = static_cast<const BlockQ3_K*>(src);
  auto* out = static_cast<BlockQ3_K*>(dst);
  for (int64_t b = 0; b < count; ++b) {
    BlockQ3_K block = in[b];
    std::memset(block.hmask, 0, sizeof(block.hmask));
    for (int e = 0; e < 256; ++e) {
      if (kGet(in[b].hmask, e)) kSet(block.hmask, e);
    }
    out[b] = block;
  }
}

}  // namespace

void PackQ3KBlocks(const void* src, int64_t count, void* dst) {
  MoveHighBits<GgmlBit, SetPlaneBit>(src, count, dst);
}

void UnpackQ3KBlocks(const void* src, int64_t count, void* dst) {
  MoveHighBits<PlaneBit, SetGgmlBit>(src, count, dst);
}

}  // namespace llm::kernels::internal
