// How many compute threads a rank runs: engine.threads_per_rank when set, else the cores this
// process may run on. mpirun binds each rank to one core by default, which would leave the
// rest of a host idle; a rank bound to fewer cores than the host has is told so in the log.
#pragma once

#include <string>

#include "common/cluster_config.h"

namespace llm {

struct RankThreads {
  int threads = 1;
  std::string warning;  // non-empty: log it (the rank cannot use most of its host)
};

// `ranks_on_host`: ranks of this job on this host. A process free to run anywhere (mpirun
// --bind-to none) splits the host's cores between its ranks; one bound to a set of cores uses
// exactly those (mpirun --map-by ...:PE=n --bind-to core gives each rank its own n).
RankThreads ComputeRankThreads(const ClusterConfig& config, int ranks_on_host);

}  // namespace llm
