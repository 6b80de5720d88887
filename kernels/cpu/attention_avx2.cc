// PagedAttention task kernel compiled with -mavx2 -mf16c (no FMA: the rounding of every other
// ISA).
#include "kernels/cpu/attention_impl.h"

namespace llm::kernels::internal {

AttendKernel Avx2AttendKernel() {
  return {"avx2", AttendImpl};
}

}  // namespace llm::kernels::internal
