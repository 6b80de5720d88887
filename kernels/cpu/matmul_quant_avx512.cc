// AVX-512 micro-kernels of the block formats (compiled with AVX-512 F, BW, VL flags): those of
// matmul_quant_x86.h: the packed 32-block formats in 4 x 2 tiles on 512-bit registers, which
// the 32 vector registers of AVX-512 hold, and the K-quants on 512-bit panels (KMicro512; below
// its kMinRows rows, KMicro's 4 x 2 tiles on 256-bit registers).
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593, see matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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
using PackedLegacy = qx::PackedLegacyMicro<F, 4, 2>;
template <class F>
using K = qx::KMicro512<F>;

}  // namespace

const QuantMatmulKernels& Avx512QuantKernels() {
  static const QuantMatmulKernels kKernels = MakeQuantKernels<K, PackedLegacy>();
  return kKernels;
}

}  // namespace llm::kernels::internal
