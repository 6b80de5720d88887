#include "kernels/cpu/iquant_blocks.h"

#include <cstring>

namespace llm::kernels::internal {
namespace {

// ggml's ksigns_iq2xs: a 7-bit sign index and, as bit 7, its parity (an even count of minus
// signs in every group of 8).
constexpr uint8_t SignsOf(uint32_t index7) {
  return static_cast<uint8_t>(index7 | (__builtin_parity(index7) << 7));
}

// 0xFF in byte j where bit j of `signs` is set.
constexpr uint64_t ByteMask(uint8_t signs) {
  uint64_t m = 0;
  for (int j = 0; j < 8; ++j) m |= (signs >> j & 1) ? uint64_t{0xFF} << (8 * j) : 0;
  return m;
}
struct ByteMasks {
  uint64_t m[256];
};
constexpr ByteMasks kByteMasks = [] {
  ByteMasks t{};
  for (int i = 0; i < 256; ++i) t.m[i] = ByteMask(static_cast<uint8_t>(i));
  return t;
}();

// 8 magnitudes (none 0) with the signs of `signs` applied: byte j negated (256 - g: no carry
// into the next byte) where bit j is set.
inline void PutSigned(uint64_t grid, uint8_t signs, int8_t* v) {
  const uint64_t m = kByteMasks.m[signs];
  const uint64_t out = (grid ^ m) + (m & 0x0101010101010101ull);
  std::memcpy(v, &out, 8);
}

// 8 IQ1 grid values g (int8 -1, 0, 1) as 8 g + delta (delta +-1).
inline void PutShifted(uint64_t grid, int delta, int8_t* v) {
  for (int j = 0; j < 8; ++j) {
    v[j] = static_cast<int8_t>(8 * static_cast<int8_t>(grid >> (8 * j)) + delta);
  }
}

uint32_t Load32(const void* p) {
  uint32_t u;
  std::memcpy(&u, p, 4);
  return u;
}

void SetScale32(DecodedIQ* out, int ib, int ls) {  // both groups of sub-block ib
  out->s[2 * ib] = out->s[2 * ib + 1] = static_cast<uint8_t>(2 * ls + 1);
}

}  // namespace

void DecodeIQ(DType t, const void* block, DecodedIQ* out) {
  int8_t* v = out->v;
  out->offset = IsTernaryQuant(t) ? 1 : 0;
  switch (t) {
    case DType::kIQ2_XXS: {
      const auto* b = static_cast<const BlockIQ2_XXS*>(block);
      out->d = F16ToF32(b->d);
      out->f = out->d * 0.125f;
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t idx = Load32(b->qs + 4 * ib), aux = Load32(b->qs + 4 * ib + 2);
        SetScale32(out, ib, static_cast<int>(aux >> 28));
        for (int l = 0; l < 4; ++l) {
          PutSigned(kIQ2XXSGrid[idx >> (8 * l) & 0xFF], SignsOf(aux >> (7 * l) & 127),
                    v + 32 * ib + 8 * l);
        }
      }
      break;
    }
    case DType::kIQ2_XS:
    case DType::kIQ2_S: {
      const bool xs = t == DType::kIQ2_XS;
      const auto* bx = static_cast<const BlockIQ2_XS*>(block);
      const auto* bs = static_cast<const BlockIQ2_S*>(block);
      out->d = F16ToF32(xs ? bx->d : bs->d);
      out->f = out->d * 0.125f;
      const uint8_t* scales = xs ? bx->scales : bs->scales;
      for (int g = 0; g < 16; ++g) {
        out->s[g] = static_cast<uint8_t>(2 * (scales[g / 2] >> (4 * (g % 2)) & 15) + 1);
      }
      for (int i = 0; i < 32; ++i) {  // group of 8
        uint64_t grid;
        uint8_t signs;
        if (xs) {
          grid = kIQ2XSGrid[bx->qs[i] & 511];
          signs = SignsOf(bx->qs[i] >> 9);
        } else {
          grid = kIQ2SGrid[bs->qs[i] | ((bs->qh[i / 4] << (8 - 2 * (i % 4))) & 0x300)];
          signs = bs->qs[32 + i];
        }
        PutSigned(grid, signs, v + 8 * i);
      }
      break;
    }
    case DType::kIQ3_XXS: {
      const auto* b = static_cast<const BlockIQ3_XXS*>(block);
      out->d = F16ToF32(b->d);
      out->f = out->d * 0.25f;
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t aux = Load32(b->qs + 64 + 4 * ib);
        SetScale32(out, ib, static_cast<int>(aux >> 28));
        for (int l = 0; l < 4; ++l) {
          const uint8_t* q = b->qs + 8 * ib + 2 * l;
          PutSigned(kIQ3XXSGrid[q[0]] | uint64_t{kIQ3XXSGrid[q[1]]} << 32,
                    SignsOf(aux >> (7 * l) & 127), v + 32 * ib + 8 * l);
        }
      }
      break;
    }
    case DType::kIQ3_S: {
      const auto* b = static_cast<const BlockIQ3_S*>(block);
      out->d = out->f = F16ToF32(b->d);
      for (int ib = 0; ib < 8; ++ib) {
        SetScale32(out, ib, b->scales[ib / 2] >> (4 * (ib % 2)) & 15);
        for (int l = 0; l < 4; ++l) {
          const uint8_t* q = b->qs + 8 * ib + 2 * l;
          const int h = b->qh[ib];
          const uint32_t g0 = kIQ3SGrid[q[0] | ((h << (8 - 2 * l)) & 256)];
          const uint32_t g1 = kIQ3SGrid[q[1] | ((h << (7 - 2 * l)) & 256)];
          PutSigned(g0 | uint64_t{g1} << 32, b->signs[4 * ib + l], v + 32 * ib + 8 * l);
        }
      }
      break;
    }
    case DType::kIQ1_S: {
      const auto* b = static_cast<const BlockIQ1_S*>(block);
      out->d = F16ToF32(b->d);
      out->f = out->d * 0.125f;
      for (int ib = 0; ib < 8; ++ib) {
        const int q = b->qh[ib];
        SetScale32(out, ib, q >> 12 & 7);
        const int delta = (q & 0x8000) != 0 ? -1 : 1;
        for (int l = 0; l < 4; ++l) {
          PutShifted(kIQ1SGrid[b->qs[4 * ib + l] | ((q >> (3 * l) & 7) << 8)], delta,
                     v + 32 * ib + 8 * l);
        }
      }
      break;
    }
    case DType::kIQ1_M: {
      const auto* b = static_cast<const BlockIQ1_M*>(block);
      uint16_t sc[4];
      std::memcpy(sc, b->scales, 8);
      const auto d16 = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                             ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
      out->d = F16ToF32(d16);
      out->f = out->d * 0.125f;
      for (int g = 0; g < 16; ++g) {
        out->s[g] = static_cast<uint8_t>(2 * (sc[g / 4] >> (3 * (g % 4)) & 7) + 1);
      }
      for (int i = 0; i < 32; ++i) {  // group of 8: qh[i / 2]'s low or high nibble
        const int h = b->qh[i / 2] >> (4 * (i % 2)) & 15;
        PutShifted(kIQ1SGrid[b->qs[i] | (h & 7) << 8], (h & 8) != 0 ? -1 : 1, v + 8 * i);
      }
      break;
    }
    case DType::kTQ1_0: {
      const auto* b = static_cast<const BlockTQ1_0*>(block);
      out->d = out->f = F16ToF32(b->d);
      std::memset(out->s, 1, sizeof(out->s));
      for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 32; ++m) v[32 * n + m] = static_cast<int8_t>(TritOf(b->qs[m], n) - 1);
        for (int m = 0; m < 16; ++m) {
          v[160 + 16 * n + m] = static_cast<int8_t>(TritOf(b->qs[32 + m], n) - 1);
        }
      }
      for (int n = 0; n < 4; ++n) {
        for (int m = 0; m < 4; ++m)
          v[240 + 4 * n + m] = static_cast<int8_t>(TritOf(b->qh[m], n) - 1);
      }
      break;
    }
    case DType::kTQ2_0: {
      const auto* b = static_cast<const BlockTQ2_0*>(block);
      out->d = out->f = F16ToF32(b->d);
      std::memset(out->s, 1, sizeof(out->s));
      for (int e = 0; e < kQK_K; ++e) {
        v[e] = static_cast<int8_t>((b->qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4)) & 3) - 1);
      }
      break;
    }
    default:
      break;
  }
}

void DequantizeIQ(DType t, const void* block, float* y) {
  DecodedIQ w;
  DecodeIQ(t, block, &w);
  for (int e = 0; e < kQK_K; ++e) {
    const int s = w.s[e / 16], v = w.v[e];
    const float g = static_cast<float>(v < 0 ? -v : v), sign = v < 0 ? -1.0f : 1.0f;
    switch (t) {
      case DType::kIQ2_XXS:  // db = d * (0.5f + ls) * 0.25f, y = db * grid * sign
      case DType::kIQ2_XS:
      case DType::kIQ2_S:
        y[e] = w.d * (0.5f * static_cast<float>(s)) * 0.25f * g * sign;
        break;
      case DType::kIQ3_XXS:  // db = d * (0.5f + ls) * 0.5f
        y[e] = w.d * (0.5f * static_cast<float>(s)) * 0.5f * g * sign;
        break;
      case DType::kIQ3_S:  // db = d * (1 + 2 ls)
        y[e] = w.d * static_cast<float>(s) * g * sign;
        break;
      case DType::kTQ1_0:  // y = (float)(t) * d
      case DType::kTQ2_0:
        y[e] = static_cast<float>(v) * w.d;
        break;
      default:  // IQ1_S, IQ1_M: dl = d * (2 ls + 1), y = dl * (grid + delta), delta = +-1/8
        y[e] = w.d * static_cast<float>(s) * (static_cast<float>(v) * 0.125f);
        break;
    }
  }
}

}  // namespace llm::kernels::internal
