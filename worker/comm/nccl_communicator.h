// Communicator over NCCL, for tensor parallelism across GPU ranks (one process per GPU, started
// by mpirun): AllReduceSum and Gather run on device memory on the CUDA backend's stream, so
// they are ordered with the kernels and never copy activations to the host. Everything else
// (the step message's Broadcast, pipeline Send/Recv of host staging buffers, the health
// figures) goes through the MPI communicator it was built from, unchanged.
//
// Wiring: rank 0 of the MPI communicator creates the NCCL unique id and broadcasts it over MPI;
// every rank then joins with ncclCommInitRankConfig on the device of its CUDA backend. Built only
// when the CUDA toolkit has NCCL (LLM_HAVE_NCCL); otherwise Create says so.
//
// Waiting: the NCCL communicator is non-blocking (config.blocking = 0), so no NCCL call hangs
// forever: creation waits at most 60 s for every rank to join (then Internal), and each
// collective's enqueue is polled with a bound. The collectives do not synchronize: they run on
// the backend's stream, and the backend's CopyToHost / Synchronize wait for them. A collective
// that NCCL reports failed (a peer gone, a network error, found asynchronously by the next call)
// cannot be answered by a Status through the Communicator interface: like the MPI communicator
// past engine.rank_timeout_s, the rank logs which collective and why, aborts the NCCL
// communicator and ends the job (MpiCommunicator::AbortJob).
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/comm/mpi_communicator.h"

namespace llm {

// True when this build has NCCL (so tensor parallelism over GPUs is possible).
bool NcclCompiled();

// The NCCL unique id of this communicator: rank 0's `id` (its bytes) is broadcast over `mpi`,
// every other rank's `id` is replaced by it. Every rank of `mpi` must call it (collective).
// InvalidArgument when rank 0's id is not the size NCCL uses (128 bytes). Host logic, tested
// under mpirun without a GPU.
Status ShareUniqueId(Communicator& mpi, std::vector<uint8_t>& id);

// The NCCL communicator of the ranks of `mpi` on `backend`'s GPU (a CUDA backend; both must
// outlive it). Every rank of `mpi` must call it. FailedPrecondition when `backend` is not a CUDA
// backend, Unavailable when the build has no NCCL; NCCL's own errors come back as Internal with
// its message.
StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(MpiCommunicator& mpi,
                                                               kernels::Backend& backend);

}  // namespace llm
