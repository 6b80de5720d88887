// Small element-wise kernels the forward pass needs besides cpu_ops.h.
#pragma once

namespace llm::kernels {

// out[i] = silu(gate[i]) * up[i] for i < count (gate and up computed by separate matmuls).
void SiluMul(const float* gate, const float* up, long count, float* out);
// x[i] += y[i] (residual connections).
void AddInPlace(float* x, const float* y, long count);

}  // namespace llm::kernels
