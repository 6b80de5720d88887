// Which GPU a rank drives: host logic shared by every build (tested without a GPU).
#include <cstdlib>
#include <string>

#include "kernels/cuda_backend.h"

namespace llm::kernels {

StatusOr<int> DeviceForLocalRank(int device_count) {
  if (device_count <= 0) return FailedPrecondition("no CUDA device on this host");
  // Open MPI, MPICH / Intel MPI, Slurm's srun: the first one set wins.
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const std::string s(value);
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument(std::string(name) + "='" + s.substr(0, 32) +
                             "' is not a non-negative integer");
    }
    return std::stoi(s) % device_count;
  }
  return 0;
}

}  // namespace llm::kernels
