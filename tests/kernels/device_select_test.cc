// Which GPU a rank drives (kernels/device_select.cc): the local-rank variables of Open MPI,
// MPICH / Intel MPI and Slurm, in that order, modulo the devices; bad values name the variable.
// Host logic: runs without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "kernels/cuda_backend.h"

namespace llm::kernels {
namespace {

constexpr const char* kVars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};

// Clears the three variables for the test and puts back what the process had.
class LocalRankEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      const char* v = std::getenv(kVars[i]);
      saved_[i] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(kVars[i]);
    }
  }
  void TearDown() override {
    for (int i = 0; i < 3; ++i) {
      if (saved_[i]) {
        setenv(kVars[i], saved_[i]->c_str(), 1);
      } else {
        unsetenv(kVars[i]);
      }
    }
  }
  std::optional<std::string> saved_[3];
};

TEST_F(LocalRankEnv, NoVariableIsDeviceZero) {
  auto d = DeviceForLocalRank(4);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, 0);
}

TEST_F(LocalRankEnv, EachVariableModuloTheDevices) {
  for (const char* name : kVars) {
    setenv(name, "5", 1);
    auto d = DeviceForLocalRank(4);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status().ToString();
    EXPECT_EQ(*d, 1) << name;
    d = DeviceForLocalRank(8);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, 5) << name;
    setenv(name, "0", 1);
    d = DeviceForLocalRank(1);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, 0) << name;
    unsetenv(name);
  }
}

TEST_F(LocalRankEnv, OpenMpiWinsOverMpichWinsOverSlurm) {
  setenv("SLURM_LOCALID", "3", 1);
  setenv("MPI_LOCALRANKID", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(*DeviceForLocalRank(8), 1);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(*DeviceForLocalRank(8), 2);
  unsetenv("MPI_LOCALRANKID");
  EXPECT_EQ(*DeviceForLocalRank(8), 3);
}

TEST_F(LocalRankEnv, BadValuesAreInvalidArgumentNamingTheVariable) {
  for (const char* name : kVars) {
    for (const char* bad : {"", "-1", "one", "1.5", " 2", "12345678901"}) {
      setenv(name, bad, 1);
      auto d = DeviceForLocalRank(2);
      ASSERT_FALSE(d.ok()) << name << "='" << bad << "' accepted";
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(d.status().message().find(name), std::string::npos) << d.status().ToString();
    }
    unsetenv(name);
  }
}

TEST_F(LocalRankEnv, NoDeviceIsAnError) {
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  EXPECT_FALSE(DeviceForLocalRank(0).ok());
}

}  // namespace
}  // namespace llm::kernels
