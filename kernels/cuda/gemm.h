// Matrix products of the CUDA backend through cuBLASLt (internal to kernels/cuda): y[m, n] =
// x[m, k] · W[n, k]^T with W as a Hugging Face nn.Linear stores it (row-major [n, k]) in F32,
// F16 or BF16, F32 output and F32 accumulation (CUBLAS_COMPUTE_32F: tensor cores for F16/BF16,
// no TF32 for F32 weights, so F32 models match the CPU references). The activation operand has
// the weight's type (the caller converts it). A plan (layouts, operation, the heuristic's
// algorithm) is made once per (m, n, k, type) and reused: decode steps of the same batch size
// repeat the same shapes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "common/dtype.h"
#include "common/status.h"

namespace llm::kernels::cuda {

class LtGemm {
 public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Creates the cuBLASLt handle and its workspace on the current device.
  Status Init();
  // Enqueues the product on `stream`; x has `type` elements.
  Status Run(cudaStream_t stream, const void* x, const void* w, DType type, int m, int n, int k,
             float* y);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // Pointer alignments (bytes, powers of two up to 256) are part of a plan: the heuristic's
  // algorithm may rely on them.
  using PlanKey = std::tuple<int, int, int, int, uint32_t, uint32_t, uint32_t>;
  StatusOr<Plan*> PlanFor(DType type, int m, int n, int k, uint32_t align_x, uint32_t align_w,
                          uint32_t align_y);
  static void Destroy(Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // Bounded: prefill chunks bring many distinct m; the map is cleared when it reaches kMaxPlans.
  std::map<PlanKey, Plan> plans_;
};

}  // namespace llm::kernels::cuda
