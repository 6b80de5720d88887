// The rank layout of a data-parallel × pipeline-parallel × tensor-parallel job
// (common/parallel_layout.h), and the router's default upstreams derived from it (cluster.yaml).
#include "common/parallel_layout.h"

#include <gtest/gtest.h>

#include "common/cluster_config.h"

namespace llm {
namespace {

EngineSection Engine(int dp, int tp, int pp = 1) {
  EngineSection e;
  e.data_parallel_size = dp;
  e.tensor_parallel_size = tp;
  e.pipeline_parallel_size = pp;
  return e;
}

TEST(ParallelLayout, ConsecutiveRanksFormATensorParallelGroup) {
  const StatusOr<ParallelLayout> l = ResolveParallelLayout(Engine(2, 2), 4);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->GroupOf(0), 0);
  EXPECT_EQ(l->GroupOf(1), 0);
  EXPECT_EQ(l->GroupOf(2), 1);
  EXPECT_EQ(l->GroupOf(3), 1);
  EXPECT_EQ(l->GroupRankOf(2), 0);
  EXPECT_EQ(l->GroupRankOf(3), 1);
  EXPECT_EQ(l->CoordinatorRankOf(1), 2);
  const StatusOr<ParallelLayout> dp4 = ResolveParallelLayout(Engine(4, 1), 4);
  ASSERT_TRUE(dp4.ok());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(dp4->GroupOf(r), r);
    EXPECT_EQ(dp4->GroupRankOf(r), 0);
  }
}

TEST(ParallelLayout, AJobSizeThatIsNotTheProductNamesTheKeys) {
  const StatusOr<ParallelLayout> l = ResolveParallelLayout(Engine(2, 1), 3);
  ASSERT_FALSE(l.ok());
  const std::string m = l.status().message();
  EXPECT_NE(m.find("engine.data_parallel_size"), std::string::npos) << m;
  EXPECT_NE(m.find("engine.tensor_parallel_size"), std::string::npos) << m;
  EXPECT_NE(m.find("= 2 rank(s), but this job has 3"), std::string::npos) << m;
  EXPECT_NE(m.find("mpirun -np 2"), std::string::npos) << m;
  EXPECT_FALSE(ResolveParallelLayout(Engine(1, 2), 1).ok());
  EXPECT_TRUE(ResolveParallelLayout(Engine(1, 1), 1).ok());
}

TEST(ParallelLayout, PipelineStagesHoldConsecutiveTensorParallelGroups) {
  // DP2 × PP2 × TP2: group g is world ranks 4g..4g+3, stage s its ranks 2s, 2s+1.
  const StatusOr<ParallelLayout> l = ResolveParallelLayout(Engine(2, 2, 2), 8);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->group_size(), 4);
  const int want_group[] = {0, 0, 0, 0, 1, 1, 1, 1};
  const int want_stage[] = {0, 0, 1, 1, 0, 0, 1, 1};
  const int want_tp[] = {0, 1, 0, 1, 0, 1, 0, 1};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(l->GroupOf(r), want_group[r]) << r;
    EXPECT_EQ(l->StageOf(r), want_stage[r]) << r;
    EXPECT_EQ(l->TensorRankOf(r), want_tp[r]) << r;
    EXPECT_EQ(l->GroupRankOf(r), r % 4) << r;
  }
  EXPECT_EQ(l->CoordinatorRankOf(1), 4);
  // The product must match the job.
  const StatusOr<ParallelLayout> bad = ResolveParallelLayout(Engine(1, 2, 2), 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("1 × 2 × 2 = 4 rank(s), but this job has 2"),
            std::string::npos)
      << bad.status().message();
}

TEST(ParallelLayout, LayersSplitBalancedOrAsPartitioned) {
  const auto ranges = [](int layers, int stages, std::vector<int> partition = {}) {
    std::vector<std::pair<int, int>> out;
    const StatusOr<std::vector<LayerRange>> r = PipelineLayerRanges(layers, stages, partition);
    if (!r.ok()) return out;
    for (const LayerRange& x : *r) out.emplace_back(x.begin, x.end);
    return out;
  };
  using V = std::vector<std::pair<int, int>>;
  EXPECT_EQ(ranges(5, 1), (V{{0, 5}}));
  EXPECT_EQ(ranges(5, 2), (V{{0, 3}, {3, 5}}));  // the extra layer before the last stage
  EXPECT_EQ(ranges(22, 4), (V{{0, 5}, {5, 11}, {11, 17}, {17, 22}}));
  EXPECT_EQ(ranges(32, 4), (V{{0, 8}, {8, 16}, {16, 24}, {24, 32}}));
  EXPECT_EQ(ranges(5, 5), (V{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
  EXPECT_EQ(ranges(5, 2, {1, 4}), (V{{0, 1}, {1, 5}}));
  // More stages than layers, and partitions that do not fit, name the keys.
  StatusOr<std::vector<LayerRange>> r = PipelineLayerRanges(5, 6);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("engine.pipeline_parallel_size = 6 exceeds the model's "
                                      "num_hidden_layers = 5"),
            std::string::npos)
      << r.status().message();
  r = PipelineLayerRanges(5, 2, {2, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("engine.pipeline_layer_partition gives 4 layers"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(PipelineLayerRanges(5, 2, {5, 0}).ok());
  EXPECT_FALSE(PipelineLayerRanges(5, 2, {1, 1, 3}).ok());
}

TEST(ParallelLayout, TableNamesEveryRankAndEachGroupsCoordinator) {
  CoordinatorSection c;
  c.host = "10.0.0.1";
  c.port = 6000;
  const ParallelLayout l = *ResolveParallelLayout(Engine(2, 2), 4);
  const std::vector<std::string> lines = FormatLayoutTable(l, {"a", "a", "b", "b"}, c);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], " group  stage  tp_rank  world_rank  host  coordinator");
  EXPECT_EQ(lines[1], "     0      0        0           0  a     10.0.0.1:6000");
  EXPECT_EQ(lines[2], "     0      0        1           1  a");
  EXPECT_EQ(lines[3], "     1      0        0           2  b     10.0.0.1:6001");
  EXPECT_EQ(lines[4], "     1      0        1           3  b");
  // A group over two hosts is called out.
  const std::vector<std::string> split = FormatLayoutTable(l, {"a", "b", "b", "b"}, c);
  ASSERT_EQ(split.size(), 6u);
  EXPECT_NE(split[5].find("group 0 spans hosts a, b"), std::string::npos) << split[5];
  // Pipeline stages across hosts are how it should be; a stage across hosts is called out.
  const ParallelLayout pp = *ResolveParallelLayout(Engine(1, 2, 2), 4);
  const std::vector<std::string> stages = FormatLayoutTable(pp, {"a", "a", "b", "b"}, c);
  ASSERT_EQ(stages.size(), 5u);
  EXPECT_EQ(stages[3], "     0      1        0           2  b");
  const std::vector<std::string> cut = FormatLayoutTable(pp, {"a", "b", "b", "b"}, c);
  ASSERT_EQ(cut.size(), 6u);
  EXPECT_NE(cut[5].find("group 0 stage 0 spans hosts a, b"), std::string::npos) << cut[5];
}

TEST(ParallelLayout, RouterUpstreamsDefaultToEveryGroupsCoordinator) {
  StatusOr<ClusterConfig> c = ParseClusterConfig(
      "engine:\n  data_parallel_size: 3\ncoordinator:\n  host: 10.1.2.3\n  port: 7000\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->router.upstreams,
            (std::vector<std::string>{"10.1.2.3:7000", "10.1.2.3:7001", "10.1.2.3:7002"}));
  // An explicit list wins.
  c = ParseClusterConfig("engine:\n  data_parallel_size: 2\n", "t",
                         {{"router.upstreams", "h:1,h:2,h:3"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"h:1", "h:2", "h:3"}));
  c = ParseClusterConfig("", "t");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"127.0.0.1:50051"}));
  // An explicit port per group.
  c = ParseClusterConfig("engine:\n  data_parallel_size: 2\ncoordinator:\n  ports: [9000, 7000]\n",
                         "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"127.0.0.1:9000", "127.0.0.1:7000"}));
  EXPECT_EQ(CoordinatorPortOf(c->coordinator, 1), 7000);
  c = ParseClusterConfig("", "t", {{"coordinator.ports", "9000"}});  // 1 group, 1 port
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->router.upstreams, (std::vector<std::string>{"127.0.0.1:9000"}));
  c = ParseClusterConfig("", "t",
                         {{"engine.data_parallel_size", "3"}, {"coordinator.ports", "1,2"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("coordinator.ports lists 2 port(s) but "
                                      "engine.data_parallel_size is 3"),
            std::string::npos)
      << c.status().message();
  EXPECT_FALSE(ParseClusterConfig("", "t", {{"coordinator.ports", "0"}}).ok());
  EXPECT_FALSE(ParseClusterConfig("", "t", {{"coordinator.ports", "70000"}}).ok());
  EXPECT_FALSE(ParseClusterConfig("", "t", {{"coordinator.ports", "x"}}).ok());
  // The last group's port must exist.
  c = ParseClusterConfig("", "t",
                         {{"engine.data_parallel_size", "4"}, {"coordinator.port", "65534"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("engine.data_parallel_size"), std::string::npos);
  EXPECT_NE(c.status().message().find("coordinator.port"), std::string::npos);
}

TEST(ParallelLayout, PipelineLayerPartitionIsOneCountPerStage) {
  StatusOr<ClusterConfig> c = ParseClusterConfig(
      "engine:\n  pipeline_parallel_size: 2\n  pipeline_layer_partition: [12, 10]\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.pipeline_layer_partition, (std::vector<int>{12, 10}));
  c = ParseClusterConfig(
      "", "t",
      {{"engine.pipeline_parallel_size", "3"}, {"engine.pipeline_layer_partition", "1,2"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("engine.pipeline_layer_partition lists 2 stage(s) but "
                                      "engine.pipeline_parallel_size is 3"),
            std::string::npos)
      << c.status().message();
  EXPECT_FALSE(ParseClusterConfig("", "t", {{"engine.pipeline_layer_partition", "0"}}).ok());
  EXPECT_FALSE(ParseClusterConfig("", "t", {{"engine.pipeline_layer_partition", "x"}}).ok());
}

}  // namespace
}  // namespace llm
