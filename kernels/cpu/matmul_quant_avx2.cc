// AVX2 micro-kernels of the block formats (compiled with -mavx2 -mfma -mf16c): those of
// matmul_quant_x86.h with 2 x 4 tiles (legacy) and 2 x 2 tiles (K-quants) in 16 ymm registers.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q8_0.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

#include "kernels/cpu/matmul_quant_x86.h"  // NOLINT: included into this TU's anonymous namespace

template <class F>
using Legacy = qx::LegacyMicro<F, 2, 4>;
template <class F>
using K = qx::KMicro<F, 2, 2>;

}  // namespace

const QuantMatmulKernels& Avx2QuantKernels() {
  static const QuantMatmulKernels kKernels = [] {
    QuantMatmulKernels k;
    k.fn[static_cast<int>(DType::kQ4_0)] = MatmulBlockPanel<Legacy<qx::Q4_0F>>;
    k.fn[static_cast<int>(DType::kQ4_1)] = MatmulBlockPanel<Legacy<qx::Q4_1F>>;
    k.fn[static_cast<int>(DType::kQ5_0)] = MatmulBlockPanel<Legacy<qx::Q5_0F>>;
    k.fn[static_cast<int>(DType::kQ5_1)] = MatmulBlockPanel<Legacy<qx::Q5_1F>>;
    k.fn[static_cast<int>(DType::kQ2_K)] = MatmulBlockPanel<K<qx::Q2_KF>>;
    k.fn[static_cast<int>(DType::kQ3_K)] = MatmulBlockPanel<K<qx::Q3_KF>>;
    k.fn[static_cast<int>(DType::kQ4_K)] = MatmulBlockPanel<K<qx::Q4_KF>>;
    k.fn[static_cast<int>(DType::kQ5_K)] = MatmulBlockPanel<K<qx::Q5_KF>>;
    k.fn[static_cast<int>(DType::kQ6_K)] = MatmulBlockPanel<K<qx::Q6_KF>>;
    return k;
  }();
  return kKernels;
}

}  // namespace llm::kernels::internal
