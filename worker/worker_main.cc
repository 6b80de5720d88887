// worker: one rank of the inference engine; rank 0 adds the coordinator role (gRPC).
//   worker --config cluster.yaml [--section.key value ...]
//   mpirun -np N worker --config cluster.yaml        (ranks != 0 follow rank 0: worker/follower.h)
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/cli.h"
#include "common/log.h"
#include "worker/comm/mpi_communicator.h"
#include "worker/coordinator/coordinator_app.h"
#include "worker/engine/follower.h"

namespace {

// Started by an MPI launcher (mpirun / srun)? Without one, MPI is not initialized at all
// (a singleton MPI_Init costs about a second).
bool UnderMpiLauncher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  llm::BlockShutdownSignals();  // before any thread exists
  llm::InitLogging("worker");
  CLI::App app(
      "Serves the model of cluster.yaml over gRPC (proto/llm.proto) on coordinator.host:port.\n"
      "  worker --config cluster.yaml [--section.key value ...]\n"
      "  mpirun -np N worker --config cluster.yaml\n"
      "Every config key can be given as a flag; flags override the file.",
      "worker");
  llm::ClusterFlags flags(app);
  // Before MPI starts: every rank parses the same command line and stops alike.
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  std::unique_ptr<llm::MpiCommunicator> mpi;
  if (UnderMpiLauncher()) {
    auto comm = llm::MpiCommunicator::Create(&argc, &argv);
    if (!comm.ok()) {
      spdlog::critical("{}", comm.status().ToString());
      return 2;
    }
    mpi = std::move(*comm);
  }
  llm::StatusOr<llm::ClusterConfig> config = flags.Load();
  if (!config.ok()) {
    spdlog::critical("{}", config.status().ToString());
    std::fprintf(stderr, "run `worker --help` for every key\n");
    return 2;  // every rank reads the same file and fails alike
  }
  if (auto s = llm::ConfigureLogging(config->log); !s.ok()) {
    spdlog::critical("{}", s.ToString());
    return 2;
  }
  const int world = mpi ? mpi->world_size() : 1;
  if (config->engine.tensor_parallel_size != world) {
    // Every rank reads the same config and stops here alike, so nobody waits for anybody.
    spdlog::critical(
        "engine.tensor_parallel_size is {} but this job has {} rank(s): start it with "
        "`mpirun -np {} worker ...` or set engine.tensor_parallel_size to {}",
        config->engine.tensor_parallel_size, world, config->engine.tensor_parallel_size, world);
    return 2;
  }
  if (mpi) mpi->set_timeout_s(config->engine.rank_timeout_s);
  if (mpi && mpi->rank() != 0) {
    const int rc = llm::RunFollowerRank(*config, *mpi, mpi->local_size());
    if (rc != 0) mpi->AbortJob(rc);  // rank 0 would wait for this rank forever
    return 0;
  }
  const int rc = llm::RunCoordinator(*config, mpi.get(), mpi ? mpi->local_size() : 1);
  // A start-up failure on rank 0 may leave followers waiting for their first step message.
  if (rc != 0 && world > 1) mpi->AbortJob(rc);
  return rc;
}
