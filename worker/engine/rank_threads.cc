#include "worker/engine/rank_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace llm {

RankThreads ComputeRankThreads(const ClusterConfig& c, int ranks_on_host) {
  RankThreads out;
  const int host_cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const int mine =
      sched_getaffinity(0, sizeof(mask), &mask) == 0 ? std::max(1, CPU_COUNT(&mask)) : host_cores;
  if (c.engine.threads_per_rank > 0) {
    out.threads = c.engine.threads_per_rank;
    return out;
  }
  ranks_on_host = std::max(1, ranks_on_host);
  if (mine >= host_cores) {
    out.threads = std::max(1, host_cores / ranks_on_host);  // unbound: share the host
  } else {
    out.threads = mine;  // bound: these cores are this rank's
    if (mine * ranks_on_host < host_cores) {
      out.warning = "this rank may run on " + std::to_string(mine) + " of the host's " +
                    std::to_string(host_cores) + " cores (" + std::to_string(ranks_on_host) +
                    " rank(s) here): start mpirun with --bind-to none, or --map-by "
                    "socket:PE=N --bind-to core, or set engine.threads_per_rank";
    }
  }
  return out;
}

}  // namespace llm
