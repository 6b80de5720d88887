#include "common/parallel_layout.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace llm {

StatusOr<ParallelLayout> ResolveParallelLayout(const EngineSection& engine, int world_size) {
  const int dp = engine.data_parallel_size, pp = engine.pipeline_parallel_size,
            tp = engine.tensor_parallel_size;
  if (pp != 1) {
    return Unimplemented("engine.pipeline_parallel_size is " + std::to_string(pp) +
                         ": pipeline parallelism is not implemented yet; set it to 1 (the job "
                         "is engine.data_parallel_size × engine.tensor_parallel_size ranks)");
  }
  const long long product = static_cast<long long>(dp) * pp * tp;
  if (product != world_size) {
    const std::string np = std::to_string(product), world = std::to_string(world_size);
    std::string m = "engine.data_parallel_size × engine.pipeline_parallel_size × ";
    m.append("engine.tensor_parallel_size = ")
        .append(std::to_string(dp))
        .append(" × ")
        .append(std::to_string(pp))
        .append(" × ")
        .append(std::to_string(tp))
        .append(" = ")
        .append(np)
        .append(" rank(s), but this job has ")
        .append(world)
        .append(": start it with `mpirun -np ")
        .append(np)
        .append(" worker ...`, or set the keys so that their product is ")
        .append(world);
    return InvalidArgument(m);
  }
  ParallelLayout layout;
  layout.data_parallel_size = dp;
  layout.tensor_parallel_size = tp;
  layout.world_size = world_size;
  return layout;
}

int CoordinatorPortOf(const CoordinatorSection& coordinator, int group) {
  if (group >= 0 && static_cast<size_t>(group) < coordinator.ports.size()) {
    return coordinator.ports[static_cast<size_t>(group)];
  }
  return coordinator.port + group;
}

std::vector<std::string> CoordinatorAddresses(const CoordinatorSection& coordinator,
                                              int data_parallel_size) {
  std::vector<std::string> out;
  for (int g = 0; g < data_parallel_size; ++g) {
    out.push_back(coordinator.host + ":" + std::to_string(CoordinatorPortOf(coordinator, g)));
  }
  return out;
}

std::vector<std::string> FormatLayoutTable(const ParallelLayout& layout,
                                           const std::vector<std::string>& hosts,
                                           const CoordinatorSection& coordinator) {
  const auto host_of = [&](int r) {
    return r < static_cast<int>(hosts.size()) ? hosts[static_cast<size_t>(r)] : std::string("?");
  };
  size_t host_width = 4;
  for (int r = 0; r < layout.world_size; ++r) host_width = std::max(host_width, host_of(r).size());
  std::vector<std::string> lines;
  const auto row = [&](const std::string& group, const std::string& tp_rank,
                       const std::string& world_rank, const std::string& host,
                       const std::string& coord) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%6s %8s %11s  ", group.c_str(), tp_rank.c_str(),
                  world_rank.c_str());
    std::string line = buf;
    line.append(host).append(host_width - host.size() + 2, ' ').append(coord);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  };
  row("group", "tp_rank", "world_rank", "host", "coordinator");
  for (int r = 0; r < layout.world_size; ++r) {
    const int g = layout.GroupOf(r);
    const bool first = layout.GroupRankOf(r) == 0;
    row(std::to_string(g), std::to_string(layout.GroupRankOf(r)), std::to_string(r), host_of(r),
        first ? coordinator.host + ":" + std::to_string(CoordinatorPortOf(coordinator, g)) : "");
  }
  for (int g = 0; g < layout.data_parallel_size; ++g) {
    std::vector<std::string> group_hosts;
    for (int i = 0; i < layout.tensor_parallel_size; ++i) {
      const std::string h = host_of(layout.CoordinatorRankOf(g) + i);
      if (std::find(group_hosts.begin(), group_hosts.end(), h) == group_hosts.end()) {
        group_hosts.push_back(h);
      }
    }
    if (group_hosts.size() < 2) continue;
    std::string names;
    for (const auto& h : group_hosts) names.append(names.empty() ? "" : ", ").append(h);
    lines.push_back("warning: tensor-parallel group " + std::to_string(g) + " spans hosts " +
                    names +
                    " (slow): give each host a multiple of engine.tensor_parallel_size slots "
                    "and keep mpirun's by-slot mapping");
  }
  return lines;
}

}  // namespace llm
