// ReshapeAndCache: scatters the new tokens' K and V rows into the paged cache (float or half).
#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace {

// copy(t, dst) for every token t with a slot (a negative slot is padding), dst being the
// element offset of its slot's row in a [num_blocks, block_size, row] cache.
template <class Copy>
void ForEachSlot(int tokens, int64_t row, const int32_t* slot_mapping, int block_size,
                 Copy&& copy) {
#pragma omp parallel for schedule(static) if (tokens * row >= (1 << 16))
  for (int t = 0; t < tokens; ++t) {
    const int32_t slot = slot_mapping[t];
    if (slot < 0) continue;
    copy(t, (static_cast<int64_t>(slot / block_size) * block_size + slot % block_size) * row);
  }
}

}  // namespace

void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                     const int32_t* slot_mapping, int block_size, float* k_cache, float* v_cache) {
  const int64_t row = static_cast<int64_t>(kv_heads) * head_dim;
  ForEachSlot(tokens, row, slot_mapping, block_size, [&](int t, int64_t dst) {
    std::memcpy(k_cache + dst, k + t * row, sizeof(float) * row);
    std::memcpy(v_cache + dst, v + t * row, sizeof(float) * row);
  });
}

void ReshapeAndCacheF16(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                        const int32_t* slot_mapping, int block_size, uint16_t* k_cache,
                        uint16_t* v_cache) {
  const int64_t row = static_cast<int64_t>(kv_heads) * head_dim;
  ForEachSlot(tokens, row, slot_mapping, block_size, [&](int t, int64_t dst) {
    for (int64_t i = 0; i < row; ++i) {
      k_cache[dst + i] = F32ToF16(k[t * row + i]);
      v_cache[dst + i] = F32ToF16(v[t * row + i]);
    }
  });
}

}  // namespace llm::kernels
