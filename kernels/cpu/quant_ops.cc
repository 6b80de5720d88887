// Row-wise quantization entry points of cpu_ops.h over the block formats of quant_blocks.h.
#include <cstring>
#include <vector>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {

void QuantizeRows(DType t, const float* x, int64_t rows, int64_t cols, void* dst) {
  const size_t row_bytes = RowBytes(t, cols);
#pragma omp parallel for schedule(dynamic, 16) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    internal::QuantizeRow(t, x + r * cols, static_cast<uint8_t*>(dst) + r * row_bytes, cols);
  }
}

void DequantizeRows(DType t, const void* src, int64_t rows, int64_t cols, float* dst) {
  const size_t row_bytes = RowBytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {
    internal::DequantizeRow(t, static_cast<const uint8_t*>(src) + r * row_bytes, dst + r * cols,
                            cols);
  }
}

namespace {

// Offsets of the fp16 scale fields (d, then m / dmin where the format has one; -1: none).
void ScaleOffsets(DType t, int* d, int* m) {
  *m = -1;
  switch (t) {
    case DType::kQ2_K:
      *d = 80;
      *m = 82;
      break;
    case DType::kQ3_K:
      *d = 108;
      break;
    case DType::kQ6_K:
      *d = 208;
      break;
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      *d = 0;
      *m = 2;
      break;
    case DType::kIQ1_M:  // d in the scales' top nibbles: random bits (FillRandomBlocks fixes them)
      *d = -1;
      break;
    case DType::kMXFP4:  // an exponent byte, no fp16 (FillRandomBlocks sets it)
    case DType::kNVFP4:  // 4 UE4M3 bytes, likewise
      *d = -1;
      break;
    case DType::kTQ1_0:  // d last
    case DType::kTQ2_0:
      *d = static_cast<int>(BlockBytes(t)) - 2;
      break;
    default:  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS and the grid i-quants: d first
      *d = 0;
      break;
  }
}

}  // namespace

void FillRandomBlocks(DType t, uint64_t seed, void* dst, int64_t blocks) {
  const size_t bb = BlockBytes(t);
  int doff, moff;
  ScaleOffsets(t, &doff, &moff);
  // Small scales: weights of the order of 0.01, like the unquantized dummy weights.
  const float d = IsKQuant(t) || DecodesAsIQ(t) ? 1e-4f : 3e-3f;
  const uint16_t d16 = F32ToF16(d), m16 = F32ToF16(-d);
#pragma omp parallel for schedule(static) if (blocks >= 4096)
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* p = static_cast<uint8_t*>(dst) + b * bb;
    uint64_t s = seed + static_cast<uint64_t>(b) * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < bb; i += 8) {
      s += 0x9e3779b97f4a7c15ull;
      uint64_t z = s;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      std::memcpy(p + i, &z, bb - i < 8 ? bb - i : 8);
    }
    if (doff >= 0) std::memcpy(p + doff, &d16, 2);
    if (moff >= 0) std::memcpy(p + moff, &m16, 2);
    if (t == DType::kMXFP4) p[0] = 119;            // 2^-9: weights up to 12 * 2^-9
    if (t == DType::kNVFP4) std::memset(p, 2, 4);  // UE4M3 2 (half of 2 2^-9): 12 * 2^-9 too
    if (t == DType::kIQ1_M) {  // d's nibbles atop the 4 uint16 scale words (offset 48)
      for (int w = 0; w < 4; ++w) {
        uint16_t word;
        std::memcpy(&word, p + 48 + 2 * w, 2);
        word = static_cast<uint16_t>((word & 0x0FFF) | ((d16 >> (4 * w)) & 0xF) << 12);
        std::memcpy(p + 48 + 2 * w, &word, 2);
      }
    }
  }
}

}  // namespace llm::kernels
