// The CUDA entry points of a build without nvcc: every one says so instead of failing to link,
// so the worker can report "engine.device: cuda" as unavailable with the reason.
#include "kernels/cuda_backend.h"

#ifndef LLM_HAVE_CUDA

namespace llm::kernels {

bool CudaCompiled() {
  return false;
}

int CudaDeviceCount() {
  return 0;
}

StatusOr<Backend*> CudaBackend(int device) {
  return Unavailable("CUDA device " + std::to_string(device) +
                     " requested, but this build has no CUDA backend (nvcc was not found when "
                     "CMake configured it; install the CUDA toolkit and reconfigure)");
}

StatusOr<DeviceMemoryInfo> CudaMemoryInfo(Backend& backend) {
  return FailedPrecondition("backend '" + backend.caps().name + "' is not a CUDA backend");
}

void SetCudaWaitTimeout(Backend&, double) {}

void* CudaStreamOf(Backend&) {
  return nullptr;
}

}  // namespace llm::kernels

#endif  // LLM_HAVE_CUDA
