// exp(x) per lane (Cephes expf: Cody-Waite reduction, degree-6 polynomial; about 1 ulp) of a
// float or of a GCC vector of floats V, with I its int32 counterpart (int32_t or the int vector
// of V's width). Plain multiplies and adds (this library compiles with -ffp-contract=off),
// selects and one float -> int conversion of an integral value, so every vector width and every
// ISA rounds the same. x > 88.38 is clamped (about 2.4e38); x < -87.34 gives 0.
//
// Included inside an anonymous namespace by the TUs that use it (the attention kernels, one per
// ISA, and elementwise.cc), so no code compiled with one ISA's flags is shared with another TU;
// the standard headers below are then already included (include guards).
#pragma once

#include <cstdint>
#include <type_traits>

// CephesExp of xs[0 .. N) in place, each step for all N values before the next: N independent
// chains interleaved in program order, where one value at a time left the core's scheduler
// holding one chain's 20-odd dependent steps (the attention kernel's softmax, a vector of 16
// scores at a time: `kernel_bench attention`, TinyLlama's shape, 16 sequences of 2048 keys,
// 1.50-1.51 -> 1.44 ms). The same steps per value at any N: CephesExp is the case N = 1.
template <class V, class I, int N>
[[gnu::always_inline]] inline void CephesExpN(V (&xs)[N]) {
  const V hi = V{} + 88.3762626647949f, lo = V{} - 87.3365478515625f;
  const V magic = V{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  using Mask = decltype(xs[0] < lo);
  Mask underflow[N];
  V n[N], z[N], y[N];
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) {
    V x = xs[k] > hi ? hi : xs[k];
    underflow[k] = x < lo;
    xs[k] = x < lo ? lo : x;
  }
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) n[k] = (xs[k] * 1.44269504088896341f + magic) - magic;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) xs[k] = (xs[k] - n[k] * 0.693359375f) - n[k] * -2.12194440e-4f;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) {
    z[k] = xs[k] * xs[k];
    y[k] = xs[k] * 1.9875691500E-4f + 1.3981999507E-3f;
  }
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) y[k] = y[k] * xs[k] + 8.3334519073E-3f;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) y[k] = y[k] * xs[k] + 4.1665795894E-2f;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) y[k] = y[k] * xs[k] + 1.6666665459E-1f;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) y[k] = y[k] * xs[k] + 5.0000001201E-1f;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) y[k] = (y[k] * z[k] + xs[k]) + 1.0f;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) {
    I whole;
    if constexpr (std::is_same_v<V, float>) {
      whole = static_cast<I>(n[k]);
    } else {
      whole = __builtin_convertvector(n[k], I);
    }
    const V r = y[k] * __builtin_bit_cast(V, (whole + 127) << 23);
    xs[k] = underflow[k] ? V{} : r;
  }
}

// exp of x (a float, or each lane of a vector).
template <class V, class I>
[[gnu::always_inline]] inline V CephesExp(V x) {
  V xs[1] = {x};
  CephesExpN<V, I, 1>(xs);
  return xs[0];
}
