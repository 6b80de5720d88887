// Embedding lookup with a scale, widening F16/BF16 tables to float32.
#include <cstdint>
#include <cstring>

#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

void GatherRow(const void* table, DType type, int64_t row, int dim, float scale, float* o) {
  const int64_t base = row * dim;
  switch (type) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(table) + base;
      for (int i = 0; i < dim; ++i) o[i] = src[i] * scale;
      break;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(table) + base;
      for (int i = 0; i < dim; ++i) o[i] = F16ToF32(src[i]) * scale;
      break;
    }
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(table) + base;
      for (int i = 0; i < dim; ++i) o[i] = Bf16ToF32(src[i]) * scale;
      break;
    }
  }
}

}  // namespace

void Embedding(const int32_t* ids, int tokens, const void* table, DType table_type, int vocab,
               int dim, float scale, float* out) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(tokens) * dim >= (1 << 16))
  for (int t = 0; t < tokens; ++t) {
    float* o = out + static_cast<int64_t>(t) * dim;
    if (ids[t] < 0 || ids[t] >= vocab) {
      std::memset(o, 0, sizeof(float) * dim);
      continue;
    }
    GatherRow(table, table_type, ids[t], dim, scale, o);
  }
}

}  // namespace llm::kernels
