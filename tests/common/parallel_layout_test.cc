// The rank layout of a data-parallel × tensor-parallel job (common/parallel_layout.h), and the
// router's default upstreams derived from it (cluster.yaml).
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

TEST(ParallelLayout, PipelineParallelismIsNotImplementedYet) {
  const StatusOr<ParallelLayout> l = ResolveParallelLayout(Engine(1, 2, 2), 4);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(l.status().message().find("engine.pipeline_parallel_size is 2: pipeline parallelism "
                                      "is not implemented yet"),
            std::string::npos)
      << l.status().message();
}

TEST(ParallelLayout, TableNamesEveryRankAndEachGroupsCoordinator) {
  CoordinatorSection c;
  c.host = "10.0.0.1";
  c.port = 6000;
  const ParallelLayout l = *ResolveParallelLayout(Engine(2, 2), 4);
  const std::vector<std::string> lines = FormatLayoutTable(l, {"a", "a", "b", "b"}, c);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], " group  tp_rank  world_rank  host  coordinator");
  EXPECT_EQ(lines[1], "     0        0           0  a     10.0.0.1:6000");
  EXPECT_EQ(lines[2], "     0        1           1  a");
  EXPECT_EQ(lines[3], "     1        0           2  b     10.0.0.1:6001");
  EXPECT_EQ(lines[4], "     1        1           3  b");
  // A group over two hosts is called out.
  const std::vector<std::string> split = FormatLayoutTable(l, {"a", "b", "b", "b"}, c);
  ASSERT_EQ(split.size(), 6u);
  EXPECT_NE(split[5].find("group 0 spans hosts a, b"), std::string::npos) << split[5];
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

}  // namespace
}  // namespace llm
