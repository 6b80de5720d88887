#include "common/parallel_layout.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace llm {

StatusOr<ParallelLayout> ResolveParallelLayout(const EngineSection& engine, int world_size) {
  const int dp = engine.data_parallel_size, pp = engine.pipeline_parallel_size,
            tp = engine.tensor_parallel_size;
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
  layout.pipeline_parallel_size = pp;
  layout.tensor_parallel_size = tp;
  layout.world_size = world_size;
  return layout;
}

StatusOr<std::vector<LayerRange>> PipelineLayerRanges(int num_layers, int stages,
                                                      const std::vector<int>& partition) {
  if (stages < 1) return InvalidArgument("engine.pipeline_parallel_size must be at least 1");
  if (stages > num_layers) {
    return InvalidArgument(
        "engine.pipeline_parallel_size = " + std::to_string(stages) +
        " exceeds the model's num_hidden_layers = " + std::to_string(num_layers) +
        ": every pipeline stage needs at least one layer");
  }
  std::vector<int> sizes = partition;
  if (sizes.empty()) {
    sizes.assign(static_cast<size_t>(stages), num_layers / stages);
    // The remainder goes to the stages just before the last (the last also runs the lm_head).
    for (int i = 0; i < num_layers % stages; ++i) sizes[static_cast<size_t>(stages - 2 - i)]++;
  } else {
    if (sizes.size() != static_cast<size_t>(stages)) {
      return InvalidArgument(
          "engine.pipeline_layer_partition lists " + std::to_string(sizes.size()) +
          " stage(s) but engine.pipeline_parallel_size is " + std::to_string(stages));
    }
    long long total = 0;
    for (int n : sizes) total += n;
    const bool empty =
        std::find_if(sizes.begin(), sizes.end(), [](int n) { return n < 1; }) != sizes.end();
    if (total != num_layers || empty) {
      return InvalidArgument(
          "engine.pipeline_layer_partition gives " + std::to_string(total) +
          " layers but the model has num_hidden_layers = " + std::to_string(num_layers) +
          " (every stage needs at least one layer)");
    }
  }
  std::vector<LayerRange> ranges;
  int begin = 0;
  for (int n : sizes) {
    ranges.push_back({begin, begin + n});
    begin += n;
  }
  return ranges;
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
  const auto row = [&](const std::string& group, const std::string& stage,
                       const std::string& tp_rank, const std::string& world_rank,
                       const std::string& host, const std::string& coord) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%6s %6s %8s %11s  ", group.c_str(), stage.c_str(),
                  tp_rank.c_str(), world_rank.c_str());
    std::string line = buf;
    line.append(host).append(host_width - host.size() + 2, ' ').append(coord);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  };
  row("group", "stage", "tp_rank", "world_rank", "host", "coordinator");
  for (int r = 0; r < layout.world_size; ++r) {
    const int g = layout.GroupOf(r);
    const bool first = layout.GroupRankOf(r) == 0;
    row(std::to_string(g), std::to_string(layout.StageOf(r)),
        std::to_string(layout.TensorRankOf(r)), std::to_string(r), host_of(r),
        first ? coordinator.host + ":" + std::to_string(CoordinatorPortOf(coordinator, g)) : "");
  }
  for (int g = 0; g < layout.data_parallel_size; ++g) {
    for (int stage = 0; stage < layout.pipeline_parallel_size; ++stage) {
      const int first = layout.CoordinatorRankOf(g) + stage * layout.tensor_parallel_size;
      std::vector<std::string> group_hosts;
      for (int i = 0; i < layout.tensor_parallel_size; ++i) {
        const std::string h = host_of(first + i);
        if (std::find(group_hosts.begin(), group_hosts.end(), h) == group_hosts.end()) {
          group_hosts.push_back(h);
        }
      }
      if (group_hosts.size() < 2) continue;
      std::string names;
      for (const auto& h : group_hosts) names.append(names.empty() ? "" : ", ").append(h);
      std::string where = "tensor-parallel group " + std::to_string(g);
      if (layout.pipeline_parallel_size > 1) where += " stage " + std::to_string(stage);
      lines.push_back("warning: " + where + " spans hosts " + names +
                      " (slow): give each host a multiple of engine.tensor_parallel_size slots "
                      "and keep mpirun's by-slot mapping");
    }
  }
  return lines;
}

}  // namespace llm
