// worker: one rank of the inference engine; rank 0 adds the coordinator role (gRPC).
//   worker --config cluster.yaml [--section.key value ...]
//   mpirun -np N worker --config cluster.yaml        (ranks != 0 follow rank 0: worker/follower.h)
//   N = engine.data_parallel_size × engine.pipeline_parallel_size × engine.tensor_parallel_size:
//   data-parallel group g (world ranks g*pp*tp ..) is an independent engine whose first rank
//   serves on coordinator.port + g; inside it, stage s is group ranks s*tp .. s*tp+tp-1.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/cli.h"
#include "common/log.h"
#include "common/parallel_layout.h"
#include "worker/comm/mpi_communicator.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/coordinator/coordinator_app.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/follower.h"

namespace {

// Started by an MPI launcher (mpirun / srun)? Without one, MPI is not initialized at all
// (a singleton MPI_Init costs about a second).
bool UnderMpiLauncher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

// The NCCL communicator of the tensor-parallel ranks of `tp` on `backend`'s GPU, or why there is
// none (a build without NCCL).
llm::Status MakeDeviceCommunicator(llm::MpiCommunicator& tp, llm::kernels::Backend& backend,
                                   std::unique_ptr<llm::Communicator>* out) {
#ifdef LLM_HAVE_NCCL
  llm::StatusOr<std::unique_ptr<llm::Communicator>> nccl = llm::CreateNcclCommunicator(tp, backend);
  if (!nccl.ok()) return nccl.status().WithContext("creating the NCCL communicator");
  *out = std::move(*nccl);
  return llm::Status::Ok();
#else
  (void)tp;
  (void)backend;
  (void)out;
  return llm::Unavailable(
      "tensor parallelism on GPUs needs NCCL, and this build has none (install NCCL, e.g. "
      "libnccl-dev, and rebuild; or run engine.tensor_parallel_size 1 per GPU with "
      "engine.data_parallel_size)");
#endif
}

// One rank of an mpirun job: world rank 0 logs the layout; each data-parallel group is one
// engine on its own communicator, whose group-rank 0 is the coordinator on coordinator.port +
// the group index and the others follow it. Returns the exit code (after the world's final
// barrier, in the caller's MpiCommunicator destructor); a failing rank ends the whole job.
int RunMpiRank(const llm::ClusterConfig& config, const llm::ParallelLayout& layout,
               llm::MpiCommunicator& world) {
  world.set_timeout_s(config.engine.rank_timeout_s);
  if (world.rank() == 0) {
    for (const std::string& line : FormatLayoutTable(layout, world.HostNames(), config.coordinator))
      spdlog::info("layout: {}", line);
  }
  std::unique_ptr<llm::MpiCommunicator> group_comm;
  llm::MpiCommunicator* comm = &world;
  const int group = layout.GroupOf(world.rank());
  llm::ClusterConfig group_config = config;
  group_config.coordinator.port = llm::CoordinatorPortOf(config.coordinator, group);
  if (layout.data_parallel_size > 1) {
    auto split = world.Split(group, layout.GroupRankOf(world.rank()));
    if (!split.ok()) {
      spdlog::critical("rank {}: {}", world.rank(), split.status().ToString());
      world.AbortJob(2);
    }
    group_comm = std::move(*split);
    comm = group_comm.get();
    spdlog::info("world rank {}: rank {} of data-parallel group {} (coordinator port {})",
                 world.rank(), comm->rank(), group, group_config.coordinator.port);
  }
  // Pipeline stages: each stage's tensor-parallel ranks get their own communicator for the
  // all-reduces and gathers of the forward pass (the group's carries step plans and the
  // stage-to-stage messages).
  std::unique_ptr<llm::MpiCommunicator> stage_comm;
  if (layout.pipeline_parallel_size > 1 && layout.tensor_parallel_size > 1) {
    auto split = comm->Split(layout.StageOf(world.rank()), layout.TensorRankOf(world.rank()));
    if (!split.ok()) {
      spdlog::critical("rank {}: {}", world.rank(), split.status().ToString());
      world.AbortJob(2);
    }
    stage_comm = std::move(*split);
  }
  // engine.device: every rank takes its own GPU (by local rank). A rank that cannot ends the
  // whole job: the others would wait for it in their first collective.
  llm::StatusOr<llm::kernels::Backend*> backend = llm::EngineBackend(config.engine);
  if (!backend.ok()) {
    spdlog::critical("rank {}: {}", world.rank(), backend.status().ToString());
    if (world.world_size() > 1) world.AbortJob(1);
    return 1;
  }
  // Tensor parallelism on a GPU: the all-reduces and gathers of the forward pass run over NCCL
  // on the device's buffers; step messages and pipeline stages stay on MPI (host memory).
  std::unique_ptr<llm::Communicator> device_comm;
  llm::Communicator* engine_comm = comm;
  llm::Communicator* engine_stage_comm = stage_comm.get();
  if (!(*backend)->caps().host_memory && layout.tensor_parallel_size > 1) {
    llm::MpiCommunicator& tp = stage_comm ? *stage_comm : *comm;
    const llm::Status made = MakeDeviceCommunicator(tp, **backend, &device_comm);
    if (!made.ok()) {
      spdlog::critical("rank {}: engine.device '{}': {}", world.rank(), config.engine.device,
                       made.ToString());
      world.AbortJob(1);
    }
    if (stage_comm) {
      engine_stage_comm = device_comm.get();
    } else {
      engine_comm = device_comm.get();
    }
  }
  int rc = 0;
  if (comm->rank() != 0) {
    rc = llm::RunFollowerRank(group_config, *engine_comm, world.local_size(), engine_stage_comm,
                              *backend, comm);
    if (rc != 0) world.AbortJob(rc);  // this group's rank 0 would wait for this rank forever
  } else {
    rc = llm::RunCoordinator(group_config, engine_comm, world.local_size(), group,
                             engine_stage_comm, *backend, comm);
    // A start-up failure may leave this group's followers waiting for their first step message.
    if (rc != 0 && world.world_size() > 1) world.AbortJob(rc);
  }
  device_comm.reset();  // freed before the MPI communicator it was built from
  stage_comm.reset();   // freed before the communicator it was split from
  return rc;            // group_comm is freed before the world's communicator (MPI_Finalize)
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
  // Every rank reads the same config and stops here alike, so nobody waits for anybody.
  const llm::StatusOr<llm::ParallelLayout> layout =
      llm::ResolveParallelLayout(config->engine, world);
  if (!layout.ok()) {
    spdlog::critical("{}", layout.status().ToString());
    return 2;
  }
  if (mpi) return RunMpiRank(*config, *layout, *mpi);
  llm::ClusterConfig single = *config;
  single.coordinator.port = llm::CoordinatorPortOf(config->coordinator, 0);
  return llm::RunCoordinator(single, nullptr, 1);
}
