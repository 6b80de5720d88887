// What /proc says about the processes of an mpirun job, for tests that check idle ranks do
// not spin (tests/integration/mpi_http_test.cc, tests/mpi/data_parallel_test.cc), and where
// mpirun is.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace llm::e2e {

// The executable `name` on the PATH, or "".
inline std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path p = std::filesystem::path(dir) / name;
    if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

// The ranks mpirun started (its children), by their OMPI_COMM_WORLD_RANK.
inline std::map<int, pid_t> RankPids(pid_t mpirun) {
  std::map<int, pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != mpirun) continue;
    std::ifstream env(entry.path() / "environ");
    for (std::string var; std::getline(env, var, '\0');) {
      if (var.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0)
        out[std::stoi(var.substr(21))] = std::stoi(name);
    }
  }
  return out;
}

// CPU seconds (user + system) the process has used; -1 when it is gone.
inline double CpuSecondsOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace llm::e2e
