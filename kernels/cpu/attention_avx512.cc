// PagedAttention task kernel compiled with -mavx512f -mfma (fused multiply-adds, as every other
// ISA's kernel computes them).
// GCC 12 warns inside its own AVX-512 intrinsics (the `__Y = __Y` of _mm512_undefined_*, reached
// through _mm512_cvtph_ps; GCC bug 105593, fixed in GCC 13); nothing here reads an
// uninitialised value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/attention_impl.h"

namespace llm::kernels::internal {

AttendKernel Avx512AttendKernel() {
  return {"avx512", AttendImpl, kFused};
}

}  // namespace llm::kernels::internal
