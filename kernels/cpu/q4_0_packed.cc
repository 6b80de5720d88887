#include "kernels/cpu/q4_0_packed.h"

#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

static_assert(kPackGroupBytes == kPackGroupBlocks * sizeof(BlockQ4_0), "a group is 16 blocks");
static_assert(sizeof(PackedQ4_0XGroup) % 64 == 0, "activation groups stay aligned");

// Group of t blocks at `in` (ggml's layout) -> packed layout at `out` (18 t bytes).
void PackGroup(const BlockQ4_0* in, int t, uint8_t* out) {
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < t; ++b) std::memcpy(out + 4 * t * r + 4 * b, in[b].qs + 4 * r, 4);
  }
  for (int b = 0; b < t; ++b) std::memcpy(out + 16 * t + 2 * b, &in[b].d, 2);
}

void UnpackGroup(const uint8_t* in, int t, BlockQ4_0* out) {
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < t; ++b) std::memcpy(out[b].qs + 4 * r, in + 4 * t * r + 4 * b, 4);
  }
  for (int b = 0; b < t; ++b) std::memcpy(&out[b].d, in + 16 * t + 2 * b, 2);
}

template <class Fn>
void ForEachGroup(int64_t rows, int cols, Fn fn) {
  const int nb = cols / kQKLegacy;
  const size_t row_bytes = RowBytes(DType::kQ4_0, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int b0 = 0; b0 < nb; b0 += kPackGroupBlocks) {
      const int t = nb - b0 < kPackGroupBlocks ? nb - b0 : kPackGroupBlocks;
      fn(r * row_bytes + b0 * sizeof(BlockQ4_0), t);
    }
  }
}

}  // namespace

void PackQ4_0Rows(const void* src, int64_t rows, int cols, void* dst) {
  ForEachGroup(rows, cols, [&](size_t at, int t) {
    PackGroup(reinterpret_cast<const BlockQ4_0*>(static_cast<const uint8_t*>(src) + at), t,
              static_cast<uint8_t*>(dst) + at);
  });
}

void UnpackQ4_0Rows(const void* src, int64_t rows, int cols, void* dst) {
  ForEachGroup(rows, cols, [&](size_t at, int t) {
    UnpackGroup(static_cast<const uint8_t*>(src) + at, t,
                reinterpret_cast<BlockQ4_0*>(static_cast<uint8_t*>(dst) + at));
  });
}

void WidenQ4_0Group(const uint8_t* group, int t, uint8_t out[kPackGroupBytes]) {
  std::memset(out, 0, kPackGroupBytes);
  for (int r = 0; r < 4; ++r) std::memcpy(out + 64 * r, group + 4 * t * r, 4 * t);
  std::memcpy(out + 256, group + 16 * t, 2 * t);
}

void MakePackedQ4_0X(const BlockQ8_0* x, int nb, PackedQ4_0XGroup* out) {
  for (int g = 0; g < PackedQ4_0Groups(nb); ++g) {
    PackedQ4_0XGroup& o = out[g];
    std::memset(&o, 0, sizeof(o));
    for (int b = 0; b < kPackGroupBlocks && g * kPackGroupBlocks + b < nb; ++b) {
      const BlockQ8_0& blk = x[g * kPackGroupBlocks + b];
      int32_t sum = 0;
      for (int e = 0; e < kQKLegacy; ++e) sum += blk.qs[e];
      for (int r = 0; r < 8; ++r) std::memcpy(o.q[r] + 4 * b, blk.qs + 4 * r, 4);
      o.start[b] = -8 * sum;
      o.d[b] = F16ToF32(blk.d);
    }
  }
}

}  // namespace llm::kernels::internal
