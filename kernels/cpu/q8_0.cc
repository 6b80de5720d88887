// The Q8_0 activation quantizer (kernels/cpu/q8_0.h), compiled without ISA flags: the same code
// feeds every ISA's Q8_0 matmul.
#include "kernels/cpu/q8_0.h"

#include <cmath>

namespace llm::kernels::internal {

void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  for (int b = 0; b < k / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kQ8BlockSize; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out[b].d = F32ToF16(d);
    for (int i = 0; i < kQ8BlockSize; ++i) {
      // nearbyint rounds half to even in the default rounding mode (_MM_ROUND_NEAREST). The
      // clamp only matters for non-finite input (inf * 0, NaN), which would otherwise be an
      // out-of-range conversion.
      float v = xb[i] * id;
      v = v >= -127.0f ? (v <= 127.0f ? v : 127.0f) : (v < -127.0f ? -127.0f : 0.0f);
      out[b].qs[i] = static_cast<int8_t>(std::nearbyint(v));
    }
  }
}

}  // namespace llm::kernels::internal
