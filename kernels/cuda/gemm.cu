#include "kernels/cuda/gemm.h"

#include <cstdint>
#include <string>
#include <utility>

namespace llm::kernels::cuda {
namespace {

// cuBLASLt's recommendation for Hopper (smaller GPUs use less of it).
constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr size_t kMaxPlans = 1024;

Status FromLt(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(s));
}

cudaDataType_t CudaType(DType t) {
  switch (t) {
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address:
// the heuristic must not pick an algorithm that needs more.
uint32_t AlignmentOf(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

}  // namespace

LtGemm::~LtGemm() {
  for (auto& [key, plan] : plans_) Destroy(plan);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

void LtGemm::Destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  p = Plan{};
}

Status LtGemm::Init() {
  LLM_RETURN_IF_ERROR(FromLt(cublasLtCreate(&handle_), "create"));
  if (cudaMalloc(&workspace_, kWorkspaceBytes) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return ResourceExhausted("cuBLASLt workspace of " + std::to_string(kWorkspaceBytes >> 20) +
                             " MiB");
  }
  workspace_bytes_ = kWorkspaceBytes;
  return Status::Ok();
}

StatusOr<LtGemm::Plan*> LtGemm::PlanFor(DType type, int m, int n, int k, uint32_t align_x,
                                        uint32_t align_w, uint32_t align_y) {
  const PlanKey key{static_cast<int>(type), m, n, k, align_x, align_w, align_y};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  if (plans_.size() >= kMaxPlans) {
    for (auto& [unused, plan] : plans_) Destroy(plan);
    plans_.clear();
  }
  Plan p;
  // Column-major views: A = W stored k x n (ld k), used transposed; B = x stored k x m (ld k);
  // C = D = y stored n x m (ld n), i.e. row-major [m, n].
  const cudaDataType_t t = CudaType(type);
  Status s = FromLt(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  if (s.ok()) {
    s = FromLt(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)),
        "transa");
  }
  if (s.ok()) {
    s = FromLt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans,
                                              sizeof(no_trans)),
               "transb");
  }
  if (s.ok()) s = FromLt(cublasLtMatrixLayoutCreate(&p.a, t, k, n, k), "layout A");
  if (s.ok()) s = FromLt(cublasLtMatrixLayoutCreate(&p.b, t, k, m, k), "layout B");
  if (s.ok()) s = FromLt(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, n, m, n), "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  if (s.ok()) s = FromLt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  if (s.ok()) {
    s = FromLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes_, sizeof(workspace_bytes_)),
               "workspace preference");
  }
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_y},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_y}};
  for (const auto& [attr, bytes] : alignments) {
    if (s.ok()) {
      s = FromLt(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)),
                 "alignment preference");
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s.ok()) {
    s = FromLt(
        cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found),
        "heuristic");
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (s.ok() && found == 0) {
    s = Internal("cuBLASLt has no algorithm for " + std::string(DTypeName(type)) +
                 " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  if (!s.ok()) {
    Destroy(p);
    return s;
  }
  p.algo = result.algo;
  return &(plans_[key] = p);
}

Status LtGemm::Run(cudaStream_t stream, const void* x, const void* w, DType type, int m, int n,
                   int k, float* y) {
  if (m <= 0 || n <= 0) return Status::Ok();
  if (k <= 0) {
    cudaMemsetAsync(y, 0, sizeof(float) * static_cast<size_t>(m) * n, stream);
    return Status::Ok();
  }
  LLM_ASSIGN_OR_RETURN(Plan * p,
                       PlanFor(type, m, n, k, AlignmentOf(x), AlignmentOf(w), AlignmentOf(y)));
  const float alpha = 1.0f, beta = 0.0f;
  return FromLt(cublasLtMatmul(handle_, p->op, &alpha, w, p->a, x, p->b, &beta, y, p->c, y, p->c,
                               &p->algo, workspace_, workspace_bytes_, stream),
                "matmul");
}

}  // namespace llm::kernels::cuda
