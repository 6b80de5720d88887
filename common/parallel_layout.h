// How the ranks of one `mpirun -np W worker` job are laid out: W = data_parallel_size ×
// pipeline_parallel_size × tensor_parallel_size (engine.*). Each data-parallel group is an
// independent engine over its own communicator of pp × tp consecutive world ranks; inside a
// group, stage s holds the tp consecutive group ranks s*tp .. s*tp+tp-1 (its tensor-parallel
// ranks), so mpirun's default by-slot mapping keeps a tensor-parallel group inside a node when
// the node's slots are a multiple of tp, and the pipeline stages cross the nodes (as vLLM
// places them). Group-rank 0 (stage 0, tp rank 0) of group g is its coordinator, serving gRPC
// on coordinator.port + g (or coordinator.ports[g]).
//
// Pure logic (no MPI): the worker resolves and prints it at start-up, the router derives its
// default upstreams from the same rule.
#pragma once

#include <string>
#include <vector>

#include "common/config_sections.h"
#include "common/status.h"

namespace llm {

struct ParallelLayout {
  int data_parallel_size = 1;
  int pipeline_parallel_size = 1;
  int tensor_parallel_size = 1;
  int world_size = 1;

  // Ranks of one data-parallel group (one engine).
  int group_size() const { return pipeline_parallel_size * tensor_parallel_size; }
  // The data-parallel group of a world rank, and the rank inside it.
  int GroupOf(int world_rank) const { return world_rank / group_size(); }
  int GroupRankOf(int world_rank) const { return world_rank % group_size(); }
  // The pipeline stage and the tensor-parallel rank (inside the stage) of a world rank.
  int StageOf(int world_rank) const { return GroupRankOf(world_rank) / tensor_parallel_size; }
  int TensorRankOf(int world_rank) const { return GroupRankOf(world_rank) % tensor_parallel_size; }
  // The world rank of group `group`'s coordinator (its group-rank 0).
  int CoordinatorRankOf(int group) const { return group * group_size(); }
};

// Checks engine.data_parallel_size × engine.pipeline_parallel_size ×
// engine.tensor_parallel_size against the job's `world_size`. InvalidArgument naming the keys
// and the job size when they do not match.
StatusOr<ParallelLayout> ResolveParallelLayout(const EngineSection& engine, int world_size);

// The layers [begin, end) one pipeline stage holds.
struct LayerRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};

// Every stage's contiguous layer range for `num_layers` layers over `stages` stages: `partition`
// (engine.pipeline_layer_partition, layers per stage) when given, else balanced as vLLM does
// (num_layers / stages each, the remainder one each to the stages before the last, which also
// runs the final norm and lm_head). InvalidArgument naming the keys when there are more stages
// than layers or the partition does not add up to num_layers (or leaves a stage empty).
StatusOr<std::vector<LayerRange>> PipelineLayerRanges(int num_layers, int stages,
                                                      const std::vector<int>& partition = {});

// The gRPC port of data-parallel group `group`'s coordinator: coordinator.ports[group] when
// the list is set (ParseClusterConfig checks it has one per group), else coordinator.port +
// group.
int CoordinatorPortOf(const CoordinatorSection& coordinator, int group);

// "host:port" of every group's coordinator (coordinator.host, CoordinatorPortOf), by group: the
// router's default upstreams.
std::vector<std::string> CoordinatorAddresses(const CoordinatorSection& coordinator,
                                              int data_parallel_size);

// The start-up table of the layout, one line per world rank:
//   group  stage  tp_rank  world_rank  host  coordinator
// `hosts` is indexed by world rank (missing entries print as "?"); the coordinator column names
// host:port on each group's first rank. Also a line per tensor-parallel group (one stage of one
// group) whose ranks span several hosts (tensor parallelism across a node boundary is slow).
std::vector<std::string> FormatLayoutTable(const ParallelLayout& layout,
                                           const std::vector<std::string>& hosts,
                                           const CoordinatorSection& coordinator);

}  // namespace llm
