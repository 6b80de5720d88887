#include "kernels/cpu/q4_0_packed.h"

#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

static_assert(sizeof(PackedQ4_0XGroup) % 64 == 0, "the pairs after the groups stay aligned");
static_assert(kPackGroupBytes == kPackGroupBlocks * sizeof(BlockQ4_0), "a group is 16 blocks");

// Element e (0..31) of a Q4_0 block: low nibbles are elements 0..15, high nibbles 16..31.
uint8_t Quant(const BlockQ4_0& b, int e) {
  return e < 16 ? b.qs[e] & 0x0F : b.qs[e - 16] >> 4;
}

void PackGroup(const BlockQ4_0* blocks, uint8_t* out) {
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < 64; ++t) {
      const BlockQ4_0& lo = blocks[4 * r + t / 32];      // pair 2r: blocks 4r, 4r + 1
      const BlockQ4_0& hi = blocks[4 * r + 2 + t / 32];  // pair 2r + 1: blocks 4r + 2, 4r + 3
      out[64 * r + t] = static_cast<uint8_t>(Quant(lo, t % 32) | (Quant(hi, t % 32) << 4));
    }
  }
  for (int b = 0; b < kPackGroupBlocks; ++b) std::memcpy(out + 256 + 2 * b, &blocks[b].d, 2);
}

void UnpackGroup(const uint8_t* in, BlockQ4_0* blocks) {
  for (int b = 0; b < kPackGroupBlocks; ++b) {
    std::memcpy(&blocks[b].d, in + 256 + 2 * b, 2);
    const int r = b / 4, shift = (b % 4) / 2 * 4, first = (b % 2) * 32;
    uint8_t u[32];
    for (int e = 0; e < 32; ++e) u[e] = (in[64 * r + first + e] >> shift) & 0x0F;
    for (int i = 0; i < 16; ++i) blocks[b].qs[i] = static_cast<uint8_t>(u[i] | (u[16 + i] << 4));
  }
}

}  // namespace

void PackQ4_0Rows(const void* src, int64_t rows, int cols, void* dst) {
  const int nb = cols / kQKLegacy, groups = nb / kPackGroupBlocks;
  const size_t row_bytes = RowBytes(DType::kQ4_0, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* in =
        reinterpret_cast<const BlockQ4_0*>(static_cast<const uint8_t*>(src) + r * row_bytes);
    uint8_t* out = static_cast<uint8_t*>(dst) + r * row_bytes;
    for (int g = 0; g < groups; ++g) {
      PackGroup(in + g * kPackGroupBlocks, out + static_cast<int64_t>(g) * kPackGroupBytes);
    }
    const int done = groups * kPackGroupBlocks;
    std::memcpy(out + static_cast<int64_t>(groups) * kPackGroupBytes, in + done,
                static_cast<size_t>(nb - done) * sizeof(BlockQ4_0));
  }
}

void UnpackQ4_0Rows(const void* src, int64_t rows, int cols, void* dst) {
  const int nb = cols / kQKLegacy, groups = nb / kPackGroupBlocks;
  const size_t row_bytes = RowBytes(DType::kQ4_0, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* in = static_cast<const uint8_t*>(src) + r * row_bytes;
    auto* out = reinterpret_cast<BlockQ4_0*>(static_cast<uint8_t*>(dst) + r * row_bytes);
    for (int g = 0; g < groups; ++g) {
      UnpackGroup(in + static_cast<int64_t>(g) * kPackGroupBytes, out + g * kPackGroupBlocks);
    }
    const int done = groups * kPackGroupBlocks;
    std::memcpy(out + done, in + static_cast<int64_t>(groups) * kPackGroupBytes,
                static_cast<size_t>(nb - done) * sizeof(BlockQ4_0));
  }
}

int64_t PackedQ4_0XRowBytes(int nb) {
  const int groups = nb / kPackGroupBlocks, tail = nb - groups * kPackGroupBlocks;
  const int64_t bytes = static_cast<int64_t>(groups) * sizeof(PackedQ4_0XGroup) +
                        static_cast<int64_t>((tail + 1) / 2) * sizeof(LegacyBlockPair);
  constexpr int64_t kPair = sizeof(LegacyBlockPair);
  return (bytes + kPair - 1) / kPair * kPair;
}

void MakePackedQ4_0X(const BlockQ8_0* x, int nb, void* out) {
  const int groups = nb / kPackGroupBlocks;
  auto* g = static_cast<PackedQ4_0XGroup*>(out);
  for (int gi = 0; gi < groups; ++gi) {
    PackedQ4_0XGroup& o = g[gi];
    for (int b = 0; b < kPackGroupBlocks; ++b) {
      const BlockQ8_0& blk = x[gi * kPackGroupBlocks + b];
      const int p = b / 2, h = b % 2;
      std::memcpy(o.qs[p] + 32 * h, blk.qs, 32);
      const float d = F16ToF32(blk.d);
      o.d16[b] = d;
      for (int l = 0; l < 8; ++l) {
        int32_t sum = 0;
        for (int e = 4 * l; e < 4 * l + 4; ++e) sum += blk.qs[e];
        o.start[p][8 * h + l] = -8 * sum;
        o.dx[p][8 * h + l] = d;
      }
    }
  }
  const int done = groups * kPackGroupBlocks;
  MakeLegacyBlockPairs(x + done, nb - done, reinterpret_cast<LegacyBlockPair*>(g + groups));
}

}  // namespace llm::kernels::internal
