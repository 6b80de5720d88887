// PagedAttention task kernel compiled with -mavx512f (no FMA: same rounding as every other ISA).
#include "kernels/cpu/attention_impl.h"

namespace llm::kernels::internal {

AttendKernel Avx512AttendKernel() {
  return {"avx512", AttendImpl};
}

}  // namespace llm::kernels::internal
