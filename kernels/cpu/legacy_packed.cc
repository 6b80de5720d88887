#include "kernels/cpu/legacy_packed.h"

#include <cstddef>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

static_assert(kPackGroupMaxBytes == kPackGroupBlocks * sizeof(BlockQ8_0), "16 blocks of Q8_0");
static_assert(sizeof(PackedXGroup) % 64 == 0, "activation groups stay aligned");
static_assert(offsetof(BlockQ4_0, qs) == 2 && offsetof(BlockQ4_1, m) == 2 &&
                  offsetof(BlockQ4_1, qs) == 4 && offsetof(BlockQ5_0, qh) == 2 &&
                  offsetof(BlockQ5_0, qs) == 6 && offsetof(BlockQ5_1, m) == 2 &&
                  offsetof(BlockQ5_1, qh) == 4 && offsetof(BlockQ5_1, qs) == 8 &&
                  offsetof(BlockQ8_0, qs) == 2 && offsetof(BlockMXFP4, qs) == 1,
              "a block is d, its min m, its fifth bits qh (where it has them), then its qs");

// Where a format's fields are in a block, and in a packed group of t blocks.
struct Layout {
  size_t bytes;     // per block
  bool min, fifth;  // has m / qh
  size_t qh;        // qh's offset in a block
  size_t scale;     // bytes of the scale d: 2 (fp16), 1 for MXFP4's exponent byte

  explicit Layout(DType f)
      : bytes(BlockBytes(f)),
        min(f == DType::kQ4_1 || f == DType::kQ5_1),
        fifth(f == DType::kQ5_0 || f == DType::kQ5_1),
        qh(min ? 4 : 2),
        scale(f == DType::kMXFP4 ? 1 : 2) {}
  int runs = bytes == sizeof(BlockQ8_0) ? 8 : 4;  // 4-byte quads of qs per block
  size_t Qs() const { return bytes - 4 * static_cast<size_t>(runs); }
  // In a group of t blocks: the fifth-bit stream, the scales, the mins.
  size_t Masks(int t) const { return 4 * static_cast<size_t>(runs) * t; }
  size_t D(int t) const { return Masks(t) + (fifth ? 4 * static_cast<size_t>(t) : 0); }
  size_t M(int t) const { return D(t) + scale * static_cast<size_t>(t); }
};

bool Bit(const uint8_t* stream, size_t p) {
  return (stream[p >> 3] >> (p & 7)) & 1;
}
void SetBit(uint8_t* stream, size_t p) {
  stream[p >> 3] = static_cast<uint8_t>(stream[p >> 3] | (1u << (p & 7)));
}
// Position of element 16h + 4r + tt of block b in the fifth-bit stream of a group of t blocks.
size_t MaskBit(int t, int r, int h, int b, int tt) {
  return static_cast<size_t>(2 * r + h) * 4 * t + 4 * b + tt;
}

// Group of t blocks at `in` (ggml's layout) -> packed layout at `out`.
void PackGroup(const Layout& f, const uint8_t* in, int t, uint8_t* out) {
  for (int r = 0; r < f.runs; ++r) {
    for (int b = 0; b < t; ++b)
      std::memcpy(out + 4 * t * r + 4 * b, in + b * f.bytes + f.Qs() + 4 * r, 4);
  }
  if (f.fifth) {
    uint8_t* masks = out + f.Masks(t);
    std::memset(masks, 0, 4 * static_cast<size_t>(t));
    for (int b = 0; b < t; ++b) {
      uint32_t qh;
      std::memcpy(&qh, in + b * f.bytes + f.qh, 4);
      for (int r = 0; r < 4; ++r) {
        for (int h = 0; h < 2; ++h) {
          for (int tt = 0; tt < 4; ++tt) {
            if ((qh >> (16 * h + 4 * r + tt)) & 1) SetBit(masks, MaskBit(t, r, h, b, tt));
          }
        }
      }
    }
  }
  for (int b = 0; b < t; ++b) {
    std::memcpy(out + f.D(t) + f.scale * b, in + b * f.bytes, f.scale);
    if (f.min) std::memcpy(out + f.M(t) + 2 * b, in + b * f.bytes + 2, 2);
  }
}

void UnpackGroup(const Layout& f, const uint8_t* in, int t, uint8_t* out) {
  for (int r = 0; r < f.runs; ++r) {
    for (int b = 0; b < t; ++b)
      std::memcpy(out + b * f.bytes + f.Qs() + 4 * r, in + 4 * t * r + 4 * b, 4);
  }
  for (int b = 0; b < t; ++b) {
    if (f.fifth) {
      uint32_t qh = 0;
      for (int r = 0; r < 4; ++r) {
        for (int h = 0; h < 2; ++h) {
          for (int tt = 0; tt < 4; ++tt) {
            if (Bit(in + f.Masks(t), MaskBit(t, r, h, b, tt))) qh |= 1u << (16 * h + 4 * r + tt);
          }
        }
      }
      std::memcpy(out + b * f.bytes + f.qh, &qh, 4);
    }
    std::memcpy(out + b * f.bytes, in + f.D(t) + f.scale * b, f.scale);
    if (f.min) std::memcpy(out + b * f.bytes + 2, in + f.M(t) + 2 * b, 2);
  }
}

// IQ4_XS: a group of t sub-blocks (t / 8 super-blocks in ggml's layout at `in`) <-> packed.
void PackIQ4XSGroup(const uint8_t* in, int t, uint8_t* out) {
  uint8_t* fields = out + 16 * t + 2 * (t / 8);
  std::memset(fields, 0, 3 * static_cast<size_t>(t) / 4);
  for (int b = 0; b < t; ++b) {
    const auto& sb = *reinterpret_cast<const BlockIQ4_XS*>(in + (b / 8) * sizeof(BlockIQ4_XS));
    for (int r = 0; r < 4; ++r)
      std::memcpy(out + 4 * t * r + 4 * b, sb.qs + 16 * (b % 8) + 4 * r, 4);
    if (b % 8 == 0) std::memcpy(out + 16 * t + 2 * (b / 8), &sb.d, 2);
    const int ls = IQ4XSScale(sb, b % 8) + 32;
    for (int i = 0; i < 6; ++i) {
      if ((ls >> i) & 1) SetBit(fields, 6 * static_cast<size_t>(b) + i);
    }
  }
}
void UnpackIQ4XSGroup(const uint8_t* in, int t, uint8_t* out) {
  const uint8_t* fields = in + 16 * t + 2 * (t / 8);
  for (int b = 0; b < t; ++b) {
    auto& sb = *reinterpret_cast<BlockIQ4_XS*>(out + (b / 8) * sizeof(BlockIQ4_XS));
    if (b % 8 == 0) {
      std::memcpy(&sb.d, in + 16 * t + 2 * (b / 8), 2);
      sb.scales_h = 0;
      std::memset(sb.scales_l, 0, sizeof(sb.scales_l));
    }
    for (int r = 0; r < 4; ++r)
      std::memcpy(sb.qs + 16 * (b % 8) + 4 * r, in + 4 * t * r + 4 * b, 4);
    int ls = 0;
    for (int i = 0; i < 6; ++i) ls |= Bit(fields, 6 * static_cast<size_t>(b) + i) << i;
    AddIQ4XSScale(sb, b % 8, ls);
  }
}

// Q1_0: a group of t sub-blocks (t / 4 blocks in ggml's layout at `in`, t a multiple of 4) <->
// packed: 8 masks of 4t bits, then the t / 4 fp16 d. Sub-block b's 32 sign bits are the
// little-endian word w_b (bytes 4 (b % 4) .. of block b / 4's qs), and its quad r (elements 4r ..
// 4r + 3) is nibble r of w_b, which becomes nibble b of mask r: a transpose of nibbles.
void PackQ1_0Group(const uint8_t* in, int t, uint8_t* out) {
  uint64_t masks[8] = {};
  for (int b = 0; b < t; ++b) {
    const auto& blk = *reinterpret_cast<const BlockQ1_0*>(in + (b / 4) * sizeof(BlockQ1_0));
    uint32_t w;
    std::memcpy(&w, blk.qs + 4 * (b % 4), 4);
    for (int r = 0; r < 8; ++r) masks[r] |= static_cast<uint64_t>((w >> (4 * r)) & 0xF) << (4 * b);
    if (b % 4 == 0) std::memcpy(out + 4 * t + 2 * (b / 4), &blk.d, 2);
  }
  for (int r = 0; r < 8; ++r) std::memcpy(out + r * t / 2, &masks[r], t / 2);  // little-endian
}
void UnpackQ1_0Group(const uint8_t* in, int t, uint8_t* out) {
  uint64_t masks[8] = {};
  for (int r = 0; r < 8; ++r) std::memcpy(&masks[r], in + r * t / 2, t / 2);
  for (int b = 0; b < t; ++b) {
    auto& blk = *reinterpret_cast<BlockQ1_0*>(out + (b / 4) * sizeof(BlockQ1_0));
    uint32_t w = 0;
    for (int r = 0; r < 8; ++r) w |= static_cast<uint32_t>((masks[r] >> (4 * b)) & 0xF) << (4 * r);
    std::memcpy(blk.qs + 4 * (b % 4), &w, 4);
    if (b % 4 == 0) std::memcpy(&blk.d, in + 4 * t + 2 * (b / 4), 2);
  }
}

// NVFP4: a group of t sub-blocks of 32 (t / 2 blocks in ggml's layout at `in`, t even) <->
// packed. Code of element j (0..15) of 16-weight sub-block h of a block: nibble j / 8 of byte
// 8h + j % 8.
uint8_t NVCode(const BlockNVFP4& blk, int h, int j) {
  return static_cast<uint8_t>((blk.qs[8 * h + j % 8] >> (j < 8 ? 0 : 4)) & 0xF);
}
void PackNVFP4Group(const uint8_t* in, int t, uint8_t* out) {
  for (int b = 0; b < t; ++b) {
    const auto& blk = *reinterpret_cast<const BlockNVFP4*>(in + (b / 2) * sizeof(BlockNVFP4));
    const int h0 = 2 * (b % 2);
    for (int r = 0; r < 4; ++r) {
      for (int tt = 0; tt < 4; ++tt) {
        out[4 * t * r + 4 * b + tt] = static_cast<uint8_t>(NVCode(blk, h0, 4 * r + tt) |
                                                           NVCode(blk, h0 + 1, 4 * r + tt) << 4);
      }
    }
    out[16 * t + b] = blk.d[h0];
    out[17 * t + b] = blk.d[h0 + 1];
  }
}
void UnpackNVFP4Group(const uint8_t* in, int t, uint8_t* out) {
  std::memset(out, 0, sizeof(BlockNVFP4) * (t / 2));
  for (int b = 0; b < t; ++b) {
    auto& blk = *reinterpret_cast<BlockNVFP4*>(out + (b / 2) * sizeof(BlockNVFP4));
    const int h0 = 2 * (b % 2);
    for (int r = 0; r < 4; ++r) {
      for (int tt = 0; tt < 4; ++tt) {
        const uint8_t q = in[4 * t * r + 4 * b + tt];
        for (int k = 0; k < 2; ++k) {
          const int h = h0 + k, j = 4 * r + tt;
          blk.qs[8 * h + j % 8] |= static_cast<uint8_t>(((q >> (4 * k)) & 0xF) << (j < 8 ? 0 : 4));
        }
      }
    }
    blk.d[h0] = in[16 * t + b];
    blk.d[h0 + 1] = in[17 * t + b];
  }
}

template <class Fn>
void ForEachGroup(DType t, int64_t rows, int cols, Fn fn) {
  const int nb = cols / kQKLegacy;
  const size_t row_bytes = RowBytes(t, cols);
  // bytes per 32 weights: 17 for IQ4_XS, 4.5 for Q1_0 (groups start at multiples of 16)
  const size_t block_bytes = BlockBytes(t), sub_blocks = BlockSize(t) / kQKLegacy;
  for (int64_t r = 0; r < rows; ++r) {
    for (int b0 = 0; b0 < nb; b0 += kPackGroupBlocks) {
      const int count = nb - b0 < kPackGroupBlocks ? nb - b0 : kPackGroupBlocks;
      fn(r * row_bytes + b0 * block_bytes / sub_blocks, count);
    }
  }
}

}  // namespace

void PackLegacyRows(DType t, const void* src, int64_t rows, int cols, void* dst) {
  const Layout f(t);
  ForEachGroup(t, rows, cols, [&](size_t at, int count) {
    const uint8_t* in = static_cast<const uint8_t*>(src) + at;
    uint8_t* out = static_cast<uint8_t*>(dst) + at;
    if (t == DType::kIQ4_XS) {
      PackIQ4XSGroup(in, count, out);
    } else if (t == DType::kQ1_0) {
      PackQ1_0Group(in, count, out);
    } else if (t == DType::kNVFP4) {
      PackNVFP4Group(in, count, out);
    } else {
      PackGroup(f, in, count, out);
    }
  });
}

void UnpackLegacyRows(DType t, const void* src, int64_t rows, int cols, void* dst) {
  const Layout f(t);
  ForEachGroup(t, rows, cols, [&](size_t at, int count) {
    const uint8_t* in = static_cast<const uint8_t*>(src) + at;
    uint8_t* out = static_cast<uint8_t*>(dst) + at;
    if (t == DType::kIQ4_XS) {
      UnpackIQ4XSGroup(in, count, out);
    } else if (t == DType::kQ1_0) {
      UnpackQ1_0Group(in, count, out);
    } else if (t == DType::kNVFP4) {
      UnpackNVFP4Group(in, count, out);
    } else {
      UnpackGroup(f, in, count, out);
    }
  });
}

void WidenLegacyGroup(DType t, const uint8_t* group, int count, uint8_t out[kPackGroupMaxBytes]) {
  const Layout f(t);
  constexpr int kWhole = kPackGroupBlocks;
  std::memset(out, 0, kPackGroupMaxBytes);
  if (t == DType::kIQ4_XS) {  // count 8: one super-block's runs, d and 6 bytes of fields
    for (int r = 0; r < 4; ++r) std::memcpy(out + 64 * r, group + 4 * count * r, 4 * count);
    std::memcpy(out + 16 * kWhole, group + 16 * count, 2);
    std::memcpy(out + 16 * kWhole + 4, group + 16 * count + 2, 3 * static_cast<size_t>(count) / 4);
    return;
  }
  if (t == DType::kQ1_0) {  // count 4, 8 or 12: each mask's count / 2 bytes, then count / 4 d
    for (int r = 0; r < 8; ++r) std::memcpy(out + 8 * r, group + r * count / 2, count / 2);
    std::memcpy(out + 4 * kWhole, group + 4 * count, 2 * static_cast<size_t>(count) / 4);
    return;
  }
  if (t == DType::kNVFP4) {  // an even count: the runs, then both halves' scale bytes
    for (int r = 0; r < 4; ++r) std::memcpy(out + 64 * r, group + 4 * count * r, 4 * count);
    std::memcpy(out + 16 * kWhole, group + 16 * count, count);
    std::memcpy(out + 17 * kWhole, group + 17 * count, count);
    return;
  }
  for (int r = 0; r < f.runs; ++r) std::memcpy(out + 64 * r, group + 4 * count * r, 4 * count);
  if (f.fifth) {
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 4 * count; ++i) {
        if (Bit(group + f.Masks(count), static_cast<size_t>(k) * 4 * count + i)) {
          SetBit(out + f.Masks(kWhole), static_cast<size_t>(k) * 4 * kWhole + i);
        }
      }
    }
  }
  std::memcpy(out + f.D(kWhole), group + f.D(count), f.scale * count);
  if (f.min) std::memcpy(out + f.M(kWhole), group + f.M(count), 2 * count);
}

void MakePackedX(const BlockQ8_0* x, int nb, PackedXGroup* out) {
  for (int g = 0; g < PackedXGroups(nb); ++g) {
    PackedXGroup& o = out[g];
    std::memset(&o, 0, sizeof(o));
    for (int b = 0; b < kPackGroupBlocks && g * kPackGroupBlocks + b < nb; ++b) {
      const BlockQ8_0& blk = x[g * kPackGroupBlocks + b];
      int32_t sum = 0, half = 0;
      for (int e = 0; e < kQKLegacy; ++e) sum += blk.qs[e];
      for (int e = 0; e < kQKLegacy / 2; ++e) half += blk.qs[e];
      for (int r = 0; r < 8; ++r) std::memcpy(o.q[r] + 4 * b, blk.qs + 4 * r, 4);
      o.start[b] = -8 * sum;
      o.half_start[b] = -8 * half;
      o.s[b] = static_cast<float>(sum);
      o.d[b] = F16ToF32(blk.d);
    }
  }
}

}  // namespace llm::kernels::internal
