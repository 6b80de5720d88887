// Test harness for the coordinator: starts the real `worker` binary as a child process on a
// free loopback port, waits (bounded) for its Health, and kills it on destruction (RAII).
#pragma once

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/llm.grpc.pb.h"
#include "proto/llm.pb.h"
#include "tests/common/child_process.h"

namespace llm::testing {

namespace pb = ::llm::v1;

inline std::string SharedPath(const std::string& rel) {
  return (std::filesystem::path(LLM_SHARED_DIR) / rel).string();
}

// Skips the test (never passes it) when shared data is missing.
#define LLM_REQUIRE_SHARED(rel)                                                        \
  do {                                                                                 \
    if (!std::filesystem::exists(::llm::testing::SharedPath(rel)))                     \
      GTEST_SKIP() << "missing shared test data: " << ::llm::testing::SharedPath(rel); \
  } while (0)

inline std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

class WorkerProcess {
 public:
  // Starts `worker --section.key value ...` with its output in a log file. `env` entries
  // ("NAME=value") are added to the child's environment; a bare "NAME" removes it.
  explicit WorkerProcess(std::vector<std::string> flags, std::vector<std::string> env = {})
      : port_(FreeLoopbackPort()),
        child_(Argv(port_, std::move(flags)), "coordinator_test", std::move(env)) {}
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Waits until the port accepts connections, then until Health answers (true), or until the
  // child exits / the time is up (false). The gRPC channel is made once the port is open, so
  // it never starts in reconnect backoff.
  bool WaitHealthy(double timeout_s = 60.0) {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (!PortOpen()) {
      if (Exited() || std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!channel_) {
      channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials());
      admin_ = pb::Admin::NewStub(channel_);
      generation_ = pb::Generation::NewStub(channel_);
    }
    while (std::chrono::steady_clock::now() < end) {
      if (Exited()) return false;
      grpc::ClientContext ctx;
      ctx.set_deadline(In(2.0));
      ctx.set_wait_for_ready(true);
      pb::HealthResponse r;
      if (admin_->Health(&ctx, pb::HealthRequest(), &r).ok()) return true;
    }
    return false;
  }

  // True once the child has exited; its status is then in exit_status().
  bool Exited() { return child_.Exited(); }
  bool WaitExit(double timeout_s) { return child_.WaitExit(timeout_s); }
  std::optional<int> exit_status() const { return child_.exit_status(); }
  void Signal(int sig) { child_.Signal(sig); }

  // CPU seconds (user + system) the child has used so far.
  double CpuSeconds() const {
    std::ifstream in("/proc/" + std::to_string(child_.pid()) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string f;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  bool PortOpen() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    const bool open = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) close(fd);
    return open;
  }

  std::string Log() const { return child_.Log(); }
  int port() const { return port_; }
  // The stubs exist once WaitHealthy() returned true.
  pb::Admin::Stub& admin() { return *admin_; }
  pb::Generation::Stub& generation() { return *generation_; }

 private:
  static std::vector<std::string> Argv(int port, std::vector<std::string> flags) {
    std::vector<std::string> argv = {LLM_WORKER_BIN, "--coordinator.host", "127.0.0.1",
                                     "--coordinator.port", std::to_string(port)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }

  int port_ = 0;  // initialized before child_ (declared first)
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Admin::Stub> admin_;
  std::unique_ptr<pb::Generation::Stub> generation_;
  ChildProcess child_;  // declared last: stopped (SIGTERM, then SIGKILL) first
};

}  // namespace llm::testing
