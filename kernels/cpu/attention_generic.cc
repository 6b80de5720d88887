// PagedAttention task kernel for any x86-64 (or other) CPU.
#include "kernels/cpu/attention_impl.h"

namespace llm::kernels::internal {

AttendKernel GenericAttendKernel() {
  return {"generic", AttendImpl, kFused};
}

}  // namespace llm::kernels::internal
