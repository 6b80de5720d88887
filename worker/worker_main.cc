// worker: one rank of the inference engine; rank 0 adds the coordinator role (gRPC).
//   worker --config cluster.yaml [--section.key value ...]
//   mpirun -np N worker --config cluster.yaml        (tensor parallelism: lands separately)
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/cluster_config.h"
#include "worker/coordinator_app.h"

namespace {

void PrintUsage() {
  std::printf(
      "usage: worker --config cluster.yaml [--section.key value ...]\n"
      "       mpirun -np N worker --config cluster.yaml\n\n"
      "Serves the model of cluster.yaml over gRPC (proto/llm.proto) on coordinator.host:port.\n"
      "Every config key can be given as a flag; flags override the file:\n%s",
      llm::ClusterConfigHelp().c_str());
}

// Ranks in this job, from Open MPI's launcher environment (1 without mpirun).
int MpiWorldSize() {
  const char* v = std::getenv("OMPI_COMM_WORLD_SIZE");
  return v == nullptr ? 1 : std::atoi(v);
}

}  // namespace

int main(int argc, char** argv) {
  llm::BlockShutdownSignals();  // before any thread exists
  spdlog::set_default_logger(spdlog::stderr_color_mt("worker"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [worker] [%^%l%$] %v");
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      PrintUsage();
      return 0;
    }
  }
  if (const int world = MpiWorldSize(); world > 1) {
    spdlog::critical(
        "started with {} MPI ranks, but this build of the worker serves one rank only: tensor "
        "parallelism over MPI lands separately. Run `worker --config ...` (or mpirun -np 1).",
        world);
    return 2;
  }
  llm::StatusOr<llm::ClusterConfig> config = llm::LoadClusterConfig(argc, argv);
  if (!config.ok()) {
    spdlog::critical("{}", config.status().ToString());
    std::fprintf(stderr, "run `worker --help` for every key\n");
    return 2;
  }
  return llm::RunCoordinator(*config);
}
