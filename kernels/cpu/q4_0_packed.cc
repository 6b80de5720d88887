#include "kernels/cpu/q4_0_packed.h"

#include <cstddef>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

static_assert(kPackGroupMaxBytes == kPackGroupBlocks * sizeof(BlockQ4_1), "16 blocks of Q4_1");
static_assert(sizeof(PackedQ4_0XGroup) % 64 == 0, "activation groups stay aligned");
static_assert(offsetof(BlockQ4_1, d) == offsetof(BlockQ4_0, d) && offsetof(BlockQ4_1, m) == 2 &&
                  offsetof(BlockQ4_1, qs) == 4 && offsetof(BlockQ4_0, qs) == 2,
              "a block is its scale(s), then its 16 bytes of quants");

// Group of t blocks of `bytes` bytes at `in` (ggml's layout) -> packed layout at `out`: the
// runs, then the fp16 scale (and min) words of every block, word by word.
void PackGroup(const uint8_t* in, size_t bytes, int t, uint8_t* out) {
  const size_t words = (bytes - 16) / 2;  // d (and m) before the quants
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < t; ++b)
      std::memcpy(out + 4 * t * r + 4 * b, in + b * bytes + 2 * words + 4 * r, 4);
  }
  for (size_t w = 0; w < words; ++w) {
    for (int b = 0; b < t; ++b)
      std::memcpy(out + 16 * t + 2 * (w * t + b), in + b * bytes + 2 * w, 2);
  }
}

void UnpackGroup(const uint8_t* in, size_t bytes, int t, uint8_t* out) {
  const size_t words = (bytes - 16) / 2;
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < t; ++b)
      std::memcpy(out + b * bytes + 2 * words + 4 * r, in + 4 * t * r + 4 * b, 4);
  }
  for (size_t w = 0; w < words; ++w) {
    for (int b = 0; b < t; ++b)
      std::memcpy(out + b * bytes + 2 * w, in + 16 * t + 2 * (w * t + b), 2);
  }
}

template <class Fn>
void ForEachGroup(DType t, int64_t rows, int cols, Fn fn) {
  const int nb = cols / kQKLegacy;
  const size_t row_bytes = RowBytes(t, cols), bytes = BlockBytes(t);
  for (int64_t r = 0; r < rows; ++r) {
    for (int b0 = 0; b0 < nb; b0 += kPackGroupBlocks) {
      const int count = nb - b0 < kPackGroupBlocks ? nb - b0 : kPackGroupBlocks;
      fn(r * row_bytes + b0 * bytes, bytes, count);
    }
  }
}

}  // namespace

void PackQ4Rows(DType t, const void* src, int64_t rows, int cols, void* dst) {
  ForEachGroup(t, rows, cols, [&](size_t at, size_t bytes, int count) {
    PackGroup(static_cast<const uint8_t*>(src) + at, bytes, count, static_cast<uint8_t*>(dst) + at);
  });
}

void UnpackQ4Rows(DType t, const void* src, int64_t rows, int cols, void* dst) {
  ForEachGroup(t, rows, cols, [&](size_t at, size_t bytes, int count) {
    UnpackGroup(static_cast<const uint8_t*>(src) + at, bytes, count,
                static_cast<uint8_t*>(dst) + at);
  });
}

void WidenQ4Group(DType t, const uint8_t* group, int count, uint8_t out[kPackGroupMaxBytes]) {
  const size_t words = (BlockBytes(t) - 16) / 2;
  std::memset(out, 0, kPackGroupMaxBytes);
  for (int r = 0; r < 4; ++r) std::memcpy(out + 64 * r, group + 4 * count * r, 4 * count);
  for (size_t w = 0; w < words; ++w) {
    std::memcpy(out + 256 + 32 * w, group + 16 * count + 2 * w * count, 2 * count);
  }
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
      o.s[b] = static_cast<float>(sum);
      o.d[b] = F16ToF32(blk.d);
    }
  }
}

}  // namespace llm::kernels::internal
