// Embedding lookup (of a whole table or of a vocab-parallel shard of it), widening F16/BF16 tables
// to float32 and dequantizing block-format ones (Q8_0, Q4_0 ... Q6_K).
#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

void GatherRow(const void* table, DType type, int64_t row, int dim, float* o) {
  const int64_t base = row * dim;
  switch (type) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(table) + base;
      for (int i = 0; i < dim; ++i) o[i] = src[i];
      break;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(table) + base;
      for (int i = 0; i < dim; ++i) o[i] = F16ToF32(src[i]);
      break;
    }
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(table) + base;
      for (int i = 0; i < dim; ++i) o[i] = Bf16ToF32(src[i]);
      break;
    }
    case DType::kQ8_0: {  // dim % 32 == 0: weight = d * q, as ggml's dequantize_row_q8_0
      const auto* src = static_cast<const uint8_t*>(table) + row * RowBytes(type, dim);
      for (int b = 0; b < dim / kQ8BlockSize; ++b) {
        const uint8_t* blk = src + b * kQ8BlockBytes;
        uint16_t d16;
        std::memcpy(&d16, blk, 2);
        const float d = F16ToF32(d16);
        for (int i = 0; i < kQ8BlockSize; ++i) {
          o[b * kQ8BlockSize + i] = static_cast<float>(static_cast<int8_t>(blk[2 + i])) * d;
        }
      }
      break;
    }
    default:  // the other block formats (dim a multiple of the block size)
      internal::DequantizeRow(type, static_cast<const uint8_t*>(table) + row * RowBytes(type, dim),
                              o, dim);
      break;
  }
}

}  // namespace

void Embedding(const int32_t* ids, int tokens, const void* table, DType table_type, int rows,
               int dim, int first_id, float* out) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(tokens) * dim >= (1 << 16))
  for (int t = 0; t < tokens; ++t) {
    float* o = out + static_cast<int64_t>(t) * dim;
    const int64_t row = static_cast<int64_t>(ids[t]) - first_id;
    if (row < 0 || row >= rows) {
      std::memset(o, 0, sizeof(float) * dim);
      continue;
    }
    GatherRow(table, table_type, row, dim, o);
  }
}

}  // namespace llm::kernels
