// GGML's Q8_0 block format on the CPU: the block layout and the activation quantizer every
// 32-block format's matmul runs on its input rows (as ggml-cpu does: every matmul input is
// rounded to Q8_0 blocks before the int8 dot products).
//
// Q8_0 matmul, y[i, j] = sum over blocks b of d_w(j, b) * d_x(i, b) * (q_w(j, b) · q_x(i, b)),
// follows the order of the 32-block formats (quant_blocks.h): per block the 32 int8 products
// are summed exactly in one int32 D_b, then acc_c = fma(d_w * d_x, float(D_b), acc_c) with
// chain c = b % 16, and the 16 chains are reduced by a fixed tree (+ bias last). Every ISA
// (scalar, AVX2, AVX-512) gives bitwise the same result, independent of m and of the row's
// index. (It was ggml's AVX2 vec_dot_q8_0_q8_0 order, 8 lanes per block, until 28 Nov 2026:
// that spent a conversion, a scale product and an fma on every block and made prefill 2.6x
// slower; the results differ from it in float rounding only, tested within 1e-4.)
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
