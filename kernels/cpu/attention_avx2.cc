// PagedAttention task kernel compiled with -mavx2 -mf16c -mfma (the fused multiply-adds every
// other ISA's kernel computes too).
#include "kernels/cpu/attention_impl.h"

namespace llm::kernels::internal {

AttendKernel Avx2AttendKernel() {
  return {"avx2", AttendImpl, kFused};
}

}  // namespace llm::kernels::internal
