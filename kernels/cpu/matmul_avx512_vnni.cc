// AVX-512 VNNI kernel set ("avx512-vnni"): the AVX-512 set with its int8 block-format
// micro-kernels (Q8_0, the legacy formats, the K-quants) compiled with -mavx512vnni, so their
// dot products are vpdpbusd / vpdpwssd (int8_dot_x86.h). The float formats are the AVX-512 set's.
// Same integers, same float operations: the same bits as every other set.
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
#include "kernels/cpu/q1_0_row_panels.h"
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

const MatmulKernels& Avx512VnniMatmulKernels() {
  static const QuantMatmulKernels kQuant = MakeQuantKernels<K, PackedLegacy>();
  static const MatmulKernels kKernels = [] {
    MatmulKernels k = Avx512MatmulKernels();  // the float formats: the AVX-512 set's
    k.isa = "avx512-vnni";
    k.quant = &kQuant;
    __builtin_cpu_init();
    // vpermb, vpshufbitqmb: Q1_0's row panels
    if (__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bitalg")) {
      k.q1_0_row_panels = Q1_0TablePanelAvx512;
      k.q1_0_row_panels_gemm = Q1_0PanelGemmAvx512;
      k.q1_0_tables = MakeQ1_0TablesAvx512;
    }
    return k;
  }();
  return kKernels;
}

}  // namespace llm::kernels::internal
