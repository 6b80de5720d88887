// Index math shared by the CUDA kernels and their CPU tests.
#pragma once

#ifdef __CUDACC__
#define LLM_HOST_DEVICE __host__ __device__
#else
#define LLM_HOST_DEVICE
#endif

namespace llm::kernels::cuda {

// Blocks of `threads` needed to cover `count` items.
LLM_HOST_DEVICE inline long GridFor(long count, int threads) {
  return (count + threads - 1) / threads;
}

// The physical KV-cache slot of token position `pos` through a block table.
LLM_HOST_DEVICE inline long SlotOf(const int* block_table, int pos, int block_size) {
  return static_cast<long>(block_table[pos / block_size]) * block_size + pos % block_size;
}

}  // namespace llm::kernels::cuda
