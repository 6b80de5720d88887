// AVX2 micro-kernels of the block formats (compiled with -mavx2 -mfma -mf16c): those of
// matmul_quant_x86.h with 2 x 1 tiles (the packed 32-block formats, two ymm per 16 lanes) and
// 2 x 2 tiles (K-quants) in 16 ymm registers.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/iquant_blocks.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q8_0.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

#include "kernels/cpu/matmul_quant_x86.h"  // NOLINT: included into this TU's anonymous namespace

template <class F>
using PackedLegacy = qx::PackedLegacyMicro<F, 2, 1>;
template <class F>
using K = qx::KMicro<F, 2, 2>;

}  // namespace

const QuantMatmulKernels& Avx2QuantKernels() {
  static const QuantMatmulKernels kKernels = MakeQuantKernels<K, PackedLegacy>();
  return kKernels;
}

}  // namespace llm::kernels::internal
