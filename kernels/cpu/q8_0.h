// GGML's Q8_0 block format on the CPU: the block layout, the activation quantizer the Q8_0
// matmul runs on its input rows (as ggml-cpu does: every matmul input is rounded to Q8_0 blocks
// before the int8 dot products), and the one float evaluation order every ISA follows.
//
// Q8_0 matmul, y[i, j] = sum over blocks b of d_w(j, b) * d_x(i, b) * (q_w(j, b) · q_x(i, b)):
// per block the 32 int8 products are summed exactly in 8 int32 groups of 4 consecutive
// products, s[g]; then acc[g] = fma(float(d_w) * float(d_x), float(s[g]), acc[g]) over the
// blocks in order, and y = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), + bias last.
// This is ggml's AVX2 vec_dot_q8_0_q8_0 order, so every ISA (scalar, AVX2, AVX-512) gives
// bitwise the same result, and the result is independent of m and of the row's index.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llm::kernels::internal {

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQ8BlockSize];
};
static_assert(sizeof(BlockQ8_0) == kQ8BlockBytes, "Q8_0 blocks are 34 bytes, unpadded");

// Quantizes k floats (k % 32 == 0) to k / 32 blocks, like ggml's x86 quantize_row_q8_0:
// amax = max |x|, d = amax / 127 stored as fp16, q = round-half-even(x * (127 / amax)).
void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out);

}  // namespace llm::kernels::internal
