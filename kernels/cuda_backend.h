// The CUDA backend: kernels::Backend on one NVIDIA GPU (kernels/cuda/*.cu). Declared in every
// build so that the worker can name it; a build without nvcc (LLM_HAVE_CUDA undefined) answers
// Unavailable with the reason, never aborts. No CUDA types here, so any module may include it.
//
// One process drives one GPU (vLLM's model: mpirun starts one worker rank per GPU and the rank
// picks its device from OMPI_COMM_WORLD_LOCAL_RANK). Buffers are device memory; ops are
// enqueued on the backend's one CUDA stream and return before they finish; CopyToHost and
// Synchronize wait. Weights are F32, F16 or BF16 (caps().weight_formats): activations and the
// KV cache are F32, matrix products run on tensor cores for F16/BF16 weights (cuBLASLt) with
// F32 accumulation.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "kernels/backend.h"

namespace llm::kernels {

// True when this build compiled the CUDA backend (nvcc was found at configure time).
bool CudaCompiled();

// CUDA devices this process can use: 0 without CUDA support, a driver or a device (never an
// error).
int CudaDeviceCount();

// The CUDA backend on `device` (0 <= device < CudaDeviceCount()). The first call selects the
// device for the whole process (cudaSetDevice) and creates the backend; later calls with the same
// device return it, with another device FailedPrecondition (one GPU per process). Unavailable
// when the build has no CUDA or there is no such device, naming which.
StatusOr<Backend*> CudaBackend(int device);

// The device of a local rank: OMPI_COMM_WORLD_LOCAL_RANK (or MPI_LOCALRANKID, SLURM_LOCALID)
// modulo `device_count`, 0 when none is set. InvalidArgument when the variable is not a
// non-negative integer, naming it. Pure host logic (tested without a GPU).
StatusOr<int> DeviceForLocalRank(int device_count);

// Free and total bytes of the device of `backend` (cudaMemGetInfo), after waiting for its
// stream. FailedPrecondition when `backend` is not a CUDA backend.
struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
StatusOr<DeviceMemoryInfo> CudaMemoryInfo(Backend& backend);

// Bounds how long a CUDA backend waits for its stream (CopyToHost, Synchronize): past `seconds`
// the wait fails with Internal (a collective whose peer stopped never completes); 0 waits as
// long as it takes (the default). The worker sets engine.rank_timeout_s. No-op for others.
void SetCudaWaitTimeout(Backend& backend, double seconds);

// The cudaStream_t of a CUDA backend, as void* (NCCL collectives are enqueued on it so that they
// are ordered with the kernels); nullptr for any other backend.
void* CudaStreamOf(Backend& backend);

}  // namespace llm::kernels
